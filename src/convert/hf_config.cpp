// config.json -> ml_mlb_header (hf_config.h has the contract).
#include "convert/hf_config.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/bump.h"
#include "core/file.h"
#include "core/json.h"
#include "model/limits.h"

namespace {

// Bounds of the linear-attention fields (the engine's state is nv x dk x dv floats per layer).
constexpr uint32_t MAX_LINEAR_HEADS = 4096, MAX_LINEAR_DIM = 4096, MAX_LINEAR_CONV = 64;

enum kind { K_LLAMA, K_QWEN2, K_QWEN3, K_GEMMA3, K_QWEN35 };

struct named_kind {
  const char* name;
  kind k = K_LLAMA;
};
constexpr named_kind ARCHITECTURES[] = {{"LlamaForCausalLM", K_LLAMA},   {"MistralForCausalLM", K_LLAMA},
                                        {"Qwen2ForCausalLM", K_QWEN2},   {"Qwen3ForCausalLM", K_QWEN3},
                                        {"Gemma3ForCausalLM", K_GEMMA3}, {"Qwen3_5ForConditionalGeneration", K_QWEN35},
                                        {"Qwen3_5ForCausalLM", K_QWEN35}};
constexpr named_kind MODEL_TYPES[] = {{"llama", K_LLAMA},        {"mistral", K_LLAMA},      {"qwen2", K_QWEN2},
                                      {"qwen3", K_QWEN3},        {"gemma3_text", K_GEMMA3}, {"qwen3_5", K_QWEN35},
                                      {"qwen3_5_text", K_QWEN35}};

// Where keys are read: an object and the prefix that names it in messages ("", "text_config.",
// "rope_scaling.").
struct src {
  const char* what;  // the file
  const ml_json* obj;
  const char* pre;
};

// The member, or null when absent or JSON null (transformers treats null as "not set").
const ml_json* get(const src& s, const char* key) {
  const ml_json* v = ml_json_get(s.obj, key);
  return v && v->type != ML_JSON_NULL ? v : nullptr;
}

// A short description of a value for messages: a number's text, a quoted string, or the type.
const char* show(const ml_json* v, char* buf, size_t n) {
  if (v->type == ML_JSON_NUMBER)
    std::snprintf(buf, n, "%.40s", v->str);
  else if (v->type == ML_JSON_STRING)
    std::snprintf(buf, n, "\"%.40s\"", v->str);
  else
    std::snprintf(buf, n, "a%s %s", v->type == ML_JSON_ARRAY || v->type == ML_JSON_OBJECT ? "n" : "",
                  ml_json_type_name(v->type));
  return buf;
}

ml_status missing(const src& s, const char* key, ml_error* err) {
  return ml_fail(err, ML_E_FORMAT, "%s: %s%s is missing", s.what, s.pre, key);
}

// An integer key in [min, max]; def when absent (unless required).
ml_status get_u32(const src& s, const char* key, bool required, uint32_t def, uint32_t min, uint32_t max, uint32_t* out,
                  ml_error* err) {
  const ml_json* v = get(s, key);
  if (!v) {
    if (required) return missing(s, key, err);
    *out = def;
    return ML_OK;
  }
  // 256.0 is an integer to Python's int() but not to JSON's grammar: accept a number whose value is integral.
  const bool integral =
      v->type == ML_JSON_NUMBER && (v->is_int || (std::isfinite(v->num) && v->num == std::floor(v->num)));
  const double x = v->type == ML_JSON_NUMBER ? (v->is_int ? (double)v->i64 : v->num) : 0.0;
  if (!integral || x < (double)min || x > (double)max) {
    char b[64];
    return ml_fail(err, ML_E_FORMAT, "%s: %s%s is %s, not an integer in %u..%u", s.what, s.pre, key,
                   show(v, b, sizeof b), min, max);
  }
  *out = (uint32_t)x;
  return ML_OK;
}

// A number key in (lo, hi) (lo < x when open_lo, else lo <= x); def when absent (unless required).
ml_status get_num(const src& s, const char* key, bool required, double def, double lo, double hi, double* out,
                  ml_error* err) {
  const ml_json* v = get(s, key);
  if (!v) {
    if (required) return missing(s, key, err);
    *out = def;
    return ML_OK;
  }
  if (v->type != ML_JSON_NUMBER || !(v->num > lo && v->num < hi)) {
    char b[64];
    return ml_fail(err, ML_E_FORMAT, "%s: %s%s is %s, not a number in (%g, %g)", s.what, s.pre, key,
                   show(v, b, sizeof b), lo, hi);
  }
  *out = v->num;
  return ML_OK;
}

ml_status get_bool(const src& s, const char* key, bool def, bool* out, ml_error* err) {
  const ml_json* v = get(s, key);
  if (!v) return *out = def, ML_OK;
  if (!ml_json_is_bool(v)) {
    char b[64];
    return ml_fail(err, ML_E_FORMAT, "%s: %s%s is %s, not true or false", s.what, s.pre, key, show(v, b, sizeof b));
  }
  *out = v->type == ML_JSON_TRUE;
  return ML_OK;
}

// A string key (null when absent).
ml_status get_str(const src& s, const char* key, const char** out, ml_error* err) {
  const ml_json* v = get(s, key);
  *out = nullptr;
  if (!v) return ML_OK;
  if (v->type != ML_JSON_STRING) {
    char b[64];
    return ml_fail(err, ML_E_FORMAT, "%s: %s%s is %s, not a string", s.what, s.pre, key, show(v, b, sizeof b));
  }
  *out = v->str;
  return ML_OK;
}

// A token id: an integer, or a non-empty list of them (its first is taken). *present says whether it was set.
ml_status get_id(const src& s, const char* key, uint32_t* out, bool* present, ml_error* err) {
  const ml_json* v = get(s, key);
  *present = false;
  if (!v) return ML_OK;
  const ml_json* first = v;
  if (v->type == ML_JSON_ARRAY) {
    if (v->n == 0) return ML_OK;
    first = v->items[0];
  }
  if (!ml_json_is(first, ML_JSON_NUMBER) || !first->is_int || first->i64 < 0 || first->i64 > (int64_t)UINT32_MAX) {
    char b[64];
    return ml_fail(err, ML_E_FORMAT, "%s: %s%s%s is %s, not a token id", s.what, s.pre, key,
                   v->type == ML_JSON_ARRAY ? "[0]" : "", show(first, b, sizeof b));
  }
  *out = (uint32_t)first->i64;
  *present = true;
  return ML_OK;
}

// A key that must be absent, false or null: a feature the engine lacks.
ml_status refuse_true(const src& s, const char* key, ml_error* err) {
  bool on = false;
  ML_TRY(get_bool(s, key, false, &on, err));
  if (on)
    return ml_fail(err, ML_E_FORMAT, "%s: %s%s is true, which this architecture does not support", s.what, s.pre, key);
  return ML_OK;
}

// The activation keys must name the architecture's function when present.
ml_status check_act(const src& s, const char* a, const char* b, ml_error* err) {
  static const char* const keys[] = {"hidden_act", "hidden_activation"};
  for (const char* key : keys) {
    const char* v = nullptr;
    ML_TRY(get_str(s, key, &v, err));
    if (v && std::strcmp(v, a) != 0 && (!b || std::strcmp(v, b) != 0))
      return ml_fail(err, ML_E_FORMAT, "%s: %s%s \"%.40s\" is not supported (%s%s%s)", s.what, s.pre, key, v, a,
                     b ? " or " : "", b ? b : "");
  }
  return ML_OK;
}

// RoPE scaling from an object with rope_type (or type): default, linear or llama3.
ml_status read_scaling(const src& s, bool type_required, ml_mlb_header* h, ml_error* err) {
  const char* type = nullptr;
  ML_TRY(get_str(s, "rope_type", &type, err));
  if (!type) ML_TRY(get_str(s, "type", &type, err));
  if (!type) {
    if (type_required) return missing(s, "rope_type", err);
    type = "default";
  }
  double factor = 1.0, lo = 1.0, hi = 1.0;
  if (std::strcmp(type, "default") == 0) {
    h->rope_scaling = ML_ROPE_SCALING_NONE;
    return ML_OK;
  }
  if (std::strcmp(type, "linear") == 0) {
    ML_TRY(get_num(s, "factor", true, 1.0, 0.0, 1e6, &factor, err));
    h->rope_scaling = ML_ROPE_SCALING_LINEAR;
    h->rope_factor = (float)factor;
    return ML_OK;
  }
  if (std::strcmp(type, "llama3") == 0) {
    uint32_t orig = 0;
    ML_TRY(get_num(s, "factor", true, 1.0, 0.0, 1e6, &factor, err));
    ML_TRY(get_num(s, "low_freq_factor", true, 1.0, 0.0, 1e6, &lo, err));
    ML_TRY(get_num(s, "high_freq_factor", true, 1.0, 0.0, 1e6, &hi, err));
    ML_TRY(get_u32(s, "original_max_position_embeddings", true, 0, 1, ML_LIMIT_MAX_SEQ, &orig, err));
    if (!(hi > lo))
      return ml_fail(err, ML_E_FORMAT, "%s: %shigh_freq_factor %g is not above low_freq_factor %g", s.what, s.pre, hi,
                     lo);
    h->rope_scaling = ML_ROPE_SCALING_LLAMA3;
    h->rope_factor = (float)factor;
    h->rope_low_freq_factor = (float)lo;
    h->rope_high_freq_factor = (float)hi;
    h->rope_orig_max_seq = orig;
    return ML_OK;
  }
  return ml_fail(err, ML_E_FORMAT, "%s: %srope_type \"%.40s\" is not supported (default, linear or llama3)", s.what,
                 s.pre, type);
}

// A layer_types list: every entry is `local` or "full_attention", and full ones are exactly the
// layers l with l % period == period - 1. *period 0 on entry: derived from the first full layer
// (0 when there is none). present: whether the key exists.
ml_status read_layer_types(const src& s, uint32_t n_layers, const char* local, uint32_t* period, bool* present,
                           ml_error* err) {
  const ml_json* v = get(s, "layer_types");
  *present = v != nullptr;
  if (!v) return ML_OK;
  if (v->type != ML_JSON_ARRAY || v->n != n_layers)
    return ml_fail(err, ML_E_FORMAT, "%s: %slayer_types is not a list of num_hidden_layers (%u) strings", s.what, s.pre,
                   n_layers);
  for (size_t l = 0; l < v->n; ++l) {
    const ml_json* e = v->items[l];
    const bool is_full = ml_json_is(e, ML_JSON_STRING) && std::strcmp(e->str, "full_attention") == 0;
    if (!is_full && !(ml_json_is(e, ML_JSON_STRING) && std::strcmp(e->str, local) == 0))
      return ml_fail(err, ML_E_FORMAT, "%s: %slayer_types[%zu] is not \"%s\" or \"full_attention\"", s.what, s.pre, l,
                     local);
    if (is_full && *period == 0) *period = (uint32_t)l + 1;
  }
  for (size_t l = 0; l < v->n; ++l) {
    const bool is_full = std::strcmp(v->items[l]->str, "full_attention") == 0;
    const bool want = *period != 0 && l % *period == *period - 1;
    if (is_full != want)
      return ml_fail(err, ML_E_FORMAT, "%s: %slayer_types[%zu] is \"%s\": the layers do not repeat with period %u",
                     s.what, s.pre, l, v->items[l]->str, *period);
  }
  return ML_OK;
}

ml_status find_kind(const src& top, kind* k, ml_error* err) {
  const ml_json* archs = get(top, "architectures");
  const char* mt = nullptr;
  ML_TRY(get_str(top, "model_type", &mt, err));
  if (archs) {
    if (archs->type != ML_JSON_ARRAY || archs->n == 0 || !ml_json_is(archs->items[0], ML_JSON_STRING))
      return ml_fail(err, ML_E_FORMAT, "%s: architectures is not a non-empty list of strings", top.what);
    const char* a = archs->items[0]->str;
    for (const named_kind& n : ARCHITECTURES)
      if (std::strcmp(a, n.name) == 0) return *k = n.k, ML_OK;
    return ml_fail(err, ML_E_FORMAT,
                   "%s: architectures[0] \"%.60s\" is not supported (Llama, Mistral, Qwen2, Qwen3, Gemma3 and Qwen3_5 "
                   "causal LMs)",
                   top.what, a);
  }
  if (!mt) return ml_fail(err, ML_E_FORMAT, "%s: neither architectures nor model_type is given", top.what);
  for (const named_kind& n : MODEL_TYPES)
    if (std::strcmp(mt, n.name) == 0) return *k = n.k, ML_OK;
  return ml_fail(err, ML_E_FORMAT, "%s: model_type \"%.60s\" is not supported", top.what, mt);
}

ml_status parse(const ml_json* root, const ml_json* gen, const char* what, ml_mlb_header* out, ml_error* err) {
  if (!ml_json_is(root, ML_JSON_OBJECT)) return ml_fail(err, ML_E_FORMAT, "%s: the root is not an object", what);
  const src top{what, root, ""};
  kind k = K_LLAMA;
  ML_TRY(find_kind(top, &k, err));
  src s = top;
  const ml_json* tc = get(top, "text_config");
  if (k == K_QWEN35 && tc) {
    if (tc->type != ML_JSON_OBJECT) return ml_fail(err, ML_E_FORMAT, "%s: text_config is not an object", what);
    s = src{what, tc, "text_config."};
  } else if (k == K_QWEN35) {
    const char* mt = nullptr;
    ML_TRY(get_str(top, "model_type", &mt, err));
    if (mt && std::strcmp(mt, "qwen3_5") == 0) return missing(top, "text_config", err);
  }

  if (get(top, "quantization_config") || get(s, "quantization_config"))
    return ml_fail(err, ML_E_FORMAT,
                   "%s: quantization_config is set: pre-quantized checkpoints (GPTQ, AWQ, bitsandbytes, FP8, ...) are "
                   "not supported; convert the F32/F16/BF16 model",
                   what);
  ml_mlb_header h;
  static const uint32_t arch_of[] = {ML_ARCH_LLAMA, ML_ARCH_QWEN2, ML_ARCH_QWEN3, ML_ARCH_GEMMA3, ML_ARCH_QWEN35};
  h.arch = arch_of[k];
  uint32_t hidden = 0;
  ML_TRY(get_u32(s, "hidden_size", true, 0, 1, ML_LIMIT_DIM, &h.dim, err));
  ML_TRY(get_u32(s, "intermediate_size", true, 0, 1, ML_LIMIT_HIDDEN, &hidden, err));
  ML_TRY(get_u32(s, "num_hidden_layers", true, 0, 1, ML_LIMIT_LAYERS, &h.n_layers, err));
  ML_TRY(get_u32(s, "num_attention_heads", true, 0, 1, ML_LIMIT_HEADS, &h.n_heads, err));
  ML_TRY(get_u32(s, "num_key_value_heads", false, h.n_heads, 1, h.n_heads, &h.n_kv_heads, err));
  if (h.n_heads % h.n_kv_heads != 0)
    return ml_fail(err, ML_E_SHAPE, "%s: %snum_key_value_heads %u does not divide num_attention_heads %u", what, s.pre,
                   h.n_kv_heads, h.n_heads);
  if (!get(s, "head_dim") && h.dim % h.n_heads != 0)
    return ml_fail(err, ML_E_SHAPE,
                   "%s: %shidden_size %u is not a multiple of num_attention_heads %u and head_dim is missing", what,
                   s.pre, h.dim, h.n_heads);
  ML_TRY(get_u32(s, "head_dim", false, h.dim / h.n_heads, 2, ML_LIMIT_HEAD_DIM, &h.head_dim, err));
  ML_TRY(get_u32(s, "vocab_size", true, 0, 3, ML_LIMIT_VOCAB, &h.vocab_size, err));
  ML_TRY(get_u32(s, "max_position_embeddings", true, 0, 1, ML_LIMIT_MAX_SEQ, &h.max_seq, err));
  h.hidden_dim_orig = hidden;
  h.hidden_dim = (hidden + 31) / 32 * 32;
  double eps = 1e-6;
  ML_TRY(get_num(s, "rms_norm_eps", false, 1e-6, 0.0, 1.0, &eps, err));
  h.norm_eps = (float)eps;
  h.rope_type = ML_ROPE_HALF;
  h.wtype = ML_DT_Q8;
  h.scale_type = ML_SCALE_F32;

  // RoPE: rope_theta and rope_scaling (transformers 4.x), or rope_parameters (5.x; Gemma 3 keeps one
  // per layer kind there).
  const ml_json* rp = get(s, "rope_parameters");
  if (rp && rp->type != ML_JSON_OBJECT)
    return ml_fail(err, ML_E_FORMAT, "%s: %srope_parameters is not an object", what, s.pre);
  src rope_global{what, rp, "rope_parameters."}, rope_local{what, nullptr, "rope_parameters.sliding_attention."};
  if (k == K_GEMMA3 && rp && get(rope_global, "full_attention")) {
    rope_local.obj = get(rope_global, "sliding_attention");
    rope_global = src{what, get(rope_global, "full_attention"), "rope_parameters.full_attention."};
    if (!ml_json_is(rope_global.obj, ML_JSON_OBJECT) || (rope_local.obj && rope_local.obj->type != ML_JSON_OBJECT))
      return ml_fail(err, ML_E_FORMAT, "%s: %srope_parameters' layer kinds are not objects", what, s.pre);
  }
  const double theta_def = k == K_GEMMA3 ? 1e6 : 1e4;
  double theta = theta_def;
  if (rope_global.obj && get(rope_global, "rope_theta"))
    ML_TRY(get_num(rope_global, "rope_theta", true, theta_def, 0.0, 1e12, &theta, err));
  else
    ML_TRY(get_num(s, "rope_theta", false, theta_def, 0.0, 1e12, &theta, err));
  h.rope_theta = (float)theta;
  const ml_json* rs = get(s, "rope_scaling");
  if (rs) {
    if (rs->type != ML_JSON_OBJECT)
      return ml_fail(err, ML_E_FORMAT, "%s: %srope_scaling is not an object", what, s.pre);
    char pre[64];
    std::snprintf(pre, sizeof pre, "%srope_scaling.", s.pre);
    ML_TRY(read_scaling(src{what, rs, pre}, true, &h, err));
  } else if (rope_global.obj) {
    ML_TRY(read_scaling(rope_global, false, &h, err));
  }

  // Token ids: config.json (or its text_config), else generation_config.json.
  bool have = false;
  h.bos_id = h.eos_id = 0;
  const src gsrc{"generation_config.json", gen, ""};
  for (int which = 0; which < 2; ++which) {
    const char* key = which == 0 ? "bos_token_id" : "eos_token_id";
    uint32_t* id = which == 0 ? &h.bos_id : &h.eos_id;
    ML_TRY(get_id(s, key, id, &have, err));
    if (!have && s.obj != top.obj) ML_TRY(get_id(top, key, id, &have, err));
    if (!have && gen) ML_TRY(get_id(gsrc, key, id, &have, err));
  }

  bool tied = k == K_GEMMA3;
  if (get(s, "tie_word_embeddings"))
    ML_TRY(get_bool(s, "tie_word_embeddings", tied, &tied, err));
  else
    ML_TRY(get_bool(top, "tie_word_embeddings", tied, &tied, err));
  h.flags = tied ? (uint32_t)ML_FLAG_TIED_CLASSIFIER : 0u;
  ML_TRY(refuse_true(s, "mlp_bias", err));
  if (k != K_QWEN2) ML_TRY(refuse_true(s, "attention_bias", err));

  switch (k) {
    case K_LLAMA: {
      ML_TRY(check_act(s, "silu", nullptr, err));
      ML_TRY(get_u32(s, "sliding_window", false, 0, 0, ML_LIMIT_MAX_SEQ, &h.sliding_window, err));
      h.sliding_pattern = 0;
      break;
    }
    case K_QWEN2:
    case K_QWEN3:
      ML_TRY(check_act(s, "silu", nullptr, err));
      ML_TRY(refuse_true(s, "use_sliding_window", err));
      h.flags |= k == K_QWEN2 ? ML_FLAG_QKV_BIAS : ML_FLAG_QK_NORM;
      break;
    case K_GEMMA3: {
      ML_TRY(check_act(s, "gelu_pytorch_tanh", "gelu_tanh", err));
      if (get(s, "attn_logit_softcapping"))
        return ml_fail(err, ML_E_FORMAT, "%s: %sattn_logit_softcapping is set, which is not supported", what, s.pre);
      h.activation = ML_ACT_GELU_TANH;
      h.embed_scale = (float)std::sqrt((double)h.dim);
      h.flags |= ML_FLAG_POST_NORMS | ML_FLAG_QK_NORM;
      double qpas = 256, cap = 0, local = 1e4;
      ML_TRY(get_num(s, "query_pre_attn_scalar", false, 256, 0.0, 1e12, &qpas, err));
      h.attn_scale = (float)(1.0 / std::sqrt(qpas));
      if (get(s, "final_logit_softcapping"))
        ML_TRY(get_num(s, "final_logit_softcapping", true, 0, 0.0, 1e6, &cap, err));
      h.logit_softcap = (float)cap;
      if (rope_local.obj && get(rope_local, "rope_theta"))
        ML_TRY(get_num(rope_local, "rope_theta", true, 1e4, 0.0, 1e12, &local, err));
      else
        ML_TRY(get_num(s, "rope_local_base_freq", false, 1e4, 0.0, 1e12, &local, err));
      h.rope_local_theta = (float)local;
      ML_TRY(get_u32(s, "sliding_window", false, 4096, 1, ML_LIMIT_MAX_SEQ, &h.sliding_window, err));
      uint32_t period = 0;
      bool listed = false;
      ML_TRY(read_layer_types(s, h.n_layers, "sliding_attention", &period, &listed, err));
      if (!listed) ML_TRY(get_u32(s, "sliding_window_pattern", false, 6, 1, ML_LIMIT_LAYERS, &period, err));
      h.sliding_pattern = period;
      break;
    }
    case K_QWEN35: {
      ML_TRY(check_act(s, "silu", nullptr, err));
      bool gate = true;
      ML_TRY(get_bool(s, "attn_output_gate", true, &gate, err));
      if (!gate)
        return ml_fail(err, ML_E_FORMAT, "%s: %sattn_output_gate is false, which is not supported", what, s.pre);
      h.flags |= ML_FLAG_QK_NORM | ML_FLAG_ATTN_GATE;
      ML_TRY(get_u32(s, "linear_num_key_heads", false, 16, 1, MAX_LINEAR_HEADS, &h.linear_k_heads, err));
      ML_TRY(get_u32(s, "linear_num_value_heads", false, 32, 1, MAX_LINEAR_HEADS, &h.linear_v_heads, err));
      ML_TRY(get_u32(s, "linear_key_head_dim", false, 128, 1, MAX_LINEAR_DIM, &h.linear_k_dim, err));
      ML_TRY(get_u32(s, "linear_value_head_dim", false, 128, 1, MAX_LINEAR_DIM, &h.linear_v_dim, err));
      ML_TRY(get_u32(s, "linear_conv_kernel_dim", false, 4, 1, MAX_LINEAR_CONV, &h.linear_conv, err));
      if (h.linear_v_heads % h.linear_k_heads != 0)
        return ml_fail(err, ML_E_SHAPE, "%s: %slinear_num_value_heads %u is not a multiple of linear_num_key_heads %u",
                       what, s.pre, h.linear_v_heads, h.linear_k_heads);
      if ((h.linear_v_heads * h.linear_v_dim) % 32 != 0)
        return ml_fail(err, ML_E_SHAPE,
                       "%s: %slinear_num_value_heads x linear_value_head_dim = %u is not a multiple of 32", what, s.pre,
                       h.linear_v_heads * h.linear_v_dim);
      uint32_t period = 0;
      bool listed = false;
      if (get(s, "full_attention_interval"))
        ML_TRY(get_u32(s, "full_attention_interval", true, 4, 1, ML_LIMIT_LAYERS, &period, err));
      ML_TRY(read_layer_types(s, h.n_layers, "linear_attention", &period, &listed, err));
      if (period == 0 && !listed) period = 4;
      if (period == 0) return ml_fail(err, ML_E_FORMAT, "%s: %slayer_types has no full_attention layer", what, s.pre);
      h.linear_period = period;
      double prf = 0.25;
      if (rp && get(src{what, rp, "rope_parameters."}, "partial_rotary_factor"))
        ML_TRY(get_num(src{what, rp, "rope_parameters."}, "partial_rotary_factor", true, 0.25, 0.0, 1.0 + 1e-9, &prf,
                       err));
      else
        ML_TRY(get_num(s, "partial_rotary_factor", false, 0.25, 0.0, 1.0 + 1e-9, &prf, err));
      const double rot = h.head_dim * prf;
      if (rot != std::floor(rot) || (uint32_t)rot % 2 != 0 || rot < 2)
        return ml_fail(err, ML_E_SHAPE,
                       "%s: %shead_dim %u x partial_rotary_factor %g = %g rotated dimensions is not even", what, s.pre,
                       h.head_dim, prf, rot);
      h.n_rot = (uint32_t)rot;
      break;
    }
  }
  const ml_status hs = ml_mlb_check_header(&h, err);
  if (hs != ML_OK) return ml_fail(err, hs, "%s: %s", what, err ? err->msg : "");
  *out = h;
  return ML_OK;
}

struct file_guard {
  ml_file* f;
  ~file_guard() { ml_file_close(f); }
};

}  // namespace

