// cv_hf (`ml_convert hf DIR`): a Hugging Face model folder to .mlb.
// Reads DIR/config.json (+ generation_config.json) through hf_config.h, the weights from
// DIR/model.safetensors or DIR/model.safetensors.index.json and the shards its weight_map names
// (plain file names inside DIR), and the tokenizer files through cv_attach_tokenizer(DIR).
// Tensor names (transformers'; the prefix "model." or, in Qwen3.5's multimodal checkpoint,
// "model.language_model."):
//   embed_tokens -> tok_embd, lm_head (top level) -> output, norm -> output_norm,
//   layers.N.input_layernorm -> blk.N.attn_norm,
//   self_attn.{q,k,v,o}_proj -> attn_q/attn_k/attn_v/attn_output (+ q/k/v .bias for Qwen2),
//   self_attn.{q,k}_norm -> attn_q_norm/attn_k_norm,
//   post_attention_layernorm -> ffn_norm (Gemma 3: post_attention_norm, with
//   pre_feedforward_layernorm -> ffn_norm and post_feedforward_layernorm -> post_ffw_norm),
//   mlp.{gate,up,down}_proj -> ffn_gate/ffn_up/ffn_down (zero-padded to hidden_dim),
//   Qwen3.5's full-attention q_proj (per head: head_dim query rows, then head_dim gate rows) ->
//   attn_q + attn_gate; its linear layers' linear_attn.{in_proj_qkv, in_proj_z, in_proj_b,
//   in_proj_a, conv1d (ch x 1 x K), A_log, dt_bias, norm, out_proj} -> attn_qkv, attn_gate,
//   ssm_beta, ssm_alpha, ssm_conv1d (ch x K), ssm_a = -exp(A_log), ssm_dt, ssm_norm, ssm_out.
// Gemma 3's and Qwen3.5's RMSNorm weights w are stored as 1 + w (computed in float32, as
// transformers does), except Qwen3.5's gated norm (linear_attn.norm), which multiplies by w.
// A tied model may store its one matrix as embed_tokens or as lm_head (tinystories-656k-hf); when
// it stores both they must be equal. The checks come first, in a dry pass over the same mapping:
// every tensor the model needs exists with the shape config.json implies (else ML_E_FORMAT /
// ML_E_SHAPE naming it), and every tensor in the files is used, except rotary inv_freq buffers and
// Qwen3.5's vision tower (model.visual.*) and multi-token-prediction head (mtp.*), which are
// skipped with a note. Then each tensor is widened to float, quantized and freed in turn, so the
// memory in use is about the output model plus one float tensor.
#include <sys/stat.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "convert/convert.h"
#include "convert/hf_config.h"
#include "convert/safetensors.h"
#include "core/bump.h"
#include "core/posix_compat.h"
#include "core/file.h"
#include "core/json.h"

