// cv_gguf (`ml_convert gguf`): a GGUF file (llama.cpp's format) to .mlb.
//
// Architectures (general.architecture): llama, qwen2, qwen3, gemma3. The header comes from
// llama.cpp's keys ({arch}.embedding_length, .block_count, .feed_forward_length,
// .attention.head_count[_kv], .attention.key_length, .attention.layer_norm_rms_epsilon,
// .context_length, .rope.freq_base, .rope.dimension_count, .rope.scaling.*, gemma3's
// .attention.sliding_window and .final_logit_softcapping). RoPE: llama.cpp permutes Llama's q/k
// rows at conversion, so "llama" rotates interleaved pairs (ML_ROPE_INTERLEAVED); qwen2, qwen3 and
// gemma3 are NEOX in llama.cpp (ML_ROPE_HALF). Gemma 3's norms are stored as 1 + w in GGUF already
// (convert_hf_to_gguf.py adds 1), as the .mlb wants them. Gemma 3 as llama.cpp runs it: sliding
// window layers 5 of 6 with RoPE base 10000, embeddings scaled by sqrt(dim), GELU-tanh.
// qwen35 (Qwen3.5) and every other architecture are refused naming it.
//
// Tensors: token_embd.weight -> tok_embd, blk.N.X.weight -> blk.N.X (X.bias kept as X.bias),
// output_norm, output (absent: tied classifier). Every tensor must be one of the model's
// (rope_freqs.weight, Llama 3's precomputed scaling, is read into the header); shapes are checked
// against the header. Matrices: Q8_0 and Q4_0 are copied bit for bit (quants, and the f16 scale
// into the scale array; the header's scale_type is f16); Q4_0 into a Q8 model widens exactly
// (nibble - 8, same scale); F32/F16/BF16 are quantized to the header's wtype with f16 scales;
// Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, and Q8_0 into a Q4 model, are decoded and requantized, with
// one warning naming them; any other type is refused naming the tensor. Norms and biases: F32
// (F16/BF16 widened). The header's wtype: opts.wtype, else Q4 when every quantized matrix is Q4_0,
// else Q8.
// A Llama file whose dim or n_heads*head_dim is not a multiple of 32 (llama-2-tiny-random: dim
// 8, head_dim 4) is padded with zeros: dim to Dp with the norm weights times sqrt(D/Dp) and eps
// times D/Dp (RMSNorm over the padded width then equals the original), and head_dim to Hp with
// n_rot = the original head_dim and attn_scale = 1/sqrt(head_dim); the extra rows and columns are
// zero, so the model computes the same function.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>

#include "convert/convert.h"
#include "convert/gguf.h"
#include "convert/gguf_internal.h"
#include "core/checked.h"
#include "core/half.h"
#include "core/types.h"
#include "model/limits.h"

namespace {

struct arch_desc {
  const char* name;
  uint32_t arch, rope_type, flags;
};

constexpr arch_desc kArchs[] = {
    {"llama", ML_ARCH_LLAMA, ML_ROPE_INTERLEAVED, 0},
    {"qwen2", ML_ARCH_QWEN2, ML_ROPE_HALF, ML_FLAG_QKV_BIAS},
    {"qwen3", ML_ARCH_QWEN3, ML_ROPE_HALF, ML_FLAG_QK_NORM},
    {"gemma3", ML_ARCH_GEMMA3, ML_ROPE_HALF, ML_FLAG_QK_NORM | ML_FLAG_POST_NORMS},
};

constexpr size_t kWarnNames = 2048;  // bytes of tensor names listed in the requantization warning

struct importer {
  const cv_gguf_opts* o;
  gguf_file g;
  cv_model m;
  const arch_desc* a = nullptr;
  uint32_t dim_src = 0, head_dim_src = 0;  // before padding (equal to the header's when none)
  float norm_mul = 1.0f;                   // sqrt(dim_src / dim) when dim is padded
  bool* used = nullptr;                    // per GGUF tensor: consumed
  cv_buf used_buf;
  char requant[kWarnNames] = {0};
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

