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

// --- the vocabulary ------------------------------------------------------------------------------

// llama.cpp's token types (llama.h, llama_token_type).
enum : int32_t { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_BYTE = 6 };

constexpr size_t PIECE_MAX = 64;  // a placeholder or renamed piece

// The pieces, scores and types of vocab_size tokens: pieces back to back in bytes, token i at
// off[i], len[i].
struct vocab {
  cv_buf bytes, off, len, score, type;  // u8, u64, u32, f32, i32
  size_t fill = 0;
};

ml_status vocab_alloc(vocab* v, uint32_t n, size_t bytes, ml_error* err) {
  ML_TRY(cv_alloc(&v->bytes, bytes, 1, err, "--gguf: the vocabulary's pieces"));
  ML_TRY(cv_alloc(&v->off, n, sizeof(uint64_t), err, "--gguf: the vocabulary"));
  ML_TRY(cv_alloc(&v->len, n, sizeof(uint32_t), err, "--gguf: the vocabulary"));
  ML_TRY(cv_alloc(&v->score, n, sizeof(float), err, "--gguf: the vocabulary's scores"));
  ML_TRY(cv_alloc(&v->type, n, sizeof(int32_t), err, "--gguf: the vocabulary's types"));
  return ML_OK;
}

// Appends token i's piece (the caller sized bytes for it).
void vocab_put(vocab* v, uint32_t i, const uint8_t* p, size_t n) {
  v->off.as<uint64_t>()[i] = v->fill;
  v->len.as<uint32_t>()[i] = (uint32_t)n;
  std::memcpy(v->bytes.data + v->fill, p, n);
  v->fill += n;
}

bool is_byte_piece(const uint8_t* p, uint32_t n) {
  auto hex = [](uint8_t c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return n == 6 && p[0] == '<' && p[1] == '0' && p[2] == 'x' && hex(p[3]) && hex(p[4]) && p[5] == '>';
}

uint32_t get_u32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// From a llama2.c tokenizer.bin (already checked against vocab_size by cv_attach_tokenizer): each
// space becomes U+2581 (3 bytes), "\n<s>\n"-style specials lose their newlines.
ml_status vocab_from_llama2c(const cv_model* m, vocab* v, ml_error* err) {
  const uint8_t* p = m->tokenizer.data;
  const uint32_t n = m->h.vocab_size;
  size_t at = 4, bytes = 0;
  for (uint32_t i = 0; i < n; ++i) {  // pass 1: the size (at most 3 bytes per byte, plus renames)
    const uint32_t len = get_u32(p + at + 4);
    bytes += (size_t)len * 3 + PIECE_MAX;
    at += 8 + len;
  }
  ML_TRY(vocab_alloc(v, n, bytes, err));
  at = 4;
  uint8_t tmp[PIECE_MAX];
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t bits = get_u32(p + at);
    std::memcpy(&v->score.as<float>()[i], &bits, 4);
    uint32_t len = get_u32(p + at + 4);
    const uint8_t* s = p + at + 8;
    at += 8 + len;
    while (len > 0 && s[0] == '\n' && len >= 3 && s[len - 1] == '\n' && s[1] == '<') ++s, len -= 2;
    int32_t type = TT_NORMAL;
    if (i == 0 && len == 5 && std::memcmp(s, "<unk>", 5) == 0) type = TT_UNKNOWN;
    else if ((i == m->h.bos_id || i == m->h.eos_id) && len >= 2 && s[0] == '<' && s[len - 1] == '>') type = TT_CONTROL;
    else if (is_byte_piece(s, len)) type = TT_BYTE;
    v->type.as<int32_t>()[i] = type;
    if (len == 0) {  // llama.cpp would rename it "[EMPTY_i]" itself; done here so uniqueness holds
      const int k = std::snprintf((char*)tmp, sizeof tmp, "[EMPTY_%u]", i);
      vocab_put(v, i, tmp, (size_t)k);
      continue;
    }
    v->off.as<uint64_t>()[i] = v->fill;
    size_t out = 0;
    for (uint32_t j = 0; j < len; ++j) {
      if (s[j] == ' ' && type == TT_NORMAL) {
        v->bytes.data[v->fill + out++] = 0xE2, v->bytes.data[v->fill + out++] = 0x96, v->bytes.data[v->fill + out++] = 0x81;
      } else {
        v->bytes.data[v->fill + out++] = s[j];
      }
    }
    v->len.as<uint32_t>()[i] = (uint32_t)out;
    v->fill += out;
  }
  return ML_OK;
}

