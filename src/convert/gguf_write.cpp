// cv_write_gguf (gguf_write.h): a cv_model as a GGUF version 3 file for llama.cpp. The layout is
// computed once (metadata, tensor infos, data offsets aligned to GGUF_DEFAULT_ALIGNMENT from the
// start of the data section) and the file is written front to back through core/out_file.h.
#include "convert/gguf_write.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>

#include "convert/gguf_types.h"
#include "convert/gguf_write_internal.h"
#include "core/checked.h"
#include "core/out_file.h"
#include "model/limits.h"

namespace {

// --- the architectures ---------------------------------------------------------------------------

// What llama.cpp's graph for an architecture computes, so that a header asking for anything else
// is refused rather than written into a file llama.cpp would run differently.
struct arch_desc {
  uint32_t arch;            // ML_ARCH_*
  const char* name;         // general.architecture
  uint32_t rope_type;       // krafla's pair layout equal to llama.cpp's RoPE (NORM: interleaved; NEOX: half)
  uint32_t flags_required;  // header flags llama.cpp's tensors require for this architecture
  uint32_t flags_allowed;   // ... and the ones it computes when present (the tied classifier always)
  uint32_t activation;      // ML_ACT_*
  bool head_dim_free;       // attention.key_length may differ from dim / n_heads (qwen2: q is dim wide)
  bool embed_sqrt_dim;      // llama.cpp multiplies the embedding by sqrt(dim) itself (gemma3)
  bool sliding;             // attention.sliding_window (+ pattern, rope.freq_base_swa)
  bool softcap;             // final_logit_softcapping
  bool rope_freqs;          // llama3 RoPE scaling through a rope_freqs.weight tensor (llama.cpp's llama)
  bool rope_linear;         // linear RoPE scaling through rope.scaling.factor
  bool qwen35;              // partial rotary, gated-delta layers, attn_q holding q and the output gate
};

constexpr uint32_t QK_NORM = ML_FLAG_QK_NORM, POST = ML_FLAG_POST_NORMS;
constexpr arch_desc ARCHS[] = {
    {ML_ARCH_LLAMA, "llama", ML_ROPE_INTERLEAVED, 0, 0, ML_ACT_SILU, true, false, false, false, true, true, false},
    {ML_ARCH_QWEN2, "qwen2", ML_ROPE_HALF, 0, ML_FLAG_QKV_BIAS, ML_ACT_SILU, false, false, false, false, false, true,
     false},
    {ML_ARCH_QWEN3, "qwen3", ML_ROPE_HALF, QK_NORM, QK_NORM, ML_ACT_SILU, true, false, false, false, false, true, false},
    // (Gemma 3's linear scaling applies to its global layers only: not written yet.)
    {ML_ARCH_GEMMA3, "gemma3", ML_ROPE_HALF, QK_NORM | POST, QK_NORM | POST, ML_ACT_GELU_TANH, true, true, true, true,
     false, false, false},
    {ML_ARCH_QWEN35, "qwen35", ML_ROPE_HALF, QK_NORM | ML_FLAG_ATTN_GATE, QK_NORM | ML_FLAG_ATTN_GATE, ML_ACT_SILU, true,
     false, false, false, false, false, true},
};

ml_status check_header(const ml_mlb_header& h, const arch_desc** out, ml_error* err) {
  const arch_desc* a = nullptr;
  for (const arch_desc& d : ARCHS)
    if (d.arch == h.arch) a = &d;
  if (!a)
    return ml_fail(err, ML_E_ARG, "--gguf: architecture %u is not written as GGUF (llama, qwen2, qwen3, gemma3, qwen35 are)",
                   h.arch);
  if (h.wtype != ML_DT_Q8 && h.wtype != ML_DT_Q4)
    return ml_fail(err, ML_E_ARG, "--gguf: weight type %u is not Q8 or Q4", h.wtype);
  if (h.scale_type != ML_SCALE_F16)
    return ml_fail(err, ML_E_ARG,
                   "--gguf: GGUF's Q8_0/Q4_0 blocks hold f16 scales; write the model with --scales f16 (it has f32)");
  if (h.rope_type != ML_ROPE_INTERLEAVED && h.rope_type != ML_ROPE_HALF)
    return ml_fail(err, ML_E_ARG, "--gguf: rope_type %u is not interleaved (0) or half (1)", h.rope_type);
  const uint32_t flags = h.flags & ~(uint32_t)ML_FLAG_TIED_CLASSIFIER;
  if ((flags & ~a->flags_allowed) != 0 || (flags & a->flags_required) != a->flags_required)
    return ml_fail(err, ML_E_ARG, "--gguf: header flags 0x%x: llama.cpp's %s needs 0x%x and computes at most 0x%x",
                   h.flags, a->name, a->flags_required, a->flags_allowed);
  if (h.activation != a->activation)
    return ml_fail(err, ML_E_ARG, "--gguf: activation %u is not the one llama.cpp's %s uses (%u)", h.activation, a->name,
                   a->activation);
  const bool scaling_ok = h.rope_scaling == ML_ROPE_SCALING_NONE ||
                          (h.rope_scaling == ML_ROPE_SCALING_LLAMA3 && a->rope_freqs) ||
                          (h.rope_scaling == ML_ROPE_SCALING_LINEAR && a->rope_linear);
  if (!scaling_ok)
    return ml_fail(err, ML_E_ARG, "--gguf: RoPE scaling %u is not written as GGUF for llama.cpp's %s", h.rope_scaling,
                   a->name);
  if (h.n_rot != 0 && h.n_rot != h.head_dim && !a->qwen35)
    return ml_fail(err, ML_E_ARG, "--gguf: partial rotary (n_rot %u of head_dim %u) is not written for llama.cpp's %s",
                   h.n_rot, h.head_dim, a->name);
  if (a->qwen35 && h.rope_type != ML_ROPE_HALF)
    return ml_fail(err, ML_E_ARG, "--gguf: qwen35 is written from the rotate-half layout only (--rope-type half)");
  if (!a->head_dim_free && h.n_heads * h.head_dim != h.dim)
    return ml_fail(err, ML_E_ARG, "--gguf: llama.cpp's %s needs n_heads x head_dim = dim (%u x %u != %u)", a->name,
                   h.n_heads, h.head_dim, h.dim);
  if (h.linear_period != 0 && !a->qwen35)
    return ml_fail(err, ML_E_ARG, "--gguf: llama.cpp's %s has no linear-attention layers", a->name);
  if (a->qwen35 && (h.linear_period == 0 || h.linear_k_dim != h.linear_v_dim || h.linear_k_heads != h.linear_v_heads))
    return ml_fail(err, ML_E_ARG,
                   "--gguf: qwen35 needs linear-attention layers with key and value heads of one width and count "
                   "(llama.cpp's qwen35 takes head_v_dim = head_k_dim; other counts need its V-head reordering, not "
                   "written yet): period %u, heads %u/%u, dims %u/%u",
                   h.linear_period, h.linear_k_heads, h.linear_v_heads, h.linear_k_dim, h.linear_v_dim);
  const float std_scale = 1.0f / std::sqrt((float)h.head_dim);
  if (h.attn_scale != 0.0f && std::fabs(h.attn_scale - std_scale) > 1e-6f * std_scale)
    return ml_fail(err, ML_E_ARG, "--gguf: attention scale %g: llama.cpp's %s uses 1/sqrt(head_dim) = %g",
                   (double)h.attn_scale, a->name, (double)std_scale);
  const float want_embed = a->embed_sqrt_dim ? std::sqrt((float)h.dim) : 1.0f;
  if (std::fabs(h.embed_scale - want_embed) > 1e-5f * want_embed)
    return ml_fail(err, ML_E_ARG, "--gguf: embedding scale %g: llama.cpp's %s uses %g", (double)h.embed_scale, a->name,
                   (double)want_embed);
  if (!a->sliding && h.sliding_window != 0)
    return ml_fail(err, ML_E_ARG, "--gguf: llama.cpp's %s has no sliding window (the model has %u)", a->name,
                   h.sliding_window);
  if (!a->softcap && h.logit_softcap != 0.0f)
    return ml_fail(err, ML_E_ARG, "--gguf: llama.cpp's %s has no logit soft-capping", a->name);
  *out = a;
  return ML_OK;
}

// --- llama3 RoPE scaling ------------------------------------------------------------------------

// llama.cpp divides RoPE frequency i by rope_freqs[i]; these are the factors of Llama 3's scaling
// (the formula of llama.cpp's converter, LlamaModel.generate_extra_tensors): 1 for wavelengths
// shorter than orig_ctx / high_freq_factor, factor for those longer than orig_ctx /
// low_freq_factor, and 1 / ((1 - s) / factor + s) between, s interpolating.
constexpr uint32_t ROPE_FREQS_MAX = ML_LIMIT_HEAD_DIM / 2;

void llama3_factors(const ml_mlb_header& h, float* out, uint32_t n) {
  const double pi = 3.14159265358979323846, rot = (double)(h.n_rot ? h.n_rot : h.head_dim);
  const double orig = h.rope_orig_max_seq, lo = h.rope_low_freq_factor, hi = h.rope_high_freq_factor;
  const double low_wavelen = orig / lo, high_wavelen = orig / hi, factor = h.rope_factor;
  for (uint32_t i = 0; i < n; ++i) {
    const double wavelen = 2 * pi / std::pow((double)h.rope_theta, -2.0 * i / rot);
    double f = 1;
    if (wavelen > low_wavelen) {
      f = factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (orig / wavelen - lo) / (hi - lo);
      f = 1 / ((1 - smooth) / factor + smooth);
    }
    out[i] = (float)f;
  }
}

// --- the metadata ---------------------------------------------------------------------------------

// The metadata key/value pairs; written twice (count, then write) so the count needs no table.
struct kv_writer {
  gguf_sink* o;
  const char* arch;
  uint64_t count = 0;