  ml_status header();
  ml_status rope_freqs();
  ml_status choose_wtype();
  const gguf_tensor* take(const char* gname, bool required, ml_status* s);
  ml_status check_shape(const gguf_tensor* t, uint64_t cols, uint64_t rows);
  ml_status to_float(const gguf_tensor* t, cv_buf* out);
  ml_status add_vector(const char* name, const char* gname, uint32_t n, uint32_t n_src, bool is_norm);
  ml_status add_matrix(const char* name, const char* gname, uint32_t rows, uint32_t cols, uint32_t src_rows,
                       uint32_t src_cols, uint32_t head_pad_rows, uint32_t head_pad_cols);
  ml_status copy_quant(const char* name, const gguf_tensor* t, uint32_t rows, uint32_t cols);
  ml_status tensors();
};

ml_status importer::header() {
  gguf_str arch;
  ML_TRY(gguf_get_str(&g, "general.architecture", true, &arch, err));
  for (const arch_desc& d : kArchs)
    if (arch.len == std::strlen(d.name) && std::memcmp(arch.p, d.name, arch.len) == 0) a = &d;
  if (!a) {
    const bool q35 = arch.len == 6 && std::memcmp(arch.p, "qwen35", 6) == 0;
    return ml_fail(err, ML_E_FORMAT, "%s: architecture \"%.*s\" is not supported (llama, qwen2, qwen3, gemma3)%s",
                   g.path, (int)(arch.len > 64 ? 64 : arch.len), arch.p,
                   q35 ? "; convert Qwen3.5 from its Hugging Face folder (ml_convert hf)" : "");
  }
  ml_mlb_header& h = m.h;
  h.arch = a->arch;
  h.rope_type = a->rope_type;
  h.flags = a->flags;
  h.scale_type = ML_SCALE_F16;
  ML_TRY(u32("embedding_length", true, &h.dim));
  ML_TRY(u32("block_count", true, &h.n_layers));
  ML_TRY(u32("feed_forward_length", true, &h.hidden_dim_orig));
  ML_TRY(u32("attention.head_count", true, &h.n_heads));
  h.n_kv_heads = h.n_heads;
  ML_TRY(u32("attention.head_count_kv", false, &h.n_kv_heads));
  ML_TRY(u32("context_length", true, &h.max_seq));
  ML_TRY(f32("attention.layer_norm_rms_epsilon", true, &h.norm_eps));
  ML_TRY(f32("rope.freq_base", false, &h.rope_theta));
  if (h.n_heads == 0 || h.dim == 0 || h.n_kv_heads == 0 || h.n_layers == 0)
    return ml_fail(err, ML_E_FORMAT, "%s: %s.embedding_length %u, block_count %u, head_count %u or head_count_kv %u is 0",
                   g.path, a->name, h.dim, h.n_layers, h.n_heads, h.n_kv_heads);
  h.head_dim = h.dim / h.n_heads;
  ML_TRY(u32("attention.key_length", false, &h.head_dim));
  uint32_t vlen = h.head_dim, n_rot = h.head_dim;
  ML_TRY(u32("attention.value_length", false, &vlen));
  if (vlen != h.head_dim)
    return ml_fail(err, ML_E_FORMAT, "%s: %s.attention.value_length %u differs from key_length %u", g.path, a->name,
                   vlen, h.head_dim);
  ML_TRY(u32("rope.dimension_count", false, &n_rot));
  if (n_rot != h.head_dim) h.n_rot = n_rot;
  h.max_seq = h.max_seq > ML_LIMIT_MAX_SEQ ? ML_LIMIT_MAX_SEQ : h.max_seq;

  gguf_str st{"none", 4};
  char k[128];
  ML_TRY(gguf_get_str(&g, key(k, sizeof k, "rope.scaling.type"), false, &st, err));
  if (st.len == 6 && std::memcmp(st.p, "linear", 6) == 0) {
    h.rope_scaling = ML_ROPE_SCALING_LINEAR;
    ML_TRY(f32("rope.scaling.factor", true, &h.rope_factor));
    if (!(h.rope_factor > 0.0f))
      return ml_fail(err, ML_E_FORMAT, "%s: %s.rope.scaling.factor %g is not positive", g.path, a->name,
                     (double)h.rope_factor);
  } else if (st.len == 6 && std::memcmp(st.p, "llama3", 6) == 0) {
    h.rope_scaling = ML_ROPE_SCALING_LLAMA3;
    ML_TRY(f32("rope.scaling.factor", true, &h.rope_factor));
    ML_TRY(f32("rope.scaling.low_freq_factor", true, &h.rope_low_freq_factor));
    ML_TRY(f32("rope.scaling.high_freq_factor", true, &h.rope_high_freq_factor));
    ML_TRY(u32("rope.scaling.original_context_length", true, &h.rope_orig_max_seq));
  } else if (!(st.len == 4 && std::memcmp(st.p, "none", 4) == 0)) {
    return ml_fail(err, ML_E_FORMAT, "%s: %s.rope.scaling.type \"%.*s\" is not supported (none, linear, llama3)",
                   g.path, a->name, (int)(st.len > 32 ? 32 : st.len), st.p);
  }

  if (a->arch == ML_ARCH_GEMMA3) {
    // llama.cpp (llama-model.cpp, LLM_ARCH_GEMMA3): every 6th layer global, the others sliding
    // with RoPE base 10000 and no scaling; embeddings times sqrt(n_embd); GELU.
    ML_TRY(u32("attention.sliding_window", true, &h.sliding_window));
    h.sliding_pattern = 6;
    h.rope_local_theta = 10000.0f;
    h.activation = ML_ACT_GELU_TANH;
    h.embed_scale = std::sqrt((float)h.dim);
    ML_TRY(f32("final_logit_softcapping", false, &h.logit_softcap));
    // llama.cpp: 1/sqrt(key_length), except Gemma 3 27B (62 layers): 1/sqrt(n_embd / n_head),
    // its query_pre_attn_scalar, which GGUF does not store.
    if (h.n_layers == 62 && h.n_heads && h.dim / h.n_heads != h.head_dim)
      h.attn_scale = 1.0f / std::sqrt((float)(h.dim / h.n_heads));
  }

  // The vocabulary is the embedding's rows.
  const gguf_tensor* emb = gguf_find_tensor(&g, "token_embd.weight");
  if (!emb) return ml_fail(err, ML_E_FORMAT, "%s: tensor token_embd.weight is missing", g.path);
  if (emb->ne[1] > ML_LIMIT_VOCAB || emb->n_dims != 2)
    return ml_fail(err, ML_E_SHAPE, "%s: tensor token_embd.weight: shape [%" PRIu64 ", %" PRIu64
                   "] is not [embedding_length, vocab] with vocab up to %u", g.path, emb->ne[0], emb->ne[1], ML_LIMIT_VOCAB);
  h.vocab_size = (uint32_t)emb->ne[1];
  uint32_t v = h.vocab_size;
  ML_TRY(u32("vocab_size", false, &v));
  if (v != h.vocab_size)
    return ml_fail(err, ML_E_SHAPE, "%s: %s.vocab_size %u differs from token_embd.weight's %u rows", g.path, a->name, v,
                   h.vocab_size);

  // Zero padding (see the top of the file): Llama only (q/k norms and embed_scale use the width).
  dim_src = h.dim;
  head_dim_src = h.head_dim;
  const bool pad_dim = h.dim % 32 != 0, pad_heads = ((uint64_t)h.n_heads * h.head_dim) % 32 != 0;
  if ((pad_dim || pad_heads) && a->arch != ML_ARCH_LLAMA)
    return ml_fail(err, ML_E_SHAPE, "%s: embedding_length %u or head_count * key_length %u is not a multiple of 32",
                   g.path, h.dim, h.n_heads * h.head_dim);
  if (h.dim > ML_LIMIT_DIM || h.head_dim > ML_LIMIT_HEAD_DIM || h.n_heads > ML_LIMIT_HEADS)
    return ml_fail(err, ML_E_SHAPE, "%s: embedding_length %u, key_length %u or head_count %u is beyond the limits",
                   g.path, h.dim, h.head_dim, h.n_heads);
  if (pad_dim) {
    h.dim = (h.dim + 31) / 32 * 32;
    norm_mul = std::sqrt((float)dim_src / (float)h.dim);
    h.norm_eps = h.norm_eps * (float)dim_src / (float)h.dim;
  }
  if (pad_heads) {
    uint32_t hp = h.head_dim + (h.head_dim & 1);
    while (((uint64_t)h.n_heads * hp) % 32 != 0) hp += 2;
    if (h.n_rot == 0) h.n_rot = h.head_dim;
    h.attn_scale = 1.0f / std::sqrt((float)h.head_dim);
    h.head_dim = hp;
  }
  h.hidden_dim = (h.hidden_dim_orig + 31) / 32 * 32;
  if (h.hidden_dim < h.hidden_dim_orig)
    return ml_fail(err, ML_E_SHAPE, "%s: feed_forward_length %u is too large", g.path, h.hidden_dim_orig);
  if (!gguf_find_tensor(&g, "output.weight")) h.flags |= ML_FLAG_TIED_CLASSIFIER;
  return ML_OK;
}

// Llama 3's rope_freqs.weight (convert_hf_to_gguf.py's precomputed llama3 scaling: one divisor per
// rotated pair). The header describes the scaling by its four parameters: Meta's (factor = the
// largest divisor, low 1, high 4, original context 8192) when they reproduce every divisor, else
// the file is refused.
ml_status importer::rope_freqs() {
  ml_status s = ML_OK;
  const gguf_tensor* t = take("rope_freqs.weight", false, &s);
  ML_TRY(s);
  if (!t) return ML_OK;
  ml_mlb_header& h = m.h;
  const uint32_t n_rot = h.n_rot ? h.n_rot : h.head_dim;
  ML_TRY(check_shape(t, n_rot / 2, 1));
  cv_buf f;
  ML_TRY(to_float(t, &f));
  const float* d = f.as<float>();
  float factor = 1.0f;
  for (uint32_t i = 0; i < n_rot / 2; ++i) factor = d[i] > factor ? d[i] : factor;
  const double lo = 1.0, hi = 4.0, orig = 8192.0;
  for (uint32_t i = 0; i < n_rot / 2; ++i) {
    // llama.cpp's convert (LlamaModel.generate_extra_tensors) and transformers' llama3 rule.
    const double freq = 1.0 / std::pow((double)h.rope_theta, 2.0 * i / n_rot), wavelen = 2.0 * 3.14159265358979323846 / freq;
    const double lw = orig / lo, hw = orig / hi;
    double want;
    if (wavelen < hw) want = 1.0;
    else if (wavelen > lw) want = factor;
    else {
      const double smooth = (orig / wavelen - lo) / (hi - lo);
      want = 1.0 / ((1.0 - smooth) / factor + smooth);
    }
    if (std::fabs(want - d[i]) > 1e-4 * want)
      return ml_fail(err, ML_E_FORMAT, "%s: tensor rope_freqs.weight: divisor %u is %g, not Llama 3's scaling "
                     "(factor %g, low 1, high 4, original context 8192) gives %g", g.path, i, (double)d[i],
                     (double)factor, want);
  }
  if (factor == 1.0f) return ML_OK;
  h.rope_scaling = ML_ROPE_SCALING_LLAMA3;
  h.rope_factor = factor;
  h.rope_low_freq_factor = (float)lo;
  h.rope_high_freq_factor = (float)hi;
  h.rope_orig_max_seq = (uint32_t)orig;
  return ML_OK;
}

bool is_matrix_name(const char* n) {
  const size_t len = std::strlen(n);
  return !(len >= 5 && std::strcmp(n + len - 5, ".bias") == 0) && !std::strstr(n, "norm") &&
         std::strcmp(n, "rope_freqs.weight") != 0;
}

ml_status importer::choose_wtype() {
  if (o->wtype != 0) {
    if (o->wtype != ML_DT_Q8 && o->wtype != ML_DT_Q4)
      return ml_fail(err, ML_E_ARG, "--wtype: %u is not Q8 (%u) or Q4 (%u)", o->wtype, (unsigned)ML_DT_Q8,
                     (unsigned)ML_DT_Q4);
    m.h.wtype = o->wtype;
    return ML_OK;
  }
  bool q4 = false, other = false;
  for (uint64_t i = 0; i < g.n_tensors; ++i) {
    const gguf_tensor& t = g.tensors[i];
    if (!is_matrix_name(t.name)) continue;
    if (t.type == GGUF_T_Q4_0) q4 = true;
    else if (t.type != GGUF_T_F32 && t.type != GGUF_T_F16 && t.type != GGUF_T_BF16) other = true;
  }
  m.h.wtype = q4 && !other ? ML_DT_Q4 : ML_DT_Q8;
  return ML_OK;
}

const gguf_tensor* importer::take(const char* gname, bool required, ml_status* s) {
  const gguf_tensor* t = gguf_find_tensor(&g, gname);
  if (!t) {
    if (required) *s = ml_fail(err, ML_E_FORMAT, "%s: tensor %s is missing", g.path, gname);
    return nullptr;
  }
  used[t - g.tensors] = true;
  return t;
}

ml_status importer::check_shape(const gguf_tensor* t, uint64_t cols, uint64_t rows) {
  if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != 1 || t->ne[3] != 1)
    return ml_fail(err, ML_E_SHAPE, "%s: tensor %s: shape [%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64
                   "] does not match the header's [%" PRIu64 ", %" PRIu64 "]", g.path, t->name, t->ne[0], t->ne[1],
                   t->ne[2], t->ne[3], cols, rows);
  return ML_OK;
}