namespace {

constexpr size_t MAX_SHARDS = 4096;
constexpr size_t PATH_MAX_LEN = 4096;

bool exists(const char* path) {
  struct stat st;
  return stat(path, &st) == 0;
}

ml_status join(char* out, const char* dir, const char* name, ml_error* err) {
  if (std::snprintf(out, PATH_MAX_LEN, "%s/%s", dir, name) >= (int)PATH_MAX_LEN)
    return ml_fail(err, ML_E_ARG, "%s: the path is too long", dir);
  return ML_OK;
}

// The weights: one file or the shards of an index, each parsed and validated.
struct shard_set {
  cv_buf mem;  // cv_st_file[n], constructed in place
  size_t n = 0;
  shard_set() = default;
  shard_set(const shard_set&) = delete;
  shard_set& operator=(const shard_set&) = delete;
  ~shard_set() { close(); }
  void close() {  // unmaps the files (the converted model no longer needs them)
    for (size_t i = 0; i < n; ++i) at(i)->~cv_st_file();
    n = 0;
    mem = cv_buf{};
  }
  cv_st_file* at(size_t i) const { return mem.as<cv_st_file>() + i; }
  cv_st_tensor* find(const char* name) const {
    for (size_t i = 0; i < n; ++i)
      if (cv_st_tensor* t = cv_st_find(at(i), name)) return t;
    return nullptr;
  }
  ml_status make(size_t count, ml_error* err) {
    ML_TRY(cv_alloc(&mem, count, sizeof(cv_st_file), err, "the list of %zu safetensors files", count));
    for (; n < count; ++n) new (at(n)) cv_st_file();
    return ML_OK;
  }
};

int cmp_str(const void* a, const void* b) {
  return std::strcmp(*static_cast<const char* const*>(a), *static_cast<const char* const*>(b));
}

// A shard's name from weight_map: a plain file name inside the folder.
bool plain_name(const char* s, size_t len) {
  if (len == 0 || len > 255 || std::strlen(s) != len) return false;
  if (std::strcmp(s, ".") == 0 || std::strcmp(s, "..") == 0) return false;
  return !std::strchr(s, '/') && !std::strchr(s, '\\');
}

ml_status open_index(shard_set* ss, const char* dir, const char* index_path, ml_error* err) {
  ml_file f;
  struct guard {
    ml_file* f;
    ~guard() { ml_file_close(f); }
  } g{&f};
  ML_TRY(ml_file_open(&f, index_path, err));
  ml_bump b;
  ml_json* root = nullptr;
  ml_status s = ml_json_parse(f.data ? reinterpret_cast<const char*>(f.data) : "", f.size, &b, &root, err);
  if (s != ML_OK) return ml_fail(err, s, "%s: %s", index_path, err ? err->msg : "");
  const ml_json* wm = ml_json_get(root, "weight_map");
  if (!ml_json_is(wm, ML_JSON_OBJECT))
    return ml_fail(err, ML_E_FORMAT, "%s: weight_map is missing or not an object", index_path);
  if (wm->n == 0) return ml_fail(err, ML_E_FORMAT, "%s: weight_map is empty", index_path);
  // The distinct shard names, sorted.
  cv_buf names_buf;
  ML_TRY(cv_alloc(&names_buf, wm->n, sizeof(const char*), err, "%s: the list of %zu entries", index_path, wm->n));
  const char** names = names_buf.as<const char*>();
  for (size_t i = 0; i < wm->n; ++i) {
    const ml_json* v = wm->members[i].value;
    if (!ml_json_is(v, ML_JSON_STRING) || !plain_name(v->str, v->len))
      return ml_fail(err, ML_E_FORMAT, "%s: weight_map.%.200s is not the name of a file in the folder", index_path,
                     wm->members[i].key);
    names[i] = v->str;
  }
  std::qsort(names, wm->n, sizeof *names, cmp_str);
  size_t u = 0;
  for (size_t i = 0; i < wm->n; ++i)
    if (u == 0 || std::strcmp(names[u - 1], names[i]) != 0) names[u++] = names[i];
  if (u > MAX_SHARDS) return ml_fail(err, ML_E_FORMAT, "%s: %zu shards, more than %zu", index_path, u, MAX_SHARDS);
  ML_TRY(ss->make(u, err));
  char path[PATH_MAX_LEN];
  for (size_t i = 0; i < u; ++i) {
    ML_TRY(join(path, dir, names[i], err));
    ML_TRY(cv_st_open(ss->at(i), path, err));
  }
  // weight_map and the shards must agree one to one (`used` marks a mapped tensor here).
  for (size_t i = 0; i < wm->n; ++i) {
    const ml_json_member& mb = wm->members[i];
    const char* key = mb.value->str;
    const char** hit = static_cast<const char**>(std::bsearch(&key, names, u, sizeof *names, cmp_str));
    cv_st_tensor* t = cv_st_find(ss->at((size_t)(hit - names)), mb.key);
    if (!t || std::strlen(mb.key) != mb.key_len)
      return ml_fail(err, ML_E_FORMAT, "%s: weight_map puts tensor %.200s in %s, which does not hold it", index_path,
                     mb.key, key);
    if (t->used) return ml_fail(err, ML_E_FORMAT, "%s: weight_map names tensor %.200s twice", index_path, mb.key);
    t->used = true;
  }
  for (size_t i = 0; i < u; ++i) {
    for (size_t k = 0; k < ss->at(i)->n; ++k) {
      cv_st_tensor* t = ss->at(i)->at(k);
      if (!t->used)
        return ml_fail(err, ML_E_FORMAT, "%s: tensor %s is not in %s's weight_map", ss->at(i)->path, t->name,
                       index_path);
      t->used = false;
    }
  }
  return ML_OK;
}

ml_status open_weights(shard_set* ss, const char* dir, ml_error* err) {
  char single[PATH_MAX_LEN], index[PATH_MAX_LEN];
  ML_TRY(join(single, dir, "model.safetensors", err));
  ML_TRY(join(index, dir, "model.safetensors.index.json", err));
  if (exists(single)) {
    ML_TRY(ss->make(1, err));
    return cv_st_open(ss->at(0), single, err);
  }
  if (exists(index)) return open_index(ss, dir, index, err);
  return ml_fail(err, ML_E_ARG, "%s: the folder has no model.safetensors or model.safetensors.index.json", dir);
}

const char* arch_name(uint32_t arch) {
  static const char* const names[] = {"Llama", "Qwen2", "Qwen3", "Gemma 3", "Qwen3.5"};
  return arch < 5 ? names[arch] : "?";
}

bool ends_with(const char* s, const char* suffix) {
  const size_t n = std::strlen(s), k = std::strlen(suffix);
  return n >= k && std::memcmp(s + n - k, suffix, k) == 0;
}

bool starts_with(const char* s, const char* prefix) { return std::strncmp(s, prefix, std::strlen(prefix)) == 0; }

// The mapping, run twice: dry (find, check shapes, mark used) and then for real (convert).
struct importer {
  const cv_hf_opts* o;
  ml_error* err;
  shard_set st;
  cv_model m;
  bool dry = true;
  const char* prefix = "model.";
  cv_st_tensor* embd = nullptr;  // the tensor tok_embd comes from
  cv_st_tensor* head = nullptr;  // output's, or null (tied)
  cv_buf x, y, z;                // float values being converted
  char src[PATH_MAX_LEN];
  char dst[ML_MLB_NAME_MAX];

