// The GGUF writer's tensors (gguf_write.h): llama.cpp's names, types and shapes in the tensor
// infos, then the data, Q8_0/Q4_0 blocks rebuilt from krafla's separate quants and f16 scales.
#include <cstdio>
#include <cstring>

#include "convert/gguf_types.h"
#include "convert/gguf_write_internal.h"

namespace {

bool ends_with(const char* s, const char* suffix) {
  const size_t n = std::strlen(s), k = std::strlen(suffix);
  return n >= k && std::strcmp(s + n - k, suffix) == 0;
}

// llama.cpp's name of a krafla tensor.
void gguf_name(const char* name, char* out, size_t cap, bool qwen35) {
  const size_t n = std::strlen(name);
  if (qwen35 && ends_with(name, ".ffn_norm"))  // qwen35's FFN input norm is its "post_attention_norm"
    std::snprintf(out, cap, "%.*spost_attention_norm.weight", (int)(n - 8), name);
  else if (qwen35 && ends_with(name, ".ssm_dt")) std::snprintf(out, cap, "%s.bias", name);
  else if (qwen35 && ends_with(name, ".ssm_a")) std::snprintf(out, cap, "%s", name);
  else if (std::strcmp(name, "tok_embd") == 0) std::snprintf(out, cap, "token_embd.weight");
  else if (n > 5 && std::strcmp(name + n - 5, ".bias") == 0) std::snprintf(out, cap, "%s", name);
  else std::snprintf(out, cap, "%s.weight", name);
}

uint32_t gguf_type_of(const ml_mlb_tensor& t) {
  switch (t.type) {
    case ML_DT_Q8: return GGUF_T_Q8_0;
    case ML_DT_Q4: return GGUF_T_Q4_0;
    case ML_DT_F16: return GGUF_T_F16;
    default: return GGUF_T_F32;
  }
}

// Bytes of a tensor's data in the GGUF file.
uint64_t gguf_bytes(const ml_mlb_tensor& t) {
  const gguf_block* b = gguf_block_of(gguf_type_of(t));
  return (uint64_t)t.rows * t.cols / b->values * b->bytes;  // cols % 32 == 0 for Q8/Q4 (cv_add_matrix)
}

// RoPE's pair layout. When the model's (krafla's rope_type) is not the one llama.cpp rotates for the
// architecture, the q and k outputs are reordered within each head, as llama.cpp's converter does
// for Llama: the outputs feeding RoPE are attn_q/attn_k's rows, their biases' elements and the q/k
// norms' weights (the norm is applied per head before RoPE, so it moves with its element).
// hd: the head width (n_rot == head_dim: check_header). Returns the model's index of GGUF index g.
size_t rope_source(size_t g, size_t hd, bool to_interleaved) {
  const size_t head = g / hd, k = g % hd, half = hd / 2;
  if (to_interleaved)  // GGUF element 2i+j of a head is the model's element j*hd/2 + i
    return head * hd + (k % 2) * half + k / 2;
  return head * hd + (k < half ? 2 * k : 2 * (k - half) + 1);  // GGUF element j*hd/2 + i <- 2i+j
}

bool feeds_rope(const char* name) {
  static const char* const SUFFIXES[] = {"attn_q", "attn_k", "attn_q.bias", "attn_k.bias", "attn_q_norm", "attn_k_norm"};
  const char* dot = std::strncmp(name, "blk.", 4) == 0 ? std::strchr(name + 4, '.') : nullptr;
  if (!dot) return false;
  for (const char* s : SUFFIXES)
    if (std::strcmp(dot + 1, s) == 0) return true;
  return false;
}

// Rows [r0, r1) of a Q8/Q4 tensor as Q8_0/Q4_0 blocks.
void write_rows(gguf_sink* o, const cv_tensor& e, size_t r0, size_t r1) {
  const ml_mlb_tensor& t = e.t;
  const size_t nb = t.cols / 32, qbytes = t.type == ML_DT_Q8 ? 32 : 16;
  for (size_t r = r0; r < r1; ++r) {
    for (size_t b = 0; b < nb; ++b) {
      const size_t blk = r * nb + b;
      o->put(e.scales + blk * 2, 2);
      o->put(e.data + blk * qbytes, qbytes);
    }
  }
}

// One tensor's data: Q8_0/Q4_0 blocks rebuilt from krafla's separate quants and f16 scales. perm:
// reorder the q/k outputs (rows of a matrix, elements of a 1 x n vector) within heads of hd.
void write_data(gguf_sink* o, const cv_tensor& e, bool perm, size_t hd, bool to_interleaved) {
  const ml_mlb_tensor& t = e.t;
  if (t.type != ML_DT_Q8 && t.type != ML_DT_Q4) {
    if (!perm) {
      o->put(e.data, (size_t)gguf_bytes(t));
      return;
    }
    const size_t es = t.type == ML_DT_F16 ? 2 : 4;  // 1 x n: permute elements; n x m: rows
    const size_t n = t.rows == 1 ? t.cols : t.rows, unit = t.rows == 1 ? es : es * t.cols;
    for (size_t g = 0; g < n; ++g) o->put(e.data + rope_source(g, hd, to_interleaved) * unit, unit);
    return;
  }
  const size_t nb = t.cols / 32, qbytes = t.type == ML_DT_Q8 ? 32 : 16;
  for (size_t g = 0; g < t.rows; ++g) {
    const size_t r = perm ? rope_source(g, hd, to_interleaved) : g;
    for (size_t b = 0; b < nb; ++b) {
      const size_t blk = r * nb + b;
      o->put(e.scales + blk * 2, 2);
      o->put(e.data + blk * qbytes, qbytes);
    }
  }
}

}  // namespace