  void key(const char* k, uint32_t type) {
    o->str(k);
    o->u32(type);
    ++count;
  }
  // "<arch>.<suffix>"
  void akey(const char* suffix, uint32_t type) {
    char k[128];
    std::snprintf(k, sizeof k, "%s.%s", arch, suffix);
    key(k, type);
  }
  void u32(const char* suffix, uint32_t v) { akey(suffix, GGUF_V_U32), o->u32(v); }
  void f32(const char* suffix, float v) { akey(suffix, GGUF_V_F32), o->f32(v); }
};

void write_metadata(kv_writer* w, const ml_mlb_header& h, const arch_desc& a, const gguf_vocab& v) {
  gguf_sink* o = w->o;
  w->key("general.architecture", GGUF_V_STRING), o->str(a.name);
  w->key("general.name", GGUF_V_STRING), o->str("krafla");
  w->key("general.file_type", GGUF_V_U32), o->u32(h.wtype == ML_DT_Q8 ? 7u : 2u);  // MOSTLY_Q8_0 / MOSTLY_Q4_0
  w->u32("context_length", h.max_seq);
  w->u32("embedding_length", h.dim);
  w->u32("block_count", h.n_layers);
  w->u32("feed_forward_length", h.hidden_dim);  // the padded width: the tensors' shape
  w->u32("attention.head_count", h.n_heads);
  w->u32("attention.head_count_kv", h.n_kv_heads);
  w->u32("attention.key_length", h.head_dim);
  w->u32("attention.value_length", h.head_dim);
  w->f32("attention.layer_norm_rms_epsilon", h.norm_eps);
  w->f32("rope.freq_base", h.rope_theta);
  w->u32("rope.dimension_count", h.n_rot ? h.n_rot : h.head_dim);
  w->u32("vocab_size", h.vocab_size);
  if (h.rope_scaling == ML_ROPE_SCALING_LINEAR) {
    w->akey("rope.scaling.type", GGUF_V_STRING), o->str("linear");
    w->f32("rope.scaling.factor", h.rope_factor);
  }
  if (a.sliding && h.sliding_window != 0) {
    w->u32("attention.sliding_window", h.sliding_window);
    w->u32("attention.sliding_window_pattern", h.sliding_pattern);
    w->f32("rope.freq_base_swa", h.rope_local_theta != 0.0f ? h.rope_local_theta : h.rope_theta);
  }
  if (a.softcap && h.logit_softcap != 0.0f) w->f32("final_logit_softcapping", h.logit_softcap);
  if (a.qwen35) {
    w->u32("ssm.conv_kernel", h.linear_conv);
    w->u32("ssm.state_size", h.linear_k_dim);
    w->u32("ssm.group_count", h.linear_k_heads);
    w->u32("ssm.time_step_rank", h.linear_v_heads);
    w->u32("ssm.inner_size", h.linear_v_heads * h.linear_v_dim);
    w->u32("full_attention_interval", h.linear_period);
    // Interleaved M-RoPE's sections (Qwen3.5's [11, 11, 10, 0] for 64 rotated dims): for text every
    // section sees the same position, so this is NEOX rope over n_rot, as krafla computes.
    const uint32_t half = (h.n_rot ? h.n_rot : h.head_dim) / 2;
    const uint32_t sec[4] = {(half + 2) / 3, (half + 1) / 3, half / 3, 0};  // 32 -> 11, 11, 10
    w->akey("rope.dimension_sections", GGUF_V_ARRAY), o->u32(GGUF_V_I32), o->u64(4);
    for (uint32_t x : sec) o->u32(x);
  }

  const uint32_t n = h.vocab_size;
  w->key("tokenizer.ggml.model", GGUF_V_STRING), o->str("llama");
  w->key("tokenizer.ggml.tokens", GGUF_V_ARRAY), o->u32(GGUF_V_STRING), o->u64(n);
  for (uint32_t i = 0; i < n; ++i)
    o->str((const char*)v.bytes.data + v.off.as<uint64_t>()[i], v.len.as<uint32_t>()[i]);
  w->key("tokenizer.ggml.scores", GGUF_V_ARRAY), o->u32(GGUF_V_F32), o->u64(n);
  for (uint32_t i = 0; i < n; ++i) o->f32(v.score.as<float>()[i]);
  w->key("tokenizer.ggml.token_type", GGUF_V_ARRAY), o->u32(GGUF_V_I32), o->u64(n);
  for (uint32_t i = 0; i < n; ++i) o->u32((uint32_t)v.type.as<int32_t>()[i]);
  w->key("tokenizer.ggml.bos_token_id", GGUF_V_U32), o->u32(h.bos_id);
  w->key("tokenizer.ggml.eos_token_id", GGUF_V_U32), o->u32(h.eos_id);
  w->key("tokenizer.ggml.unknown_token_id", GGUF_V_U32), o->u32(0);
  w->key("tokenizer.ggml.add_bos_token", GGUF_V_BOOL), o->put("\1", 1);
  w->key("tokenizer.ggml.add_eos_token", GGUF_V_BOOL), o->put("\0", 1);
}

}  // namespace