ml_status importer::to_float(const gguf_tensor* t, cv_buf* out) {
  const uint64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
  if ((uint64_t)(size_t)n != n)
    return ml_fail(err, ML_E_NOMEM, "%s: tensor %s: %" PRIu64 " values overflow this address space", g.path, t->name, n);
  ML_TRY(cv_alloc(out, (size_t)n, sizeof(float), err, "%s: tensor %s as float", g.path, t->name));
  if (!cv_gguf_dequant(t->type, t->data, n, out->as<float>()))
    return ml_fail(err, ML_E_FORMAT, "%s: tensor %s: type %s is not supported (F32, F16, BF16, Q8_0, Q4_0, Q4_1, "
                   "Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)", g.path, t->name, gguf_block_of(t->type)->name);
  return ML_OK;
}

ml_status importer::add_vector(const char* name, const char* gname, uint32_t n, uint32_t n_src, bool is_norm) {
  ml_status s = ML_OK;
  const gguf_tensor* t = take(gname, true, &s);
  ML_TRY(s);
  ML_TRY(check_shape(t, n_src, 1));
  if (t->type != GGUF_T_F32 && t->type != GGUF_T_F16 && t->type != GGUF_T_BF16)
    return ml_fail(err, ML_E_FORMAT, "%s: tensor %s: type %s, not F32, F16 or BF16", g.path, gname,
                   gguf_block_of(t->type)->name);
  cv_buf f, padded;
  ML_TRY(to_float(t, &f));
  ML_TRY(cv_alloc(&padded, n, sizeof(float), err, "%s: tensor %s", g.path, gname));
  for (uint32_t i = 0; i < n_src; ++i) padded.as<float>()[i] = f.as<float>()[i] * (is_norm ? norm_mul : 1.0f);
  return cv_add_f32(&m, name, padded.as<float>(), n, err);
}