uint64_t gguf_align_up(uint64_t v) {
  return (v + GGUF_DEFAULT_ALIGNMENT - 1) / GGUF_DEFAULT_ALIGNMENT * GGUF_DEFAULT_ALIGNMENT;
}

// Qwen3.5's attention layers: llama.cpp's attn_q holds, per head, the head's q rows then its
// output-gate rows (the Hugging Face q_proj layout); krafla keeps them as attn_q and attn_gate. A
// layer's tensors are adjacent in the model, so the gate is looked for among the next NEAR only.
constexpr size_t NEAR = 32;

ml_status gguf_plan_merges(const cv_model* m, bool qwen35, cv_buf* partner, size_t* n_merged, ml_error* err) {
  ML_TRY(cv_alloc(partner, m->n_tensors, sizeof(size_t), err, "--gguf: the tensor plan"));
  size_t* p = partner->as<size_t>();
  for (size_t i = 0; i < m->n_tensors; ++i) p[i] = GGUF_UNMERGED;
  *n_merged = 0;
  if (!qwen35) return ML_OK;
  char want[ML_MLB_NAME_MAX + 16];
  for (size_t i = 0; i < m->n_tensors; ++i) {
    const char* name = m->tensors[i].t.name;
    if (std::strncmp(name, "blk.", 4) != 0 || !ends_with(name, ".attn_q")) continue;
    std::snprintf(want, sizeof want, "%.*sattn_gate", (int)(std::strlen(name) - 6), name);
    size_t g = GGUF_UNMERGED;
    for (size_t j = i + 1; j < m->n_tensors && j <= i + NEAR; ++j)
      if (std::strcmp(m->tensors[j].t.name, want) == 0) g = j;
    if (g == GGUF_UNMERGED) return ml_fail(err, ML_E_ARG, "--gguf: %s has no %s next to it", name, want);
    const ml_mlb_tensor &q = m->tensors[i].t, &gt = m->tensors[g].t;
    if (q.rows != gt.rows || q.cols != gt.cols || q.type != gt.type || q.rows % m->h.head_dim != 0)
      return ml_fail(err, ML_E_ARG, "--gguf: %s and %s differ in shape or type", name, want);
    p[i] = g, p[g] = GGUF_MERGED;
    ++*n_merged;
  }
  return ML_OK;
}

void gguf_write_infos(gguf_sink* o, const cv_model* m, const size_t* partner, bool qwen35, uint32_t n_freqs,
                      uint64_t* data_size) {
  uint64_t off = 0;
  char name[ML_MLB_NAME_MAX + 16];
  for (size_t i = 0; i < m->n_tensors; ++i) {
    if (partner[i] == GGUF_MERGED) continue;
    ml_mlb_tensor t = m->tensors[i].t;
    if (partner[i] != GGUF_UNMERGED) t.rows *= 2;
    gguf_name(t.name, name, sizeof name, qwen35);
    o->str(name);
    if (t.rows == 1) {
      o->u32(1), o->u64(t.cols);
    } else {
      o->u32(2), o->u64(t.cols), o->u64(t.rows);
    }
    o->u32(gguf_type_of(t));
    o->u64(off);
    off = gguf_align_up(off + gguf_bytes(t));
  }
  if (n_freqs > 0) {
    o->str("rope_freqs.weight");
    o->u32(1), o->u64(n_freqs);
    o->u32(GGUF_T_F32);
    o->u64(off);
    off = gguf_align_up(off + (uint64_t)n_freqs * 4);
  }
  *data_size = off;
}

void gguf_write_tensors(gguf_sink* o, const cv_model* m, const size_t* partner, bool permute, size_t hd,
                        bool to_interleaved, uint64_t data_start) {
  for (size_t i = 0; i < m->n_tensors && o->s == ML_OK; ++i) {
    if (partner[i] == GGUF_MERGED) continue;
    if (partner[i] != GGUF_UNMERGED) {  // qwen35: per head, q's rows then the gate's (gguf_plan_merges)
      for (size_t r = 0; r < m->tensors[i].t.rows; r += hd) {
        write_rows(o, m->tensors[i], r, r + hd);
        write_rows(o, m->tensors[partner[i]], r, r + hd);
      }
    } else {
      write_data(o, m->tensors[i], permute && feeds_rope(m->tensors[i].t.name), hd, to_interleaved);
    }
    o->zeros_to(gguf_align_up(o->pos - data_start) + data_start);
  }
}
