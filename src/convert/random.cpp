// cv_random (`ml_convert random`): a random Llama model of any shape, for tests and benchmarks.
// Generator: xoshiro256** seeded through splitmix64 from --seed (the four state words are four
// successive splitmix64 outputs). Each uniform value in [-1, 1) is (next() >> 40) * 2^-23 - 1,
// exact in float32, so the same seed and shape give a byte-identical file on every machine.
// Values are drawn in file order, tensor by tensor, row-major, and do not depend on --wtype or
// --scales, so the Q8 and Q4 files of one seed hold the same model.
// Scales keep activations O(1) through any depth: matrices are U(-1,1)/sqrt(cols) (each output
// has the variance of one input element / 3), norm weights are 1 + 0.2*U(-1,1), the embedding is
// U(-1,1) (times 2/sqrt(dim), capped at 1, when tied, so tied logits stay O(1) too).
#include <cmath>
#include <cstdio>
#include <cstring>

#include "convert/convert.h"
#include "convert/gguf_write.h"
#include "core/checked.h"
#include "model/limits.h"

namespace {

struct rng {
  uint64_t s[4];
};

uint64_t splitmix64(uint64_t* x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t next(rng* r) {
  uint64_t* s = r->s;
  const uint64_t result = rotl(s[1] * 5, 7) * 9;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

// Uniform in [-1, 1), a multiple of 2^-23.
float uniform(rng* r) { return (float)(next(r) >> 40) * (1.0f / 8388608.0f) - 1.0f; }

// n values scale * U(-1,1) + offset into out (allocated here; what names them on failure).
ml_status draw(rng* r, size_t n, float scale, float offset, cv_buf* out, const char* what, ml_error* err) {
  ML_TRY(cv_alloc(out, n, sizeof(float), err, "tensor %s", what));
  float* v = out->as<float>();
  for (size_t i = 0; i < n; ++i) v[i] = uniform(r) * scale + offset;
  return ML_OK;
}

// Option checks; every message names the option.
ml_status check_opts(const cv_random_opts* o, uint32_t* head_dim, ml_error* err) {
  struct opt {
    const char* name;
    int64_t v;
    int64_t min, max;  // max: the engine's limit (model/limits.h)
  };
  const opt opts[] = {{"--dim", o->dim, 1, ML_LIMIT_DIM},          {"--hidden", o->hidden, 1, ML_LIMIT_HIDDEN},
                      {"--layers", o->layers, 1, ML_LIMIT_LAYERS},  {"--heads", o->heads, 1, ML_LIMIT_HEADS},
                      {"--kv-heads", o->kv_heads, 1, ML_LIMIT_HEADS}, {"--vocab", o->vocab, 3, ML_LIMIT_VOCAB},
                      {"--max-seq", o->max_seq, 1, ML_LIMIT_MAX_SEQ}};
  for (const opt& p : opts) {
    if (p.v < p.min || p.v > p.max)
      return ml_fail(err, ML_E_ARG, "%s %lld is out of range (%lld..%lld)", p.name, (long long)p.v, (long long)p.min,
                     (long long)p.max);
  }
  if (o->dim % 32 != 0) return ml_fail(err, ML_E_ARG, "--dim %lld is not a multiple of 32", (long long)o->dim);
  if (o->hidden % 32 != 0) return ml_fail(err, ML_E_ARG, "--hidden %lld is not a multiple of 32", (long long)o->hidden);
  if (o->heads % o->kv_heads != 0)
    return ml_fail(err, ML_E_ARG, "--heads %lld is not a multiple of --kv-heads %lld", (long long)o->heads,
                   (long long)o->kv_heads);
  int64_t hd = o->head_dim;
  if (hd == 0) {
    if (o->dim % o->heads != 0)
      return ml_fail(err, ML_E_ARG, "--dim %lld is not a multiple of --heads %lld; give --head-dim", (long long)o->dim,
                     (long long)o->heads);
    hd = o->dim / o->heads;
  }
  if (hd < 2 || hd > ML_LIMIT_HEAD_DIM || hd % 2 != 0)
    return ml_fail(err, ML_E_ARG, "--head-dim %lld must be even and in 2..%u", (long long)hd, ML_LIMIT_HEAD_DIM);
  if ((o->heads * hd) % 32 != 0 || o->heads * hd > (int64_t)UINT32_MAX)
    return ml_fail(err, ML_E_ARG, "--heads %lld x --head-dim %lld = %lld is not a multiple of 32", (long long)o->heads,
                   (long long)hd, (long long)(o->heads * hd));
  if (!(o->rope_theta > 0.0f) || !std::isfinite(o->rope_theta))
    return ml_fail(err, ML_E_ARG, "--rope-theta %g must be positive", (double)o->rope_theta);
  *head_dim = (uint32_t)hd;
  return ML_OK;
}

}  // namespace

cv_random_opts cv_random_defaults() { return cv_random_opts{}; }

namespace {

// The options with the shape of o->config filled in where the options leave it at 0.
cv_random_opts merged_opts(const cv_random_opts* o) {
  cv_random_opts r = *o;
  const ml_mlb_header* c = o->config;
  if (!c) return r;
  auto fill = [](int64_t* v, uint32_t from) {
    if (*v == 0) *v = from;
  };
  fill(&r.dim, c->dim);
  fill(&r.hidden, c->hidden_dim);
  fill(&r.layers, c->n_layers);
  fill(&r.heads, c->n_heads);
  fill(&r.kv_heads, c->n_kv_heads);
  fill(&r.vocab, c->vocab_size);
  fill(&r.max_seq, c->max_seq);
  fill(&r.head_dim, c->head_dim);
  r.tied = (c->flags & ML_FLAG_TIED_CLASSIFIER) != 0;
  r.rope_type = c->rope_type;
  r.rope_theta = c->rope_theta;
  return r;
}

}  // namespace

ml_status cv_random(const cv_random_opts* opts, ml_error* err) {
  if (!opts->out) return ml_fail(err, ML_E_ARG, "random: no --output path given");
  const cv_random_opts merged = merged_opts(opts);
  const cv_random_opts* o = &merged;
  const bool gguf = o->gguf && *o->gguf;
  if (gguf && std::strcmp(o->gguf, o->out) == 0)
    return ml_fail(err, ML_E_ARG, "random: --gguf and --output name the same file %s", o->out);
  uint32_t head_dim = 0;
  ML_TRY(check_opts(o, &head_dim, err));
  cv_model m;
  ml_mlb_header& h = m.h;
  if (o->config) {  // the architecture's fields; the shape is set below
    h = *o->config;
    h.version = ML_MLB_VERSION;
    h.n_tensors = 0;
    h.dir_offset = h.tokenizer_offset = h.tokenizer_size = h.file_size = 0;
  } else {
    h.arch = ML_ARCH_LLAMA;
    h.norm_eps = 1e-5f;
    h.bos_id = 1;
    h.eos_id = 2;
  }
  h.dim = (uint32_t)o->dim;
  h.hidden_dim = h.hidden_dim_orig = (uint32_t)o->hidden;
  h.n_layers = (uint32_t)o->layers;
  h.n_heads = (uint32_t)o->heads;
  h.n_kv_heads = (uint32_t)o->kv_heads;
  h.head_dim = head_dim;
  h.vocab_size = (uint32_t)o->vocab;
  h.max_seq = (uint32_t)o->max_seq;
  h.wtype = o->wtype;
  h.scale_type = o->scale_type;
  h.rope_theta = o->rope_theta;
  h.rope_type = o->rope_type;
  h.flags = (h.flags & ~(uint32_t)ML_FLAG_TIED_CLASSIFIER) | (o->tied ? (uint32_t)ML_FLAG_TIED_CLASSIFIER : 0u);
  // Gemma's √dim embedding scale follows a --dim override of the config's width.
  if (o->config && h.dim != o->config->dim && o->config->embed_scale == std::sqrt((float)o->config->dim))
    h.embed_scale = std::sqrt((float)h.dim);
  if (h.n_rot > head_dim) h.n_rot = head_dim;  // a --head-dim override narrower than the config's rotation
  if (h.bos_id >= h.vocab_size || h.eos_id >= h.vocab_size) h.bos_id = 1, h.eos_id = 2;  // a --vocab override
  ML_TRY(ml_mlb_check_header(&h, err));
  if (o->tokenizer && *o->tokenizer) ML_TRY(cv_attach_tokenizer(&m, o->tokenizer, o->chat_template, err));

  rng r;
  uint64_t seed = o->seed;
  for (uint64_t& w : r.s) w = splitmix64(&seed);

  const uint32_t dim = h.dim, hid = h.hidden_dim, q_dim = h.n_heads * head_dim, kv_dim = h.n_kv_heads * head_dim;
  char name[ML_MLB_NAME_MAX];
  cv_buf v;  // the float values of the tensor being added
  auto mat = [&](const char* nm, uint32_t rows, uint32_t cols, float scale) {
    size_t n;
    if (!ml_mul(rows, cols, &n)) return ml_fail(err, ML_E_NOMEM, "tensor %s: %ux%u overflows", nm, rows, cols);
    ML_TRY(draw(&r, n, scale, 0.0f, &v, nm, err));
    return cv_add_matrix(&m, nm, rows, cols, v.as<float>(), rows, cols, err);
  };
  auto vec = [&](const char* nm, uint32_t n, float scale, float offset) {
    ML_TRY(draw(&r, n, scale, offset, &v, nm, err));
    return cv_add_f32(&m, nm, v.as<float>(), n, err);
  };
  auto norm = [&](const char* nm, uint32_t n) { return vec(nm, n, 0.2f, 1.0f); };
  // Values are drawn tensor by tensor in file order; a Llama's tensors come in the order they
  // always had, so its files stay byte-identical, and each feature's tensors sit where its flag says.
  const float emb_scale = o->tied ? std::fmin(1.0f, 2.0f / std::sqrt((float)dim)) : 1.0f;
  const float in_scale = 1.0f / std::sqrt((float)dim);
  ML_TRY(mat("tok_embd", h.vocab_size, dim, emb_scale));
  for (uint32_t l = 0; l < h.n_layers; ++l) {
    auto nm = [&](const char* suffix) {
      std::snprintf(name, sizeof name, "blk.%u.%s", l, suffix);
      return name;
    };
    ML_TRY(norm(nm("attn_norm"), dim));
    if (h.linear_period > 0 && l % h.linear_period != h.linear_period - 1) {  // gated delta rule
      const uint32_t nv = h.linear_v_heads, lin_v = nv * h.linear_v_dim;
      const uint32_t ch = 2 * h.linear_k_heads * h.linear_k_dim + lin_v;
      ML_TRY(mat(nm("attn_qkv"), ch, dim, in_scale));
      ML_TRY(mat(nm("attn_gate"), lin_v, dim, in_scale));
      ML_TRY(mat(nm("ssm_beta"), nv, dim, in_scale));
      ML_TRY(mat(nm("ssm_alpha"), nv, dim, in_scale));
      size_t conv_n;
      if (!ml_mul(ch, h.linear_conv, &conv_n)) return ml_fail(err, ML_E_NOMEM, "ssm_conv1d overflows");
      ML_TRY(draw(&r, conv_n, 0.5f, 0.0f, &v, nm("ssm_conv1d"), err));
      ML_TRY(cv_add_f32_rows(&m, name, ch, h.linear_conv, v.as<float>(), err));
      ML_TRY(vec(nm("ssm_a"), nv, 0.5f, -1.5f));  // A = -exp(A_log) in [-2, -1)
      ML_TRY(vec(nm("ssm_dt"), nv, 0.5f, 0.0f));
      ML_TRY(norm(nm("ssm_norm"), h.linear_v_dim));
      ML_TRY(mat(nm("ssm_out"), dim, lin_v, 1.0f / std::sqrt((float)lin_v)));
    } else {
    ML_TRY(mat(nm("attn_q"), q_dim, dim, in_scale));
    ML_TRY(mat(nm("attn_k"), kv_dim, dim, in_scale));
    ML_TRY(mat(nm("attn_v"), kv_dim, dim, in_scale));
    if (h.flags & ML_FLAG_ATTN_GATE) ML_TRY(mat(nm("attn_gate"), q_dim, dim, in_scale));
    if (h.flags & ML_FLAG_QKV_BIAS) {
      ML_TRY(vec(nm("attn_q.bias"), q_dim, 0.5f, 0.0f));
      ML_TRY(vec(nm("attn_k.bias"), kv_dim, 0.5f, 0.0f));
      ML_TRY(vec(nm("attn_v.bias"), kv_dim, 0.5f, 0.0f));
    }
    if (h.flags & ML_FLAG_QK_NORM) {
      ML_TRY(norm(nm("attn_q_norm"), head_dim));
      ML_TRY(norm(nm("attn_k_norm"), head_dim));
    }
    ML_TRY(mat(nm("attn_output"), dim, q_dim, 1.0f / std::sqrt((float)q_dim)));
    }
    if (h.flags & ML_FLAG_POST_NORMS) ML_TRY(norm(nm("post_attention_norm"), dim));
    ML_TRY(norm(nm("ffn_norm"), dim));
    ML_TRY(mat(nm("ffn_gate"), hid, dim, in_scale));
    ML_TRY(mat(nm("ffn_up"), hid, dim, in_scale));
    ML_TRY(mat(nm("ffn_down"), dim, hid, 1.0f / std::sqrt((float)hid)));
    if (h.flags & ML_FLAG_POST_NORMS) ML_TRY(norm(nm("post_ffw_norm"), dim));
  }
  ML_TRY(norm("output_norm", dim));
  if (!o->tied) ML_TRY(mat("output", h.vocab_size, dim, in_scale));
  v = cv_buf{};
  // The GGUF first: the writer refuses a model llama.cpp would run differently before writing anything.
  if (gguf) ML_TRY(cv_write_gguf(&m, o->gguf, err));
  return cv_write(&m, o->out, err);
}