  const char* dir() const { return o->dir; }

  // "<prefix><fmt...>" into src.
  cv_st_tensor* find_rel(const char* fmt, ...) ML_PRINTF(2, 3) {
    const int p = std::snprintf(src, sizeof src, "%s", prefix);
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(src + p, sizeof src - (size_t)p, fmt, ap);
    va_end(ap);
    return st.find(src);
  }

  // Checks t (named src, null when missing) against the expected shape and marks it used.
  ml_status check(cv_st_tensor* t, uint32_t rank, const uint64_t* want) {
    if (!t) return ml_fail(err, ML_E_FORMAT, "%s: tensor %s is missing (%s model)", dir(), src, arch_name(m.h.arch));
    bool ok = t->rank == rank;
    for (uint32_t i = 0; ok && i < rank; ++i) ok = t->shape[i] == want[i];
    if (!ok) {
      char got[160], exp[160];
      int a = 0, b = 0;
      for (uint32_t i = 0; i < t->rank && a < 120; ++i)
        a += std::snprintf(got + a, sizeof got - (size_t)a, "%s%llu", i ? ", " : "", (unsigned long long)t->shape[i]);
      for (uint32_t i = 0; i < rank; ++i)
        b += std::snprintf(exp + b, sizeof exp - (size_t)b, "%s%llu", i ? ", " : "", (unsigned long long)want[i]);
      got[a] = exp[b] = 0;
      return ml_fail(err, ML_E_SHAPE, "%s: tensor %s has shape [%s], but config.json implies [%s]", dir(), t->name, got,
                     exp);
    }
    t->used = true;
    return ML_OK;
  }

  ml_status get(cv_st_tensor* t, uint32_t rank, uint64_t d0, uint64_t d1, uint64_t d2, cv_buf* out) {
    const uint64_t want[3] = {d0, d1, d2};
    ML_TRY(check(t, rank, want));
    return dry ? ML_OK : cv_st_to_f32(t, out, err);
  }

  const char* blk(uint32_t l, const char* suffix) {
    std::snprintf(dst, sizeof dst, "blk.%u.%s", l, suffix);
    return dst;
  }

  // A matrix rows x cols stored as pad_rows x pad_cols (the FFN padding).
  ml_status mat(cv_st_tensor* t, const char* name, uint32_t rows, uint32_t cols, uint32_t pad_rows, uint32_t pad_cols) {
    ML_TRY(get(t, 2, rows, cols, 0, &x));
    if (dry) return ML_OK;
    return cv_add_matrix(&m, name, pad_rows, pad_cols, x.as<float>(), rows, cols, err);
  }

  // A vector of n; plus_one: (1 + w) RMSNorm folded.
  ml_status vec(cv_st_tensor* t, const char* name, uint32_t n, bool plus_one) {
    ML_TRY(get(t, 1, n, 0, 0, &x));
    if (dry) return ML_OK;
    float* v = x.as<float>();
    if (plus_one)
      for (uint32_t i = 0; i < n; ++i) v[i] = 1.0f + v[i];
    return cv_add_f32(&m, name, v, n, err);
  }

