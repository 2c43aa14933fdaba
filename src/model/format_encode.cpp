// Encoders for the .mlb header and directory entries (docs/format.md): every field is written
// explicitly little-endian at its documented offset, so the bytes do not depend on the host's
// struct layout or byte order. Reserved bytes and the unused tail of a name are zero.
#include <cstring>

#include "model/format.h"

namespace {

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

void put_f32(uint8_t* p, float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  put_u32(p, bits);
}

}  // namespace

void ml_mlb_encode_header(const ml_mlb_header* h, uint8_t out[ML_MLB_HEADER_SIZE]) {
  std::memset(out, 0, ML_MLB_HEADER_SIZE);
  std::memcpy(out, ML_MLB_MAGIC, sizeof ML_MLB_MAGIC);
  put_u32(out + 8, h->version);
  put_u32(out + 12, h->header_size);
  put_u32(out + 16, h->arch);
  put_u32(out + 20, h->dim);
  put_u32(out + 24, h->hidden_dim);
  put_u32(out + 28, h->n_layers);
  put_u32(out + 32, h->n_heads);
  put_u32(out + 36, h->n_kv_heads);
  put_u32(out + 40, h->head_dim);
  put_u32(out + 44, h->vocab_size);
  put_u32(out + 48, h->max_seq);
  put_u32(out + 52, h->wtype);
  put_u32(out + 56, h->scale_type);
  put_f32(out + 60, h->norm_eps);
  put_f32(out + 64, h->rope_theta);
  put_u32(out + 68, h->rope_type);
  put_u32(out + 72, h->rope_scaling);
  put_f32(out + 76, h->rope_factor);
  put_f32(out + 80, h->rope_low_freq_factor);
  put_f32(out + 84, h->rope_high_freq_factor);
  put_u32(out + 88, h->rope_orig_max_seq);
  put_u32(out + 92, h->flags);
  put_u32(out + 96, h->activation);
  put_f32(out + 100, h->embed_scale);
  put_u32(out + 104, h->sliding_window);
  put_u32(out + 108, h->sliding_pattern);
  put_u32(out + 112, h->linear_period);
  put_u32(out + 116, h->linear_k_heads);
  put_u32(out + 120, h->linear_v_heads);
  put_u32(out + 124, h->linear_k_dim);
  put_u32(out + 128, h->linear_v_dim);
  put_u32(out + 132, h->linear_conv);
  put_u32(out + 136, h->bos_id);
  put_u32(out + 140, h->eos_id);
  put_u32(out + 144, h->hidden_dim_orig);
  put_u32(out + 148, h->n_tensors);
  put_u64(out + 152, h->dir_offset);
  put_u64(out + 160, h->tokenizer_offset);
  put_u64(out + 168, h->tokenizer_size);
  put_u64(out + 176, h->file_size);
  if (h->version >= 2) {
    put_f32(out + 184, h->rope_local_theta);
    put_u32(out + 188, h->n_rot);
    put_f32(out + 192, h->attn_scale);
    put_f32(out + 196, h->logit_softcap);
  }
  // The rest is reserved, zero (memset above).
}

void ml_mlb_encode_tensor(const ml_mlb_tensor* t, uint8_t out[ML_MLB_DIR_ENTRY_SIZE]) {
  std::memset(out, 0, ML_MLB_DIR_ENTRY_SIZE);
  // At most 47 name bytes, so at least one NUL always follows.
  const size_t len = strnlen(t->name, ML_MLB_NAME_MAX - 1);
  std::memcpy(out, t->name, len);
  put_u32(out + 48, t->type);
  put_u32(out + 52, t->scale_type);
  put_u32(out + 56, t->rows);
  put_u32(out + 60, t->cols);
  put_u64(out + 64, t->data_offset);
  put_u64(out + 72, t->data_size);
  put_u64(out + 80, t->scale_offset);
  put_u64(out + 88, t->scale_size);
}
