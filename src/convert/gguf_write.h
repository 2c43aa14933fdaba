// Writing a model under construction (cv_model) as a GGUF version 3 file that llama.cpp loads: the
// other side of the comparison with llama.cpp (e2e/llamacpp), for `ml_convert random --gguf`.
//
// What is written (ggml's docs/gguf.md; the keys are the ones llama.cpp's loader reads for the
// architecture, llama-arch.cpp / llama-model.cpp):
//   - general.architecture from a table of the architectures llama.cpp runs and krafla writes
//     (llama for ML_ARCH_LLAMA, qwen2, qwen3, gemma3), the hyperparameters under "<arch>.",
//   - a "llama" (SentencePiece) vocabulary of exactly vocab_size tokens: the model's llama2.c
//     tokenizer.bin when it has one (spaces back to U+2581, "<0xHH>" pieces as byte tokens, <unk>,
//     <s>, </s> as unknown/control), else a placeholder laid out like Llama 2's (<unk> <s> </s>, the
//     256 byte tokens, then "<tok_N>"; needs vocab_size >= 259). A Hugging Face tokenizer is not
//     carried: its model gets the placeholder vocabulary too (the comparison feeds token ids).
//     Pieces that repeat an earlier one get "[DUP_N]" (llama.cpp asserts its pieces are unique),
//   - every tensor under llama.cpp's name (tok_embd -> token_embd.weight, X -> X.weight, a
//     ".bias" kept), dims ne[0] = cols, ne[1] = rows (1 x n -> one dim), Q8 -> Q8_0 and Q4 ->
//     Q4_0 with the f16 scale put back in front of each block (the same bits: no requantization),
//     F32/F16 as they are,
//   - RoPE: llama.cpp rotates interleaved pairs for llama and NEOX (krafla's "half") pairs for
//     qwen2/qwen3/gemma3. A model in the other layout (a Llama from a Hugging Face config is
//     "half") gets its q/k outputs reordered within each head -- attn_q/attn_k rows, their biases,
//     the q/k norm weights -- as llama.cpp's own converter permutes Llama's q/k (whole rows: still
//     no requantization).
// Refused with ML_E_ARG and a message saying what to change: f32 block scales (GGUF's Q8_0/Q4_0
// hold f16: write with --scales f16), header features llama.cpp's graph for that architecture
// would not compute (flags, activation, RoPE scaling, partial rotary, an attention scale or
// embedding scale other than its own), and qwen3.5 (not written yet). The file goes through
// core/out_file.h (a temporary file renamed into place).
#pragma once
#include "convert/convert.h"

ml_status cv_write_gguf(const cv_model* m, const char* path, ml_error* err);
