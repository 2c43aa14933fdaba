// Reader of llama2.c float32 checkpoints for ref_forward (the float model's own output).
// Layouts, from llama2.c's export.py:
//  - legacy (version 0): int32 dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size
//    (negative: a separate classifier follows), seq_len; then token_embedding, rms_att[L],
//    wq[L], wk[L], wv[L], wo[L], rms_ffn[L], w1[L], w2[L], w3[L], rms_final,
//    freq_cis_real and freq_cis_imag (seq_len*head_dim/2 each, skipped), [wcls].
//  - version 1: u32 magic 0x616b3432 ("ak42"), int32 version = 1, the 7 int32 params
//    (vocab positive), uint8 shared_classifier, zero padding to 256 bytes; then rms_att[L],
//    rms_ffn[L], rms_final, token_embedding, wq[L], wk[L], wv[L], wo[L], w1[L], w2[L], w3[L],
//    [wcls when not shared]; no freq_cis.
// Contract: load_llama2c returns the weights as double with quantized = false, norm_eps 1e-5,
// rope_theta 10000, rope_type 0. The file size must equal the layout's exactly; anything else
// throws RefError(2, msg naming the field).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ref_model.h"

namespace ref {

RefModel load_llama2c(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace ref
