// Pieces of the GGUF writer (cv_write_gguf, gguf_write.h) shared by its files: gguf_write.cpp (the
// architectures and the metadata keys), gguf_write_vocab.cpp (the vocabulary) and
// gguf_write_tensors.cpp (tensor infos and data). Not part of the converter's interface.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "convert/convert.h"
#include "core/out_file.h"

// The GGUF writer's output: it counts bytes (f null) or writes them; the first failure sticks in s.
struct gguf_sink {
  ml_out_file* f;
  uint64_t pos = 0;
  ml_error* err;
  ml_status s = ML_OK;

  void put(const void* p, size_t n) {
    if (s == ML_OK && f) s = ml_out_write(f, p, n, err);
    pos += n;
  }
  void u32(uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; ++i) b[i] = (uint8_t)(v >> (8 * i));
    put(b, 4);
  }
  void u64(uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; ++i) b[i] = (uint8_t)(v >> (8 * i));
    put(b, 8);
  }
  void f32(float x) {
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    u32(bits);
  }
  void str(const char* p, size_t n) {
    u64(n);
    put(p, n);
  }
  void str(const char* p) { str(p, std::strlen(p)); }
  void zeros_to(uint64_t target) {
    static const uint8_t z[64] = {0};
    while (pos < target) put(z, target - pos < 64 ? (size_t)(target - pos) : 64);
  }
};

// The pieces, scores and types of vocab_size tokens: pieces back to back in bytes, token i at
// off[i], len[i].
struct gguf_vocab {
  cv_buf bytes, off, len, score, type;  // u8, u64, u32, f32, i32
  size_t fill = 0;
};

// The vocabulary of m->h.vocab_size tokens written as a "llama" (SentencePiece) tokenizer: from the
// model's llama2.c tokenizer.bin, else a placeholder; repeated pieces renamed (gguf_write.h).
ml_status gguf_vocab_make(const cv_model* m, gguf_vocab* v, ml_error* err);

// Qwen3.5's attention layers: partner[i] is the index of the attn_gate merged into tensor i (an
// attn_q), GGUF_UNMERGED otherwise, and GGUF_MERGED for that attn_gate itself (written inside its
// attn_q). *n_merged counts the pairs. Without qwen35 every entry is GGUF_UNMERGED.
inline constexpr size_t GGUF_UNMERGED = SIZE_MAX, GGUF_MERGED = SIZE_MAX - 1;
ml_status gguf_plan_merges(const cv_model* m, bool qwen35, cv_buf* partner, size_t* n_merged, ml_error* err);

// v rounded up to GGUF_DEFAULT_ALIGNMENT.
uint64_t gguf_align_up(uint64_t v);

// The tensor infos (the model's, then rope_freqs.weight when n_freqs > 0); returns the data
// section's size through *data_size.
void gguf_write_infos(gguf_sink* o, const cv_model* m, const size_t* partner, bool qwen35, uint32_t n_freqs,
                      uint64_t* data_size);

// Every tensor's data from data_start on, each padded to the alignment: Q8_0/Q4_0 blocks rebuilt
// from krafla's quants and f16 scales, qwen35's attn_q/attn_gate pairs merged per head, and with
// permute the q/k outputs reordered within heads of hd to llama.cpp's RoPE pair layout
// (to_interleaved: its "llama" one).
void gguf_write_tensors(gguf_sink* o, const cv_model* m, const size_t* partner, bool permute, size_t hd,
                        bool to_interleaved, uint64_t data_start);