// Q8_0 / Q4_0 blocks into the header's wtype without decoding (rows may exceed the tensor's: zero rows).
ml_status importer::copy_quant(const char* name, const gguf_tensor* t, uint32_t rows, uint32_t cols) {
  const bool to_q8 = m.h.wtype == ML_DT_Q8;
  const size_t nb_src = (size_t)t->ne[1] * (cols / 32), nb = (size_t)rows * (cols / 32);
  cv_buf q, sc;
  ML_TRY(cv_alloc(&q, nb, to_q8 ? 32 : 16, err, "%s: tensor %s's quants", g.path, t->name));
  ML_TRY(cv_alloc(&sc, nb, 2, err, "%s: tensor %s's scales", g.path, t->name));
  const uint8_t* p = t->data;
  const uint32_t bs = t->type == GGUF_T_Q8_0 ? 34 : 18;
  for (size_t b = 0; b < nb_src; ++b, p += bs) {
    sc.data[2 * b] = p[0];
    sc.data[2 * b + 1] = p[1];
    if (t->type == GGUF_T_Q8_0) {
      std::memcpy(q.data + 32 * b, p + 2, 32);
    } else if (!to_q8) {
      std::memcpy(q.data + 16 * b, p + 2, 16);
    } else {  // Q4_0 widened: nibble - 8 in [-8, 7], the same scale
      for (int j = 0; j < 16; ++j) {
        q.data[32 * b + j] = (uint8_t)(int8_t)((p[2 + j] & 0xF) - 8);
        q.data[32 * b + j + 16] = (uint8_t)(int8_t)((p[2 + j] >> 4) - 8);
      }
    }
  }
  ml_status s = cv_add_quantized(&m, name, rows, cols, &q, &sc, err);
  if (s != ML_OK) return ml_fail(err, s, "%s: %s", g.path, err ? err->msg : "");
  return ML_OK;
}