ml_status cv_hf_config_parse(const char* json, size_t len, const char* gen, size_t gen_len, const char* what,
                             ml_mlb_header* out, ml_error* err) {
  ml_bump b;
  ml_json* root = nullptr;
  ml_json* g = nullptr;
  ml_status s = ml_json_parse(json, len, &b, &root, err);
  if (s != ML_OK) return ml_fail(err, s, "%s: %s", what, err ? err->msg : "");
  if (gen) {
    s = ml_json_parse(gen, gen_len, &b, &g, err);
    if (s != ML_OK) return ml_fail(err, s, "generation_config.json: %s", err ? err->msg : "");
    if (!ml_json_is(g, ML_JSON_OBJECT))
      return ml_fail(err, ML_E_FORMAT, "generation_config.json: the root is not an object");
  }
  return parse(root, g, what, out, err);
}

ml_status cv_hf_config_read(const char* config_path, const char* generation_path_or_null, ml_mlb_header* out,
                            ml_error* err) {
  ml_file c, g;
  file_guard gc{&c}, gg{&g};
  ML_TRY(ml_file_open(&c, config_path, err));
  if (generation_path_or_null) ML_TRY(ml_file_open(&g, generation_path_or_null, err));
  const char* gen = nullptr;
  if (generation_path_or_null) gen = g.data ? reinterpret_cast<const char*>(g.data) : "";
  return cv_hf_config_parse(c.data ? reinterpret_cast<const char*>(c.data) : "", c.size, gen, g.size, config_path, out,
                            err);
}