  ml_status layer(uint32_t l) {
    const ml_mlb_header& h = m.h;
    const bool shift = h.arch == ML_ARCH_GEMMA3 || h.arch == ML_ARCH_QWEN35;  // (1 + w) norms
    const uint32_t dim = h.dim, hd = h.head_dim, q_dim = h.n_heads * hd, kv_dim = h.n_kv_heads * hd;
    const bool linear = h.linear_period && l % h.linear_period != h.linear_period - 1;
    ML_TRY(vec(find_rel("layers.%u.input_layernorm.weight", l), blk(l, "attn_norm"), dim, shift));
    if (linear) {
      const uint32_t nk = h.linear_k_heads, nv = h.linear_v_heads, dk = h.linear_k_dim, dv = h.linear_v_dim;
      const uint32_t ch = 2 * nk * dk + nv * dv, K = h.linear_conv;
      ML_TRY(mat(find_rel("layers.%u.linear_attn.in_proj_qkv.weight", l), blk(l, "attn_qkv"), ch, dim, ch, dim));
      ML_TRY(
          mat(find_rel("layers.%u.linear_attn.in_proj_z.weight", l), blk(l, "attn_gate"), nv * dv, dim, nv * dv, dim));
      ML_TRY(mat(find_rel("layers.%u.linear_attn.in_proj_b.weight", l), blk(l, "ssm_beta"), nv, dim, nv, dim));
      ML_TRY(mat(find_rel("layers.%u.linear_attn.in_proj_a.weight", l), blk(l, "ssm_alpha"), nv, dim, nv, dim));
      ML_TRY(get(find_rel("layers.%u.linear_attn.conv1d.weight", l), 3, ch, 1, K, &x));
      if (!dry) ML_TRY(cv_add_f32_rows(&m, blk(l, "ssm_conv1d"), ch, K, x.as<float>(), err));
      ML_TRY(get(find_rel("layers.%u.linear_attn.A_log", l), 1, nv, 0, 0, &x));
      if (!dry) {
        float* a = x.as<float>();
        for (uint32_t i = 0; i < nv; ++i) a[i] = (float)-std::exp((double)a[i]);
        ML_TRY(cv_add_f32(&m, blk(l, "ssm_a"), a, nv, err));
      }
      ML_TRY(vec(find_rel("layers.%u.linear_attn.dt_bias", l), blk(l, "ssm_dt"), nv, false));
      ML_TRY(vec(find_rel("layers.%u.linear_attn.norm.weight", l), blk(l, "ssm_norm"), dv, false));
      ML_TRY(mat(find_rel("layers.%u.linear_attn.out_proj.weight", l), blk(l, "ssm_out"), dim, nv * dv, dim, nv * dv));
    } else if (h.flags & ML_FLAG_ATTN_GATE) {
      // q_proj rows per head: head_dim query rows, then head_dim gate rows.
      ML_TRY(get(find_rel("layers.%u.self_attn.q_proj.weight", l), 2, 2 * (uint64_t)q_dim, dim, 0, &x));
      if (!dry) {
        ML_TRY(cv_alloc(&y, (size_t)q_dim * dim, sizeof(float), err, "tensor %s", blk(l, "attn_q")));
        ML_TRY(cv_alloc(&z, (size_t)q_dim * dim, sizeof(float), err, "tensor %s", blk(l, "attn_gate")));
        const size_t block = (size_t)hd * dim;
        for (uint32_t j = 0; j < h.n_heads; ++j) {
          std::memcpy(y.as<float>() + j * block, x.as<float>() + 2 * j * block, block * sizeof(float));
          std::memcpy(z.as<float>() + j * block, x.as<float>() + (2 * j + 1) * block, block * sizeof(float));
        }
        x = cv_buf{};
        ML_TRY(cv_add_matrix(&m, blk(l, "attn_q"), q_dim, dim, y.as<float>(), q_dim, dim, err));
        ML_TRY(cv_add_matrix(&m, blk(l, "attn_gate"), q_dim, dim, z.as<float>(), q_dim, dim, err));
        y = cv_buf{};
        z = cv_buf{};
      }
    } else {
      ML_TRY(mat(find_rel("layers.%u.self_attn.q_proj.weight", l), blk(l, "attn_q"), q_dim, dim, q_dim, dim));
    }
    if (!linear) {
      ML_TRY(mat(find_rel("layers.%u.self_attn.k_proj.weight", l), blk(l, "attn_k"), kv_dim, dim, kv_dim, dim));
      ML_TRY(mat(find_rel("layers.%u.self_attn.v_proj.weight", l), blk(l, "attn_v"), kv_dim, dim, kv_dim, dim));
      if (h.flags & ML_FLAG_QKV_BIAS) {
        ML_TRY(vec(find_rel("layers.%u.self_attn.q_proj.bias", l), blk(l, "attn_q.bias"), q_dim, false));
        ML_TRY(vec(find_rel("layers.%u.self_attn.k_proj.bias", l), blk(l, "attn_k.bias"), kv_dim, false));
        ML_TRY(vec(find_rel("layers.%u.self_attn.v_proj.bias", l), blk(l, "attn_v.bias"), kv_dim, false));
      }
      if (h.flags & ML_FLAG_QK_NORM) {
        ML_TRY(vec(find_rel("layers.%u.self_attn.q_norm.weight", l), blk(l, "attn_q_norm"), hd, shift));
        ML_TRY(vec(find_rel("layers.%u.self_attn.k_norm.weight", l), blk(l, "attn_k_norm"), hd, shift));
      }
      ML_TRY(mat(find_rel("layers.%u.self_attn.o_proj.weight", l), blk(l, "attn_output"), dim, q_dim, dim, q_dim));
    }
    if (h.flags & ML_FLAG_POST_NORMS) {
      ML_TRY(vec(find_rel("layers.%u.post_attention_layernorm.weight", l), blk(l, "post_attention_norm"), dim, shift));
      ML_TRY(vec(find_rel("layers.%u.pre_feedforward_layernorm.weight", l), blk(l, "ffn_norm"), dim, shift));
      ML_TRY(vec(find_rel("layers.%u.post_feedforward_layernorm.weight", l), blk(l, "post_ffw_norm"), dim, shift));
    } else {
      ML_TRY(vec(find_rel("layers.%u.post_attention_layernorm.weight", l), blk(l, "ffn_norm"), dim, shift));
    }
    const uint32_t hid = h.hidden_dim_orig, hp = h.hidden_dim;
    ML_TRY(mat(find_rel("layers.%u.mlp.gate_proj.weight", l), blk(l, "ffn_gate"), hid, dim, hp, dim));
    ML_TRY(mat(find_rel("layers.%u.mlp.up_proj.weight", l), blk(l, "ffn_up"), hid, dim, hp, dim));
    ML_TRY(mat(find_rel("layers.%u.mlp.down_proj.weight", l), blk(l, "ffn_down"), dim, hid, dim, hp));
    return ML_OK;
  }