// head_pad_rows / head_pad_cols: nonzero when the rows (q, k, v) or columns (attn_output) are
// heads of head_dim_src to spread into heads of the header's head_dim (the padding above).
ml_status importer::add_matrix(const char* name, const char* gname, uint32_t rows, uint32_t cols, uint32_t src_rows,
                               uint32_t src_cols, uint32_t head_pad_rows, uint32_t head_pad_cols) {
  ml_status s = ML_OK;
  const gguf_tensor* t = take(gname, true, &s);
  ML_TRY(s);
  ML_TRY(check_shape(t, src_cols, src_rows));
  const bool copyable = (t->type == GGUF_T_Q8_0 || t->type == GGUF_T_Q4_0) && src_cols == cols && !head_pad_rows &&
                        !head_pad_cols && !(t->type == GGUF_T_Q8_0 && m.h.wtype == ML_DT_Q4);
  if (copyable) return copy_quant(name, t, rows, cols);
  if (t->type != GGUF_T_F32 && t->type != GGUF_T_F16 && t->type != GGUF_T_BF16) {
    const size_t len = std::strlen(requant), add = std::strlen(t->name);
    if (n_requant < 8 && len + add + 3 < sizeof requant)
      std::snprintf(requant + len, sizeof requant - len, "%s%s (%s)", len ? ", " : "", t->name,
                    gguf_block_of(t->type)->name);
    ++n_requant;
  }
  cv_buf f;
  ML_TRY(to_float(t, &f));
  if (head_pad_rows || head_pad_cols) {
    // Spread heads of head_dim_src into heads of m.h.head_dim: a rows x cols zero matrix gets
    // each source value at its padded place.
    const uint32_t hs = head_dim_src, hp = m.h.head_dim;
    cv_buf dst;
    ML_TRY(cv_alloc(&dst, (size_t)rows * cols, sizeof(float), err, "%s: tensor %s padded", g.path, t->name));
    const float* x = f.as<float>();
    for (uint32_t r = 0; r < src_rows; ++r)
      for (uint32_t c = 0; c < src_cols; ++c) {
        const uint32_t dr = head_pad_rows ? r / hs * hp + r % hs : r, dc = head_pad_cols ? c / hs * hp + c % hs : c;
        dst.as<float>()[(size_t)dr * cols + dc] = x[(size_t)r * src_cols + c];
      }
    ML_TRY(cv_add_matrix(&m, name, rows, cols, dst.as<float>(), rows, cols, err));
  } else {
    ML_TRY(cv_add_matrix(&m, name, rows, cols, f.as<float>(), src_rows, src_cols, err));
  }
  return ML_OK;
}