// Placeholder pieces for a model without a llama2.c tokenizer, laid out like Llama 2's: <unk> at
// 0, <s> and </s> at the header's BOS/EOS ids, the 256 byte tokens "<0xHH>" from 3 on (after BOS
// or EOS when either falls in that range: Qwen's are above 150000), "<tok_N>" elsewhere. llama.cpp's
// SPM tokenizer falls back to the byte tokens for any byte, and node-llama-cpp tokenizes text at
// load: without them llama.cpp throws.
ml_status vocab_placeholder(const cv_model* m, vocab* v, ml_error* err) {
  const uint32_t n = m->h.vocab_size, bos = m->h.bos_id, eos = m->h.eos_id;
  uint64_t b0 = 3;  // the byte block [b0, b0 + 256) holds neither BOS nor EOS
  for (int pass = 0; pass < 2; ++pass)
    for (uint32_t id : {bos, eos})
      if (id >= b0 && id < b0 + 256) b0 = (uint64_t)id + 1;
  if (b0 + 256 > n)
    return ml_fail(err, ML_E_ARG,
                   "--gguf: without a llama2.c tokenizer the GGUF gets a placeholder vocabulary with 256 byte tokens, "
                   "which do not fit --vocab %u beside BOS %u and EOS %u; give a larger --vocab or --tokenizer",
                   n, bos, eos);
  size_t bytes;
  if (!ml_mul(n, PIECE_MAX, &bytes)) return ml_fail(err, ML_E_NOMEM, "--gguf: the vocabulary of %u tokens overflows", n);
  ML_TRY(vocab_alloc(v, n, bytes, err));
  char tmp[PIECE_MAX];
  for (uint32_t i = 0; i < n; ++i) {
    int k;
    int32_t type = TT_CONTROL;
    if (i == bos) k = std::snprintf(tmp, sizeof tmp, "<s>");
    else if (i == eos) k = std::snprintf(tmp, sizeof tmp, "</s>");
    else if (i == 0) type = TT_UNKNOWN, k = std::snprintf(tmp, sizeof tmp, "<unk>");
    else if (i >= b0 && i < b0 + 256) type = TT_BYTE, k = std::snprintf(tmp, sizeof tmp, "<0x%02X>", (unsigned)(i - b0));
    else type = TT_NORMAL, k = std::snprintf(tmp, sizeof tmp, "<tok_%u>", i);
    v->type.as<int32_t>()[i] = type;
    v->score.as<float>()[i] = 0.0f;
    vocab_put(v, i, (const uint8_t*)tmp, (size_t)k);
  }
  return ML_OK;
}