ml_status cv_write_gguf(const cv_model* m, const char* path, ml_error* err) {
  if (!path || !*path) return ml_fail(err, ML_E_ARG, "--gguf: no path given");
  const arch_desc* a = nullptr;
  ML_TRY(check_header(m->h, &a, err));
  for (size_t i = 0; i < m->n_tensors; ++i) {
    const ml_mlb_tensor& t = m->tensors[i].t;
    if (t.type != ML_DT_F32 && t.type != ML_DT_F16 && t.type != ML_DT_Q8 && t.type != ML_DT_Q4)
      return ml_fail(err, ML_E_ARG, "--gguf: tensor %s has type %u", t.name, t.type);
    if ((t.type == ML_DT_Q8 || t.type == ML_DT_Q4) && t.scale_type != ML_SCALE_F16)
      return ml_fail(err, ML_E_ARG, "--gguf: tensor %s has f32 scales; write the model with --scales f16", t.name);
  }
  const bool permute = m->h.rope_type != a->rope_type;
  gguf_vocab v;
  ML_TRY(gguf_vocab_make(m, &v, err));

  // Pass 1 counts: the metadata's key count and the header + metadata + infos size.
  gguf_sink count{nullptr, 0, err};
  kv_writer kc{&count, a->name};
  write_metadata(&kc, m->h, *a, v);
  uint64_t data_size = 0;
  float freqs[ROPE_FREQS_MAX];
  const uint32_t n_freqs = m->h.rope_scaling == ML_ROPE_SCALING_LLAMA3 ? (m->h.n_rot ? m->h.n_rot : m->h.head_dim) / 2 : 0;
  if (n_freqs > ROPE_FREQS_MAX) return ml_fail(err, ML_E_ARG, "--gguf: head_dim %u is too large", m->h.head_dim);
  llama3_factors(m->h, freqs, n_freqs);
  cv_buf plan;
  size_t n_merged = 0;
  ML_TRY(gguf_plan_merges(m, a->qwen35, &plan, &n_merged, err));
  const size_t* partner = plan.as<size_t>();
  gguf_write_infos(&count, m, partner, a->qwen35, n_freqs, &data_size);
  const uint64_t data_start = gguf_align_up(24 + count.pos);

  ml_out_file* f = new (std::nothrow) ml_out_file;
  if (!f) return ml_fail(err, ML_E_NOMEM, "%s: cannot allocate the output", path);
  ml_status s = ml_out_open(f, path, nullptr, 0, err);
  if (s != ML_OK) {
    delete f;
    return s;
  }
  gguf_sink o{f, 0, err};
  o.u32(GGUF_MAGIC);
  o.u32(GGUF_VERSION);
  o.u64(m->n_tensors - n_merged + (n_freqs > 0 ? 1 : 0));
  o.u64(kc.count);
  kv_writer kw{&o, a->name};
  write_metadata(&kw, m->h, *a, v);
  gguf_write_infos(&o, m, partner, a->qwen35, n_freqs, &data_size);
  o.zeros_to(data_start);
  const size_t hd = m->h.head_dim;
  gguf_write_tensors(&o, m, partner, permute, hd, a->rope_type == ML_ROPE_INTERLEAVED, data_start);
  for (uint32_t i = 0; i < n_freqs && o.s == ML_OK; ++i) o.f32(freqs[i]);
  if (n_freqs > 0) o.zeros_to(gguf_align_up(o.pos - data_start) + data_start);
  s = o.s;
  if (s == ML_OK && o.pos != data_start + data_size)
    s = ml_fail(err, ML_E_IO, "cannot write %s: wrote %llu bytes, the layout says %llu", path, (unsigned long long)o.pos,
                (unsigned long long)(data_start + data_size));
  if (s == ML_OK) s = ml_out_commit(f, err);
  ml_out_discard(f);
  delete f;
  return s;
}