ml_status importer::tensors() {
  const ml_mlb_header& h = m.h;
  const uint32_t D = h.dim, Ds = dim_src, hs = head_dim_src, H = h.hidden_dim, Hs = h.hidden_dim_orig;
  const uint32_t q = h.n_heads * h.head_dim, kv = h.n_kv_heads * h.head_dim;
  const uint32_t qs = h.n_heads * hs, kvs = h.n_kv_heads * hs;
  const bool ph = h.head_dim != hs;
  char name[ML_MLB_NAME_MAX], gname[GGUF_NAME_MAX + 8];
  ML_TRY(add_matrix("tok_embd", "token_embd.weight", h.vocab_size, D, h.vocab_size, Ds, 0, 0));
  for (uint32_t l = 0; l < h.n_layers; ++l) {
    auto mat = [&](const char* x, uint32_t rows, uint32_t cols, uint32_t sr, uint32_t sc, bool pr, bool pc) {
      std::snprintf(name, sizeof name, "blk.%u.%s", l, x);
      std::snprintf(gname, sizeof gname, "blk.%u.%s.weight", l, x);
      return add_matrix(name, gname, rows, cols, sr, sc, pr ? 1 : 0, pc ? 1 : 0);
    };
    auto vec = [&](const char* x, const char* suffix, uint32_t n, uint32_t ns, bool norm) {
      std::snprintf(name, sizeof name, "blk.%u.%s%s", l, x, suffix);
      std::snprintf(gname, sizeof gname, "blk.%u.%s%s", l, x, *suffix ? suffix : ".weight");
      return add_vector(name, gname, n, ns, norm);
    };
    ML_TRY(vec("attn_norm", "", D, Ds, true));
    ML_TRY(mat("attn_q", q, D, qs, Ds, ph, false));
    ML_TRY(mat("attn_k", kv, D, kvs, Ds, ph, false));
    ML_TRY(mat("attn_v", kv, D, kvs, Ds, ph, false));
    if (h.flags & ML_FLAG_QKV_BIAS) {
      ML_TRY(vec("attn_q", ".bias", q, q, false));
      ML_TRY(vec("attn_k", ".bias", kv, kv, false));
      ML_TRY(vec("attn_v", ".bias", kv, kv, false));
    }
    if (h.flags & ML_FLAG_QK_NORM) {
      ML_TRY(vec("attn_q_norm", "", h.head_dim, h.head_dim, false));
      ML_TRY(vec("attn_k_norm", "", h.head_dim, h.head_dim, false));
    }
    ML_TRY(mat("attn_output", D, q, Ds, qs, false, ph));
    if (h.flags & ML_FLAG_POST_NORMS) ML_TRY(vec("post_attention_norm", "", D, D, true));
    ML_TRY(vec("ffn_norm", "", D, Ds, true));
    ML_TRY(mat("ffn_gate", H, D, Hs, Ds, false, false));
    ML_TRY(mat("ffn_up", H, D, Hs, Ds, false, false));
    ML_TRY(mat("ffn_down", D, H, Ds, Hs, false, false));
    if (h.flags & ML_FLAG_POST_NORMS) ML_TRY(vec("post_ffw_norm", "", D, D, true));
  }
  ML_TRY(add_vector("output_norm", "output_norm.weight", D, Ds, true));
  if (!(h.flags & ML_FLAG_TIED_CLASSIFIER))
    ML_TRY(add_matrix("output", "output.weight", h.vocab_size, D, h.vocab_size, Ds, 0, 0));
  for (uint64_t i = 0; i < g.n_tensors; ++i)
    if (!used[i])
      return ml_fail(err, ML_E_FORMAT, "%s: tensor %s is not part of a %s model with %u layers", g.path,
                     g.tensors[i].name, a->name, h.n_layers);
  return ML_OK;
}

}  // namespace