// A piece equal to an earlier token's becomes "[DUP_i]" (llama.cpp asserts unique pieces).
ml_status vocab_unique(vocab* v, uint32_t n, ml_error* err) {
  cv_buf idx;
  ML_TRY(cv_alloc(&idx, n, sizeof(uint32_t), err, "--gguf: the vocabulary's order"));
  uint32_t* ix = idx.as<uint32_t>();
  for (uint32_t i = 0; i < n; ++i) ix[i] = i;
  const uint8_t* b = v->bytes.data;
  const uint64_t* off = v->off.as<uint64_t>();
  const uint32_t* len = v->len.as<uint32_t>();
  auto cmp = [&](uint32_t x, uint32_t y) {
    const uint32_t k = len[x] < len[y] ? len[x] : len[y];
    const int c = std::memcmp(b + off[x], b + off[y], k);
    if (c != 0) return c < 0;
    if (len[x] != len[y]) return len[x] < len[y];
    return x < y;  // equal pieces in id order: the first keeps its piece
  };
  std::sort(ix, ix + n, cmp);
  for (uint32_t j = 1; j < n; ++j) {
    const uint32_t a = ix[j - 1], c = ix[j];
    if (len[a] == len[c] && std::memcmp(b + off[a], b + off[c], len[a]) == 0) {
      // Renamed in place: every piece has room for PIECE_MAX bytes (vocab_from_llama2c's pass 1)
      // only in total, so the new piece goes at the end of the buffer.
      char tmp[PIECE_MAX];
      const int k = std::snprintf(tmp, sizeof tmp, "[DUP_%u]", c);
      if (v->fill + (size_t)k > v->bytes.size) return ml_fail(err, ML_E_NOMEM, "--gguf: vocabulary renames overflow");
      vocab_put(v, c, (const uint8_t*)tmp, (size_t)k);
    }
  }
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

// --- the file ------------------------------------------------------------------------------------

// A sink that either counts bytes (f null) or writes them.
struct sink {
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

// The metadata key/value pairs; written twice (count, then write) so the count needs no table.
struct kv_writer {
  sink* o;
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

void write_metadata(kv_writer* w, const ml_mlb_header& h, const arch_desc& a, const vocab& v) {
  sink* o = w->o;
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

uint64_t align_up(uint64_t v) { return (v + GGUF_DEFAULT_ALIGNMENT - 1) / GGUF_DEFAULT_ALIGNMENT * GGUF_DEFAULT_ALIGNMENT; }

// Qwen3.5's attention layers: llama.cpp's attn_q holds, per head, the head's q rows then its
// output-gate rows (the Hugging Face q_proj layout); krafla keeps them as attn_q and attn_gate.
// partner[i] is the index of the attn_gate merged into tensor i (an attn_q), NONE otherwise, and
// MERGED for that attn_gate itself (written inside its attn_q). A layer's tensors are adjacent in
// the model, so the gate is looked for among the next few tensors only.
constexpr size_t NONE = SIZE_MAX, MERGED = SIZE_MAX - 1, NEAR = 32;

ml_status plan_merges(const cv_model* m, bool qwen35, cv_buf* partner, size_t* n_merged, ml_error* err) {
  ML_TRY(cv_alloc(partner, m->n_tensors, sizeof(size_t), err, "--gguf: the tensor plan"));
  size_t* p = partner->as<size_t>();
  for (size_t i = 0; i < m->n_tensors; ++i) p[i] = NONE;
  *n_merged = 0;
  if (!qwen35) return ML_OK;
  char want[ML_MLB_NAME_MAX + 16];
  for (size_t i = 0; i < m->n_tensors; ++i) {
    const char* name = m->tensors[i].t.name;
    if (std::strncmp(name, "blk.", 4) != 0 || !ends_with(name, ".attn_q")) continue;
    std::snprintf(want, sizeof want, "%.*sattn_gate", (int)(std::strlen(name) - 6), name);
    size_t g = NONE;
    for (size_t j = i + 1; j < m->n_tensors && j <= i + NEAR; ++j)
      if (std::strcmp(m->tensors[j].t.name, want) == 0) g = j;
    if (g == NONE) return ml_fail(err, ML_E_ARG, "--gguf: %s has no %s next to it", name, want);
    const ml_mlb_tensor &q = m->tensors[i].t, &gt = m->tensors[g].t;
    if (q.rows != gt.rows || q.cols != gt.cols || q.type != gt.type || q.rows % m->h.head_dim != 0)
      return ml_fail(err, ML_E_ARG, "--gguf: %s and %s differ in shape or type", name, want);
    p[i] = g, p[g] = MERGED;
    ++*n_merged;
  }
  return ML_OK;
}

// The tensor infos (the model's, then rope_freqs.weight when n_freqs > 0); returns the data
// section's size through *data_size.
void write_infos(sink* o, const cv_model* m, const size_t* partner, bool qwen35, uint32_t n_freqs,
                 uint64_t* data_size) {
  uint64_t off = 0;
  char name[ML_MLB_NAME_MAX + 16];
  for (size_t i = 0; i < m->n_tensors; ++i) {
    if (partner[i] == MERGED) continue;
    ml_mlb_tensor t = m->tensors[i].t;
    if (partner[i] != NONE) t.rows *= 2;
    gguf_name(t.name, name, sizeof name, qwen35);
    o->str(name);
    if (t.rows == 1) {
      o->u32(1), o->u64(t.cols);
    } else {
      o->u32(2), o->u64(t.cols), o->u64(t.rows);
    }
    o->u32(gguf_type_of(t));
    o->u64(off);
    off = align_up(off + gguf_bytes(t));
  }
  if (n_freqs > 0) {
    o->str("rope_freqs.weight");
    o->u32(1), o->u64(n_freqs);
    o->u32(GGUF_T_F32);
    o->u64(off);
    off = align_up(off + (uint64_t)n_freqs * 4);
  }
  *data_size = off;
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
void write_rows(sink* o, const cv_tensor& e, size_t r0, size_t r1) {
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
void write_data(sink* o, const cv_tensor& e, bool perm, size_t hd, bool to_interleaved) {
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
  vocab v;
  if (m->has_tokenizer && m->tokenizer_kind == 1) ML_TRY(vocab_from_llama2c(m, &v, err));
  else ML_TRY(vocab_placeholder(m, &v, err));
  ML_TRY(vocab_unique(&v, m->h.vocab_size, err));

  // Pass 1 counts: the metadata's key count and the header + metadata + infos size.
  sink count{nullptr, 0, err};
  kv_writer kc{&count, a->name};
  write_metadata(&kc, m->h, *a, v);
  uint64_t data_size = 0;
  float freqs[ROPE_FREQS_MAX];
  const uint32_t n_freqs = m->h.rope_scaling == ML_ROPE_SCALING_LLAMA3 ? (m->h.n_rot ? m->h.n_rot : m->h.head_dim) / 2 : 0;
  if (n_freqs > ROPE_FREQS_MAX) return ml_fail(err, ML_E_ARG, "--gguf: head_dim %u is too large", m->h.head_dim);
  llama3_factors(m->h, freqs, n_freqs);
  cv_buf plan;
  size_t n_merged = 0;
  ML_TRY(plan_merges(m, a->qwen35, &plan, &n_merged, err));
  const size_t* partner = plan.as<size_t>();
  write_infos(&count, m, partner, a->qwen35, n_freqs, &data_size);
  const uint64_t data_start = align_up(24 + count.pos);

  ml_out_file* f = new (std::nothrow) ml_out_file;
  if (!f) return ml_fail(err, ML_E_NOMEM, "%s: cannot allocate the output", path);
  ml_status s = ml_out_open(f, path, nullptr, 0, err);
  if (s != ML_OK) {
    delete f;
    return s;
  }
  sink o{f, 0, err};
  o.u32(GGUF_MAGIC);
  o.u32(GGUF_VERSION);
  o.u64(m->n_tensors - n_merged + (n_freqs > 0 ? 1 : 0));
  o.u64(kc.count);
  kv_writer kw{&o, a->name};
  write_metadata(&kw, m->h, *a, v);
  write_infos(&o, m, partner, a->qwen35, n_freqs, &data_size);
  o.zeros_to(data_start);
  const size_t hd = m->h.head_dim;
  for (size_t i = 0; i < m->n_tensors && o.s == ML_OK; ++i) {
    if (partner[i] == MERGED) continue;
    if (partner[i] != NONE) {  // qwen35: per head, q's rows then the gate's (plan_merges)
      for (size_t r = 0; r < m->tensors[i].t.rows; r += hd) {
        write_rows(&o, m->tensors[i], r, r + hd);
        write_rows(&o, m->tensors[partner[i]], r, r + hd);
      }
    } else {
      write_data(&o, m->tensors[i], permute && feeds_rope(m->tensors[i].t.name), hd,
                 a->rope_type == ML_ROPE_INTERLEAVED);
    }
    o.zeros_to(align_up(o.pos - data_start) + data_start);
  }
  for (uint32_t i = 0; i < n_freqs && o.s == ML_OK; ++i) o.f32(freqs[i]);
  if (n_freqs > 0) o.zeros_to(align_up(o.pos - data_start) + data_start);
  s = o.s;
  if (s == ML_OK && o.pos != data_start + data_size)
    s = ml_fail(err, ML_E_IO, "cannot write %s: wrote %llu bytes, the layout says %llu", path, (unsigned long long)o.pos,
                (unsigned long long)(data_start + data_size));
  if (s == ML_OK) s = ml_out_commit(f, err);
  ml_out_discard(f);
  delete f;
  return s;
}