  // Which stored matrices hold the embedding and the classifier (the dry pass decides).
  ml_status pick_embeddings() {
    const ml_mlb_header& h = m.h;
    const bool tied = h.flags & ML_FLAG_TIED_CLASSIFIER;
    cv_st_tensor* e = find_rel("embed_tokens.weight");
    char emb_name[PATH_MAX_LEN];
    std::snprintf(emb_name, sizeof emb_name, "%s", src);
    cv_st_tensor* lm = st.find("lm_head.weight");
    const uint64_t want[2] = {h.vocab_size, h.dim};
    if (tied && !e && lm) {
      std::snprintf(src, sizeof src, "lm_head.weight");
      ML_TRY(check(lm, 2, want));
      embd = lm;
      head = nullptr;
      return ML_OK;
    }
    ML_TRY(check(e, 2, want));
    embd = e;
    if (tied) {
      if (lm) {
        std::snprintf(src, sizeof src, "lm_head.weight");
        ML_TRY(check(lm, 2, want));
        if (lm->dtype != e->dtype || std::memcmp(lm->data, e->data, (size_t)e->size) != 0)
          return ml_fail(err, ML_E_FORMAT,
                         "%s: tensor lm_head.weight differs from %s, but config.json says tie_word_embeddings", dir(),
                         emb_name);
      }
      head = nullptr;
      return ML_OK;
    }
    std::snprintf(src, sizeof src, "lm_head.weight");
    ML_TRY(check(lm, 2, want));
    head = lm;
    return ML_OK;
  }

  ml_status run() {
    const ml_mlb_header& h = m.h;
    if (!dry) {
      ML_TRY(cv_st_to_f32(embd, &x, err));
      ML_TRY(cv_add_matrix(&m, "tok_embd", h.vocab_size, h.dim, x.as<float>(), h.vocab_size, h.dim, err));
    }
    for (uint32_t l = 0; l < h.n_layers; ++l) ML_TRY(layer(l));
    ML_TRY(vec(find_rel("norm.weight"), "output_norm", h.dim, h.arch == ML_ARCH_GEMMA3 || h.arch == ML_ARCH_QWEN35));
    if (!dry && head) {
      ML_TRY(cv_st_to_f32(head, &x, err));
      ML_TRY(cv_add_matrix(&m, "output", h.vocab_size, h.dim, x.as<float>(), h.vocab_size, h.dim, err));
    }
    x = cv_buf{};
    return ML_OK;
  }