cv_gguf_opts cv_gguf_defaults() { return cv_gguf_opts{}; }

ml_status cv_gguf(const cv_gguf_opts* o, ml_error* err) {
  if (!o->path) return ml_fail(err, ML_E_ARG, "gguf: no GGUF file given");
  if (!o->out && !o->mem) return ml_fail(err, ML_E_ARG, "gguf: no --output path given");
  importer* im = new (std::nothrow) importer;
  if (!im) return ml_fail(err, ML_E_NOMEM, "%s: cannot allocate the importer", o->path);
  struct guard {
    importer* p;
    ~guard() { delete p; }
  } gd{im};
  im->o = o;
  im->err = err;
  if (o->data)
    ML_TRY(gguf_parse(&im->g, static_cast<const uint8_t*>(o->data), o->size, o->path, err));
  else
    ML_TRY(gguf_open(&im->g, o->path, err));
  ML_TRY(im->header());
  ML_TRY(im->choose_wtype());
  const ml_status hs = ml_mlb_check_header(&im->m.h, err);
  if (hs != ML_OK) return ml_fail(err, hs, "%s: %s", o->path, err ? err->msg : "");
  ML_TRY(cv_alloc(&im->used_buf, im->g.n_tensors ? (size_t)im->g.n_tensors : 1, 1, err, "%s: the tensor list", o->path));
  im->used = reinterpret_cast<bool*>(im->used_buf.data);
  ML_TRY(im->rope_freqs());
  ML_TRY(cv_gguf_tokenizer(&im->m, &im->g, o->chat_template, err));
  ML_TRY(im->tensors());
  if (im->n_requant && o->warn) {
    char msg[kWarnNames + 256];
    std::snprintf(msg, sizeof msg, "%s: %zu tensor%s decoded and requantized to %s (not copied bit for bit): %s%s",
                  o->path, im->n_requant, im->n_requant == 1 ? "" : "s", im->m.h.wtype == ML_DT_Q8 ? "Q8" : "Q4",
                  im->requant, im->n_requant > 8 ? ", ..." : "");
    o->warn(o->warn_user, msg);
  }
  if (o->mem) return cv_write_memory(&im->m, &o->mem->data, &o->mem->size, err);
  return cv_write(&im->m, o->out, err);
}
