// cv_gguf (`ml_convert gguf`): a GGUF file (llama.cpp's format) to .mlb.
//
// Architectures (general.architecture): llama, qwen2, qwen3, gemma3, qwen35. The header comes from
// llama.cpp's keys ({arch}.embedding_length, .block_count, .feed_forward_length,
// .attention.head_count[_kv], .attention.key_length, .attention.layer_norm_rms_epsilon,
// .context_length, .rope.freq_base, .rope.dimension_count, .rope.scaling.*, gemma3's
// .attention.sliding_window and .final_logit_softcapping). RoPE: llama.cpp permutes Llama's q/k
// rows at conversion, so "llama" rotates interleaved pairs (ML_ROPE_INTERLEAVED); qwen2, qwen3,
// gemma3 and qwen35 are NEOX in llama.cpp (ML_ROPE_HALF). Gemma 3's norms are stored as 1 + w in
// GGUF already (convert_hf_to_gguf.py adds 1), as the .mlb wants them. Gemma 3 as llama.cpp runs
// it: sliding window layers 5 of 6 with RoPE base 10000, embeddings scaled by sqrt(dim), GELU-tanh.
// Every other architecture is refused naming it.
//
// qwen35 (Qwen3.5, llama.cpp's LLM_ARCH_QWEN35): its keys, layer pattern and tensors are
// gguf_qwen35.cpp's, described there.
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

constexpr gguf_arch kArchs[] = {
    {"llama", ML_ARCH_LLAMA, ML_ROPE_INTERLEAVED, 0},
    {"qwen2", ML_ARCH_QWEN2, ML_ROPE_HALF, ML_FLAG_QKV_BIAS},
    {"qwen3", ML_ARCH_QWEN3, ML_ROPE_HALF, ML_FLAG_QK_NORM},
    {"gemma3", ML_ARCH_GEMMA3, ML_ROPE_HALF, ML_FLAG_QK_NORM | ML_FLAG_POST_NORMS},
    {"qwen35", ML_ARCH_QWEN35, ML_ROPE_HALF, ML_FLAG_QK_NORM | ML_FLAG_ATTN_GATE},
};

}  // namespace

ml_status gguf_importer::header() {
  gguf_str arch;
  ML_TRY(gguf_get_str(&g, "general.architecture", true, &arch, err));
  for (const gguf_arch& d : kArchs)
    if (arch.len == std::strlen(d.name) && std::memcmp(arch.p, d.name, arch.len) == 0) a = &d;
  if (!a)
    return ml_fail(err, ML_E_FORMAT, "%s: architecture \"%.*s\" is not supported (llama, qwen2, qwen3, gemma3, qwen35)",
                   g.path, (int)(arch.len > 64 ? 64 : arch.len), arch.p);
  ml_mlb_header& h = m.h;
  h.arch = a->arch;
  h.rope_type = a->rope_type;
  h.flags = a->flags;
  h.scale_type = ML_SCALE_F16;
  ML_TRY(u32("embedding_length", true, &h.dim));
  ML_TRY(u32("block_count", true, &h.n_layers));
  n_blocks = h.n_layers;
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
  if (a->arch == ML_ARCH_QWEN35) ML_TRY(qwen35_header());
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
ml_status gguf_importer::rope_freqs() {
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

namespace {

// Whether a tensor is a matrix (not a norm, a bias or rope_freqs): the ones choose_wtype looks at.
bool is_matrix_name(const char* n) {
  const size_t len = std::strlen(n);
  return !(len >= 5 && std::strcmp(n + len - 5, ".bias") == 0) && !std::strstr(n, "norm") &&
         std::strcmp(n, "rope_freqs.weight") != 0;
}

}  // namespace

ml_status gguf_importer::choose_wtype() {
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

cv_gguf_opts cv_gguf_defaults() { return cv_gguf_opts{}; }

namespace {

// The importer over o's file, parsed, its header read (gguf_importer::header). *out owns it.
ml_status open_importer(const cv_gguf_opts* o, gguf_importer** out, ml_error* err) {
  *out = nullptr;
  if (!o->path) return ml_fail(err, ML_E_ARG, "gguf: no GGUF file given");
  gguf_importer* im = new (std::nothrow) gguf_importer;
  if (!im) return ml_fail(err, ML_E_NOMEM, "%s: cannot allocate the importer", o->path);
  *out = im;
  im->o = o;
  im->err = err;
  if (o->data)
    ML_TRY(gguf_parse(&im->g, static_cast<const uint8_t*>(o->data), o->size, o->path, err));
  else
    ML_TRY(gguf_open(&im->g, o->path, err));
  return im->header();
}

struct importer_guard {
  gguf_importer* p = nullptr;
  ~importer_guard() { delete p; }
};

}  // namespace

ml_status cv_gguf_read_tokenizer(const cv_gguf_opts* o, cv_model* m, ml_error* err) {
  importer_guard gd;
  ML_TRY(open_importer(o, &gd.p, err));
  m->h = gd.p->m.h;
  return cv_gguf_tokenizer(m, &gd.p->g, o->chat_template, err);
}

ml_status cv_gguf(const cv_gguf_opts* o, ml_error* err) {
  if (o->path && !o->out && !o->mem) return ml_fail(err, ML_E_ARG, "gguf: no --output path given");
  importer_guard gd;
  ML_TRY(open_importer(o, &gd.p, err));
  gguf_importer* im = gd.p;
  ML_TRY(im->choose_wtype());
  const ml_status hs = ml_mlb_check_header(&im->m.h, err);
  if (hs != ML_OK) return ml_fail(err, hs, "%s: %s", o->path, err ? err->msg : "");
  ML_TRY(cv_alloc(&im->used_buf, im->g.n_tensors ? (size_t)im->g.n_tensors : 1, 1, err, "%s: the tensor list", o->path));
  im->used = reinterpret_cast<bool*>(im->used_buf.data);
  ML_TRY(im->rope_freqs());
  ML_TRY(cv_gguf_tokenizer(&im->m, &im->g, o->chat_template, err));
  ML_TRY(im->tensors());
  if (im->n_requant && o->warn) {
    char msg[GGUF_WARN_NAMES + 256];
    std::snprintf(msg, sizeof msg, "%s: %zu tensor%s decoded and requantized to %s (not copied bit for bit): %s%s",
                  o->path, im->n_requant, im->n_requant == 1 ? "" : "s", im->m.h.wtype == ML_DT_Q8 ? "Q8" : "Q4",
                  im->requant, im->n_requant > 8 ? ", ..." : "");
    o->warn(o->warn_user, msg);
  }
  if (o->mem) return cv_write_converted(&im->m, o->mem, err);
  return cv_write(&im->m, o->out, err);
}