  // After the dry pass: every tensor in the files is used or known to be irrelevant.
  ml_status check_unused() {
    size_t visual = 0, mtp = 0;
    for (size_t i = 0; i < st.n; ++i) {
      for (size_t k = 0; k < st.at(i)->n; ++k) {
        const cv_st_tensor* t = st.at(i)->at(k);
        if (t->used || ends_with(t->name, ".rotary_emb.inv_freq")) continue;
        if (m.h.arch == ML_ARCH_QWEN35 && starts_with(t->name, "model.visual.")) {
          ++visual;
          continue;
        }
        if (m.h.arch == ML_ARCH_QWEN35 && starts_with(t->name, "mtp.")) {
          ++mtp;
          continue;
        }
        return ml_fail(err, ML_E_FORMAT, "%s: tensor %s in %s is not part of the %s model config.json describes", dir(),
                       t->name, st.at(i)->path, arch_name(m.h.arch));
      }
    }
    if (visual)
      cv_notify(o->note, o->note_user,
                "skipped %zu tensors of the vision tower (model.visual.*): the model is converted as text only", visual);
    if (mtp)
      cv_notify(o->note, o->note_user, "skipped %zu tensors of the multi-token prediction head (mtp.*)", mtp);
    return ML_OK;
  }
};

}  // namespace

cv_hf_opts cv_hf_defaults() { return cv_hf_opts{}; }

namespace {

// Everything but the writing: checks, the dry pass, the tokenizer, the conversion. The weight
// files are unmapped at the end.
ml_status build(const cv_hf_opts* o, importer* im, ml_error* err) {
  if (!o->dir) return ml_fail(err, ML_E_ARG, "hf: no model folder given");
  if (o->wtype != ML_DT_Q8 && o->wtype != ML_DT_Q4)
    return ml_fail(err, ML_E_ARG, "hf: wtype %u is not Q8 (2) or Q4 (3)", o->wtype);
  if (o->scale_type > ML_SCALE_F16)
    return ml_fail(err, ML_E_ARG, "hf: scale type %u is not f32 (0) or f16 (1)", o->scale_type);
  struct stat sd;
  if (stat(o->dir, &sd) != 0 || !S_ISDIR(sd.st_mode))
    return ml_fail(err, ML_E_ARG, "%s: not a folder (a Hugging Face model folder is expected)", o->dir);
  im->o = o;
  im->err = err;

  char config[PATH_MAX_LEN], gen[PATH_MAX_LEN];
  ML_TRY(join(config, o->dir, "config.json", err));
  ML_TRY(join(gen, o->dir, "generation_config.json", err));
  ML_TRY(cv_hf_config_read(config, exists(gen) ? gen : nullptr, &im->m.h, err));
  im->m.h.wtype = o->wtype;
  im->m.h.scale_type = o->scale_type;

  ML_TRY(open_weights(&im->st, o->dir, err));
  if (!im->find_rel("embed_tokens.weight") && !im->find_rel("layers.0.input_layernorm.weight")) {
    im->prefix = "model.language_model.";
    if (!im->find_rel("embed_tokens.weight") && !im->find_rel("layers.0.input_layernorm.weight")) im->prefix = "model.";
  }
  ML_TRY(im->pick_embeddings());
  ML_TRY(im->run());
  ML_TRY(im->check_unused());

  ML_TRY(cv_attach_tokenizer(&im->m, o->dir, o->chat_template, err));
  im->dry = false;
  ML_TRY(im->run());
  im->st.close();
  return ML_OK;
}

}  // namespace

ml_status cv_hf(const cv_hf_opts* o, ml_error* err) {
  if (!o->out && !o->mem) return ml_fail(err, ML_E_ARG, "hf: no --output path given");
  importer im;
  ML_TRY(build(o, &im, err));
  if (o->mem) return cv_write_converted(&im.m, o->mem, err);
  return cv_write(&im.m, o->out, err);
}

ml_status cv_hf_memory(const cv_hf_opts* o, uint8_t** out, size_t* size, ml_error* err) {
  importer im;
  ML_TRY(build(o, &im, err));
  return cv_write_memory(&im.m, out, size, err);
}
