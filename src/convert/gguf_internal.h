// Pieces of the GGUF importer shared by its files (not part of the converter's interface).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "convert/convert.h"
#include "convert/gguf.h"

// The GGUF token types (llama.cpp's llama_token_type / tokenizer.ggml.token_type).
enum gguf_token_type : int32_t {
  GGUF_TOK_NORMAL = 1, GGUF_TOK_UNKNOWN = 2, GGUF_TOK_CONTROL = 3, GGUF_TOK_USER_DEFINED = 4, GGUF_TOK_UNUSED = 5,
  GGUF_TOK_BYTE = 6,
};

// Carries g's tokenizer into m (gguf_tokenizer.cpp): "llama" (SentencePiece) as a llama2.c
// tokenizer.bin, "gpt2" (byte-level BPE) as a synthesized tokenizer.json in a kind-2 section with
// tokenizer.chat_template (or the file at chat_template, when given). Sets m->h.bos_id/eos_id.
// A file without tokenizer.ggml.model gets no tokenizer (then chat_template is refused).
ml_status cv_gguf_tokenizer(cv_model* m, const gguf_file* g, const char* chat_template, ml_error* err);

// Decodes n values (a whole number of blocks) of tensor type `type` at p into out (gguf_dequant.cpp).
// false when the type has no decoder here (the caller names the tensor).
bool cv_gguf_dequant(uint32_t type, const uint8_t* p, uint64_t n, float* out);

// --- the importer (cv_gguf), its methods in gguf_import.cpp (the header, the entry points),
// gguf_tensors.cpp (tensor copy and requantization) and gguf_qwen35.cpp (Qwen3.5's keys and layers)

// An architecture the importer takes: its general.architecture name (the keys' prefix) and what
// the .mlb header says of it.
struct gguf_arch {
  const char* name;
  uint32_t arch, rope_type, flags;
};

inline constexpr size_t GGUF_WARN_NAMES = 2048;  // bytes of tensor names listed in the requantization warning

// One conversion's state: the parsed file, the model being built and what has been consumed.
struct gguf_importer {
  const cv_gguf_opts* o;
  gguf_file g;
  cv_model m;
  const gguf_arch* a = nullptr;
  uint32_t dim_src = 0, head_dim_src = 0;  // before padding (equal to the header's when none)
  uint32_t n_blocks = 0;                   // block_count: n_layers plus qwen35's MTP layers
  float norm_mul = 1.0f;                   // sqrt(dim_src / dim) when dim is padded
  bool* used = nullptr;                    // per GGUF tensor: consumed
  cv_buf used_buf;
  char requant[GGUF_WARN_NAMES] = {0};
  size_t n_requant = 0;
  ml_error* err;

  // "<prefix>.<rest>" into buf.
  const char* key(char* buf, size_t cap, const char* rest) {
    std::snprintf(buf, cap, "%s.%s", a->name, rest);
    return buf;
  }
  ml_status u32(const char* rest, bool required, uint32_t* out) {
    char k[128];
    return gguf_get_u32(&g, key(k, sizeof k, rest), required, out, err);
  }
  ml_status f32(const char* rest, bool required, float* out) {
    char k[128];
    return gguf_get_f32(&g, key(k, sizeof k, rest), required, out, err);
  }

  // Drops t's mapped pages once they are read (ml_file_release: the file gives them back if read
  // again), so the source does not stay resident beside the converted tensors. A no-op when the
  // file is a caller's buffer.
  void release(const gguf_tensor* t) {
    if (g.file.mapped) ml_file_release(&g.file, (size_t)(t->data - g.file.data), (size_t)t->size);
  }

  ml_status header();
  ml_status qwen35_header();
  ml_status qwen35_pattern();
  ml_status qwen35_rope_sections();
  ml_status qwen35_layer(uint32_t l);
  ml_status untile_map(uint32_t n_before, uint32_t width, cv_buf* out);
  ml_status skip_mtp();
  void note_requant(const gguf_tensor* t);
  ml_status rope_freqs();
  ml_status choose_wtype();
  const gguf_tensor* take(const char* gname, bool required, ml_status* s);
  ml_status check_shape(const gguf_tensor* t, uint64_t cols, uint64_t rows);
  ml_status to_float(const gguf_tensor* t, cv_buf* out);
  ml_status add_vector(const char* name, const char* gname, uint32_t n, uint32_t n_src, bool is_norm,
                       const uint32_t* elem_of = nullptr);
  ml_status add_matrix(const char* name, const char* gname, uint32_t rows, uint32_t cols, uint32_t src_rows,
                       uint32_t src_cols, uint32_t head_pad_rows, uint32_t head_pad_cols);
  ml_status add_picked(const char* name, const gguf_tensor* t, uint32_t rows, uint32_t cols, const uint32_t* row_of,
                       const uint32_t* col_of);
  ml_status add_conv(const char* name, const char* gname, uint32_t channels, uint32_t kernel, const uint32_t* chan_of);
  ml_status copy_quant(const char* name, const gguf_tensor* t, uint32_t rows, uint32_t cols,
                       const uint32_t* row_of = nullptr, const uint32_t* blk_of = nullptr);
  ml_status tensors();
};
