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
// qwen35 (Qwen3.5, llama.cpp's LLM_ARCH_QWEN35; the inverse of gguf_write.cpp's qwen35 part):
// .ssm.{conv_kernel, state_size (key head width), group_count (key heads), time_step_rank (value
// heads), inner_size (value heads x width: llama.cpp takes the value heads as wide as the key
// heads)} are required; layer l is an attention layer when l % N == N - 1, N from
// .attention.recurrent_layers (a per-layer array, which must repeat with one period) or
// .full_attention_interval (4 when absent, as llama.cpp). block_count counts the multi-token-
// prediction layers (.nextn_predict_layers) after the main ones: their tensors are skipped with a
// warning. .rope.dimension_sections (interleaved M-RoPE, required as llama.cpp requires it) is,
// for text, NEOX RoPE over .rope.dimension_count dimensions with the token's position, which the
// .mlb computes (n_rot), provided every rotated pair falls in one of the first three sections: a
// pair llama.cpp leaves to the fourth (position 0 for text) is warned about. Tensors: attn_q holds
// per head the head's query rows then its output-gate rows (-> attn_q and attn_gate);
// post_attention_norm is the FFN input norm (-> ffn_norm); the linear layers' attn_qkv,
// attn_gate, ssm_beta, ssm_alpha, ssm_conv1d ([kernel, channels] -> channels x kernel F32),
// ssm_a (-exp(A_log) already), ssm_dt.bias, ssm_norm, ssm_out. When value heads outnumber key
// heads, llama.cpp's converter stores every value-indexed row, column and element in tiled order
// (position g * nk + kh holds value head kh * nv/nk + g); the .mlb holds them grouped by key head
// (docs/format.md), so they are put back: rows and 32-wide column blocks of Q8_0/Q4_0 still move
// bit for bit. Norm weights are taken as stored: llama.cpp's converter stores Qwen3.5's (1 + w)
// norms as 1 + w (computed in float32) and ssm_norm as w, as the .mlb holds them.
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
    {"qwen35", ML_ARCH_QWEN35, ML_ROPE_HALF, ML_FLAG_QK_NORM | ML_FLAG_ATTN_GATE},
};

// Qwen3.5's linear-attention shape (hf_config.cpp's bounds): heads, head width, conv kernel.
constexpr uint32_t kMaxLinearHeads = 4096, kMaxLinearDim = 4096, kMaxLinearConv = 64;
// Entries of .rope.dimension_sections, and the largest accepted section.
constexpr uint64_t kRopeSections = 4;
constexpr int32_t kMaxRopeSection = 1 << 16;

constexpr size_t kWarnNames = 2048;  // bytes of tensor names listed in the requantization warning

struct importer {
  const cv_gguf_opts* o;
  gguf_file g;
  cv_model m;
  const arch_desc* a = nullptr;
  uint32_t dim_src = 0, head_dim_src = 0;  // before padding (equal to the header's when none)
  uint32_t n_blocks = 0;                   // block_count: n_layers plus qwen35's MTP layers
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

ml_status importer::header() {
  gguf_str arch;
  ML_TRY(gguf_get_str(&g, "general.architecture", true, &arch, err));
  for (const arch_desc& d : kArchs)
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

// Qwen3.5's keys (llama.cpp's llama_model_qwen35::load_arch_hparams): the MTP layers counted in
// block_count, the gated-delta shape, which layers are attention layers, the M-RoPE sections.
ml_status importer::qwen35_header() {
  ml_mlb_header& h = m.h;
  uint32_t mtp = 0;
  ML_TRY(u32("nextn_predict_layers", false, &mtp));
  if (mtp >= h.n_layers)
    return ml_fail(err, ML_E_FORMAT, "%s: qwen35.nextn_predict_layers %u leaves none of block_count %u for the model",
                   g.path, mtp, h.n_layers);
  h.n_layers -= mtp;
  h.activation = ML_ACT_SILU;
  uint32_t inner = 0;
  ML_TRY(u32("ssm.conv_kernel", true, &h.linear_conv));
  ML_TRY(u32("ssm.state_size", true, &h.linear_k_dim));
  ML_TRY(u32("ssm.group_count", true, &h.linear_k_heads));
  ML_TRY(u32("ssm.time_step_rank", true, &h.linear_v_heads));
  ML_TRY(u32("ssm.inner_size", true, &inner));
  const uint32_t nk = h.linear_k_heads, nv = h.linear_v_heads, dk = h.linear_k_dim, K = h.linear_conv;
  if (nk == 0 || nv == 0 || dk == 0 || K == 0 || nk > kMaxLinearHeads || nv > kMaxLinearHeads || dk > kMaxLinearDim ||
      K > kMaxLinearConv)
    return ml_fail(err, ML_E_SHAPE,
                   "%s: qwen35.ssm.group_count %u, .ssm.time_step_rank %u, .ssm.state_size %u or .ssm.conv_kernel %u "
                   "is 0 or beyond the limits (%u heads, %u wide, a kernel of %u)",
                   g.path, nk, nv, dk, K, kMaxLinearHeads, kMaxLinearDim, kMaxLinearConv);
  if (nv % nk != 0)
    return ml_fail(err, ML_E_SHAPE,
                   "%s: qwen35.ssm.time_step_rank %u (value heads) is not a multiple of .ssm.group_count %u (key heads)",
                   g.path, nv, nk);
  if (inner != nv * dk)
    return ml_fail(err, ML_E_SHAPE,
                   "%s: qwen35.ssm.inner_size %u is not .ssm.time_step_rank x .ssm.state_size = %u (llama.cpp's qwen35 "
                   "takes the value heads as wide as the key heads)",
                   g.path, inner, nv * dk);
  h.linear_v_dim = dk;
  if ((nv * dk) % 32 != 0)
    return ml_fail(err, ML_E_SHAPE, "%s: qwen35.ssm.inner_size %u is not a multiple of 32", g.path, inner);
  ML_TRY(qwen35_pattern());
  return qwen35_rope_sections();
}

// linear_period from .attention.recurrent_layers (one flag per block, MTP blocks included; they
// are ignored) or .full_attention_interval: llama.cpp's layer i is recurrent when
// (i + 1) % interval != 0, the .mlb's when i % N != N - 1, the same rule.
ml_status importer::qwen35_pattern() {
  ml_mlb_header& h = m.h;
  char k[128];
  const gguf_kv* rl = gguf_find(&g, key(k, sizeof k, "attention.recurrent_layers"));
  if (!rl) {
    uint32_t period = 4;  // llama.cpp's default
    ML_TRY(u32("full_attention_interval", false, &period));
    if (period == 0 || period > ML_LIMIT_LAYERS)
      return ml_fail(err, ML_E_FORMAT, "%s: qwen35.full_attention_interval %u is not in 1..%u", g.path, period,
                     ML_LIMIT_LAYERS);
    h.linear_period = period;
    return ML_OK;
  }
  const uint32_t et = rl->elem_type;
  const size_t es = et == GGUF_V_BOOL || et == GGUF_V_U8 || et == GGUF_V_I8 ? 1 : et == GGUF_V_I32 || et == GGUF_V_U32 ? 4 : 0;
  if (rl->type != GGUF_V_ARRAY || es == 0 || rl->n != n_blocks)
    return ml_fail(err, ML_E_FORMAT, "%s: key %s is not an array of block_count (%u) flags (bool or integer)", g.path, k,
                   n_blocks);
  auto recurrent = [&](uint32_t l) {
    uint32_t v = 0;
    std::memcpy(&v, rl->data + (size_t)l * es, es);  // little-endian: the first byte of a 4-byte value
    return v != 0;
  };
  uint32_t period = 0;
  for (uint32_t l = 0; l < h.n_layers && period == 0; ++l)
    if (!recurrent(l)) period = l + 1;
  if (period == 0)
    return ml_fail(err, ML_E_FORMAT, "%s: key %s marks every layer recurrent: the .mlb needs attention layers", g.path, k);
  for (uint32_t l = 0; l < h.n_layers; ++l)
    if (recurrent(l) != (l % period != period - 1))
      return ml_fail(err, ML_E_FORMAT,
                     "%s: key %s: layer %u is %s, so the layers do not repeat with period %u (the .mlb holds every "
                     "N-th layer as an attention layer)",
                     g.path, k, l, recurrent(l) ? "recurrent" : "attention", period);
  h.linear_period = period;
  return ML_OK;
}

// Interleaved M-RoPE (ggml's rope_multi, GGML_ROPE_TYPE_IMROPE): rotated pair i turns with
// position component c of sector i % (s0 + s1 + s2 + s3) -- t when sector % 3 == 0 and sector
// < 3 s0, h when == 1 and < 3 s1, w when == 2 and < 3 s2, else e -- every component's angle
// computed as NEOX's for pair i. For text llama.cpp sets t = h = w = the position and e = 0, so
// the file is the .mlb's NEOX RoPE over n_rot exactly when no pair reaches e.
ml_status importer::qwen35_rope_sections() {
  const ml_mlb_header& h = m.h;
  char k[128];
  const gguf_kv* kv = nullptr;
  ML_TRY(gguf_get_array(&g, key(k, sizeof k, "rope.dimension_sections"), GGUF_V_I32, true, &kv, err));
  if (kv->n != kRopeSections)
    return ml_fail(err, ML_E_FORMAT, "%s: key %s has %" PRIu64 " entries, not 4", g.path, k, kv->n);
  int32_t sec[kRopeSections];
  int64_t sum = 0;
  for (uint64_t i = 0; i < kRopeSections; ++i) {
    sec[i] = gguf_arr_i32(kv, i);
    if (sec[i] < 0 || sec[i] > kMaxRopeSection)
      return ml_fail(err, ML_E_FORMAT, "%s: key %s: section %" PRIu64 " is %d, not in 0..%d", g.path, k, i, sec[i],
                     kMaxRopeSection);
    sum += sec[i];
  }
  if (sum == 0) return ml_fail(err, ML_E_FORMAT, "%s: key %s: the sections are all 0", g.path, k);
  const uint32_t rot = h.n_rot ? h.n_rot : h.head_dim, pairs = (rot < h.head_dim ? rot : h.head_dim) / 2;
  uint32_t missed = 0, first = 0;
  for (uint32_t i = 0; i < pairs; ++i) {
    const int64_t sector = i % sum;
    const bool ok = (sector % 3 == 0 && sector < 3 * (int64_t)sec[0]) || (sector % 3 == 1 && sector < 3 * (int64_t)sec[1]) ||
                    (sector % 3 == 2 && sector < 3 * (int64_t)sec[2]);
    if (!ok && missed++ == 0) first = i;
  }
  if (missed)
    cv_notify(o->warn, o->warn_user,
              "%s: %s [%d, %d, %d, %d]: for text llama.cpp's interleaved M-RoPE leaves %u of the %u rotated pairs "
              "(the first: pair %u) unrotated (the fourth section's position is 0); the .mlb rotates every pair "
              "with the token's position, so the two differ there",
              g.path, k, sec[0], sec[1], sec[2], sec[3], missed, pairs, first);
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

// elem_of: element i of the result is the tensor's element elem_of[i] (null: i).
ml_status importer::add_vector(const char* name, const char* gname, uint32_t n, uint32_t n_src, bool is_norm,
                               const uint32_t* elem_of) {
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
  for (uint32_t i = 0; i < n_src; ++i)
    padded.as<float>()[i] = f.as<float>()[elem_of ? elem_of[i] : i] * (is_norm ? norm_mul : 1.0f);
  return cv_add_f32(&m, name, padded.as<float>(), n, err);
}

// Q8_0 / Q4_0 blocks into the header's wtype without decoding. Without row_of, rows may exceed the
// tensor's (zero rows); with it, row r is the tensor's row row_of[r]. blk_of: block b of a row is
// the tensor's block blk_of[b] of that row (null: b).
ml_status importer::copy_quant(const char* name, const gguf_tensor* t, uint32_t rows, uint32_t cols,
                               const uint32_t* row_of, const uint32_t* blk_of) {
  const bool to_q8 = m.h.wtype == ML_DT_Q8;
  const size_t nbr = cols / 32, nb = (size_t)rows * nbr, src_rows = row_of ? rows : (size_t)t->ne[1];
  cv_buf q, sc;
  ML_TRY(cv_alloc(&q, nb, to_q8 ? 32 : 16, err, "%s: tensor %s's quants", g.path, t->name));
  ML_TRY(cv_alloc(&sc, nb, 2, err, "%s: tensor %s's scales", g.path, t->name));
  const uint32_t bs = t->type == GGUF_T_Q8_0 ? 34 : 18;
  for (size_t b = 0; b < src_rows * nbr; ++b) {
    const size_t r = b / nbr, c = b % nbr;
    const uint8_t* p = t->data + ((row_of ? row_of[r] : r) * nbr + (blk_of ? blk_of[c] : c)) * bs;
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

// A matrix of a type other than F32/F16/BF16 decoded and requantized: listed in the warning.
void importer::note_requant(const gguf_tensor* t) {
  if (t->type == GGUF_T_F32 || t->type == GGUF_T_F16 || t->type == GGUF_T_BF16) return;
  const size_t len = std::strlen(requant), add = std::strlen(t->name);
  if (n_requant < 8 && len + add + 3 < sizeof requant)
    std::snprintf(requant + len, sizeof requant - len, "%s%s (%s)", len ? ", " : "", t->name,
                  gguf_block_of(t->type)->name);
  ++n_requant;
}

// A rows x cols matrix picked from t (taken and shape-checked by the caller; t->ne[0] == cols): row
// r is t's row row_of[r], column c its column col_of[c] (null: r, c). Q8_0/Q4_0 rows are copied bit
// for bit, and so are columns when col_of moves whole aligned 32-wide blocks.
ml_status importer::add_picked(const char* name, const gguf_tensor* t, uint32_t rows, uint32_t cols,
                               const uint32_t* row_of, const uint32_t* col_of) {
  cv_buf blk;
  bool blocks = cols % 32 == 0;
  if (col_of && blocks) {
    ML_TRY(cv_alloc(&blk, cols / 32, sizeof(uint32_t), err, "%s: tensor %s's block order", g.path, t->name));
    for (uint32_t b = 0; b < cols / 32 && blocks; ++b) {
      const uint32_t first = col_of[32 * b];
      blocks = first % 32 == 0;
      for (uint32_t j = 1; j < 32 && blocks; ++j) blocks = col_of[32 * b + j] == first + j;
      blk.as<uint32_t>()[b] = first / 32;
    }
  }
  const bool copyable = (t->type == GGUF_T_Q8_0 || t->type == GGUF_T_Q4_0) && blocks &&
                        !(t->type == GGUF_T_Q8_0 && m.h.wtype == ML_DT_Q4);
  if (copyable) return copy_quant(name, t, rows, cols, row_of, col_of ? blk.as<uint32_t>() : nullptr);
  note_requant(t);
  cv_buf f, dst;
  ML_TRY(to_float(t, &f));
  ML_TRY(cv_alloc(&dst, (size_t)rows * cols, sizeof(float), err, "%s: tensor %s", g.path, t->name));
  const float* x = f.as<float>();
  for (uint32_t r = 0; r < rows; ++r)
    for (uint32_t c = 0; c < cols; ++c)
      dst.as<float>()[(size_t)r * cols + c] = x[(size_t)(row_of ? row_of[r] : r) * cols + (col_of ? col_of[c] : c)];
  return cv_add_matrix(&m, name, rows, cols, dst.as<float>(), rows, cols, err);
}

// Qwen3.5's depthwise convolution: GGUF [kernel, channels] (llama.cpp's ssm_conv1d, F32 as its
// converter writes it; F16/BF16 widened) -> channels x kernel F32, channel c from chan_of[c].
ml_status importer::add_conv(const char* name, const char* gname, uint32_t channels, uint32_t kernel,
                             const uint32_t* chan_of) {
  ml_status s = ML_OK;
  const gguf_tensor* t = take(gname, true, &s);
  ML_TRY(s);
  ML_TRY(check_shape(t, kernel, channels));
  if (t->type != GGUF_T_F32 && t->type != GGUF_T_F16 && t->type != GGUF_T_BF16)
    return ml_fail(err, ML_E_FORMAT, "%s: tensor %s: type %s, not F32, F16 or BF16", g.path, gname,
                   gguf_block_of(t->type)->name);
  cv_buf f, dst;
  ML_TRY(to_float(t, &f));
  const float* x = f.as<float>();
  if (chan_of) {
    ML_TRY(cv_alloc(&dst, (size_t)channels * kernel, sizeof(float), err, "%s: tensor %s", g.path, gname));
    for (uint32_t c = 0; c < channels; ++c)
      std::memcpy(dst.as<float>() + (size_t)c * kernel, x + (size_t)chan_of[c] * kernel, kernel * sizeof(float));
    x = dst.as<float>();
  }
  return cv_add_f32_rows(&m, name, channels, kernel, x, err);
}

// The .mlb's value-head order (grouped by key head) from llama.cpp's tiled one: entry j is the
// GGUF index of the .mlb's index j, over n_before untouched indices then nv heads of width
// indices. Grouped head kh * (nv/nk) + g sits at tiled position g * nk + kh. Empty (a null map)
// when nv == nk: the orders agree.
ml_status importer::untile_map(uint32_t n_before, uint32_t width, cv_buf* out) {
  const uint32_t nk = m.h.linear_k_heads, nv = m.h.linear_v_heads, per = nv / nk;
  *out = cv_buf{};
  if (nv == nk) return ML_OK;
  ML_TRY(cv_alloc(out, (size_t)n_before + (size_t)nv * width, sizeof(uint32_t), err, "%s: the value-head order",
                  g.path));
  uint32_t* p = out->as<uint32_t>();
  for (uint32_t i = 0; i < n_before; ++i) p[i] = i;
  for (uint32_t hv = 0; hv < nv; ++hv) {
    const uint32_t src = (hv % per) * nk + hv / per;
    for (uint32_t i = 0; i < width; ++i) p[n_before + hv * width + i] = n_before + src * width + i;
  }
  return ML_OK;
}

// One Qwen3.5 layer in hf_import.cpp's tensor order.
ml_status importer::qwen35_layer(uint32_t l) {
  const ml_mlb_header& h = m.h;
  const uint32_t D = h.dim, hd = h.head_dim, q = h.n_heads * hd, kv = h.n_kv_heads * hd;
  char name[ML_MLB_NAME_MAX], gname[GGUF_NAME_MAX + 8];
  auto nm = [&](const char* x) {
    std::snprintf(name, sizeof name, "blk.%u.%s", l, x);
    return name;
  };
  auto gn = [&](const char* x) {
    std::snprintf(gname, sizeof gname, "blk.%u.%s", l, x);
    return gname;
  };
  ml_status s = ML_OK;
  ML_TRY(add_vector(nm("attn_norm"), gn("attn_norm.weight"), D, D, false));
  if (l % h.linear_period != h.linear_period - 1) {  // gated delta rule
    const uint32_t nk = h.linear_k_heads, nv = h.linear_v_heads, dk = h.linear_k_dim, dv = h.linear_v_dim;
    const uint32_t ch = 2 * nk * dk + nv * dv, K = h.linear_conv;
    cv_buf chan, rows_v, heads, cols_v;  // null maps when nv == nk
    ML_TRY(untile_map(2 * nk * dk, dv, &chan));
    ML_TRY(untile_map(0, dv, &rows_v));
    ML_TRY(untile_map(0, 1, &heads));
    const uint32_t *chan_of = chan.as<uint32_t>(), *v_of = rows_v.as<uint32_t>(), *head_of = heads.as<uint32_t>();
    auto mat = [&](const char* x, const char* gx, uint32_t rows, uint32_t cols, const uint32_t* row_of,
                   const uint32_t* col_of) {
      const gguf_tensor* t = take(gn(gx), true, &s);
      ML_TRY(s);
      ML_TRY(check_shape(t, cols, rows));
      return add_picked(nm(x), t, rows, cols, row_of, col_of);
    };
    ML_TRY(mat("attn_qkv", "attn_qkv.weight", ch, D, chan_of, nullptr));
    ML_TRY(mat("attn_gate", "attn_gate.weight", nv * dv, D, v_of, nullptr));
    ML_TRY(mat("ssm_beta", "ssm_beta.weight", nv, D, head_of, nullptr));
    ML_TRY(mat("ssm_alpha", "ssm_alpha.weight", nv, D, head_of, nullptr));
    ML_TRY(add_conv(nm("ssm_conv1d"), gn("ssm_conv1d.weight"), ch, K, chan_of));
    ML_TRY(add_vector(nm("ssm_a"), gn("ssm_a"), nv, nv, false, head_of));
    ML_TRY(add_vector(nm("ssm_dt"), gn("ssm_dt.bias"), nv, nv, false, head_of));
    ML_TRY(add_vector(nm("ssm_norm"), gn("ssm_norm.weight"), dv, dv, false));
    ML_TRY(mat("ssm_out", "ssm_out.weight", D, nv * dv, nullptr, v_of));
  } else {
    // attn_q: per head, head_dim query rows then head_dim output-gate rows.
    const gguf_tensor* t = take(gn("attn_q.weight"), true, &s);
    ML_TRY(s);
    if (t->ne[0] != D || t->ne[1] != 2 * (uint64_t)q || t->ne[2] != 1 || t->ne[3] != 1)
      return ml_fail(err, ML_E_SHAPE,
                     "%s: tensor %s: shape [%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64
                     "] is not [%u, %u]: qwen35's attn_q holds the query and the output gate, 2 x head_count x "
                     "key_length rows",
                     g.path, t->name, t->ne[0], t->ne[1], t->ne[2], t->ne[3], D, 2 * q);
    cv_buf qmap, gmap;
    ML_TRY(cv_alloc(&qmap, q, sizeof(uint32_t), err, "%s: tensor %s's rows", g.path, t->name));
    ML_TRY(cv_alloc(&gmap, q, sizeof(uint32_t), err, "%s: tensor %s's rows", g.path, t->name));
    for (uint32_t r = 0; r < q; ++r) {
      qmap.as<uint32_t>()[r] = r / hd * 2 * hd + r % hd;
      gmap.as<uint32_t>()[r] = r / hd * 2 * hd + hd + r % hd;
    }
    ML_TRY(add_picked(nm("attn_q"), t, q, D, qmap.as<uint32_t>(), nullptr));
    ML_TRY(add_picked(nm("attn_gate"), t, q, D, gmap.as<uint32_t>(), nullptr));
    ML_TRY(add_matrix(nm("attn_k"), gn("attn_k.weight"), kv, D, kv, D, 0, 0));
    ML_TRY(add_matrix(nm("attn_v"), gn("attn_v.weight"), kv, D, kv, D, 0, 0));
    ML_TRY(add_vector(nm("attn_q_norm"), gn("attn_q_norm.weight"), hd, hd, false));
    ML_TRY(add_vector(nm("attn_k_norm"), gn("attn_k_norm.weight"), hd, hd, false));
    ML_TRY(add_matrix(nm("attn_output"), gn("attn_output.weight"), D, q, D, q, 0, 0));
  }
  // qwen35's FFN input norm is llama.cpp's post_attention_norm.
  ML_TRY(add_vector(nm("ffn_norm"), gn("post_attention_norm.weight"), D, D, false));
  const uint32_t H = h.hidden_dim, Hs = h.hidden_dim_orig;
  ML_TRY(add_matrix(nm("ffn_gate"), gn("ffn_gate.weight"), H, D, Hs, D, 0, 0));
  ML_TRY(add_matrix(nm("ffn_up"), gn("ffn_up.weight"), H, D, Hs, D, 0, 0));
  return add_matrix(nm("ffn_down"), gn("ffn_down.weight"), D, H, D, Hs, 0, 0);
}

// The MTP layers' tensors (blk.N.* with N from n_layers to block_count - 1): not run, skipped.
ml_status importer::skip_mtp() {
  const uint32_t first = m.h.n_layers;
  size_t n = 0;
  for (uint64_t i = 0; i < g.n_tensors; ++i) {
    const char* nm = g.tensors[i].name;
    if (used[i] || std::strncmp(nm, "blk.", 4) != 0) continue;
    uint64_t b = 0;
    const char* p = nm + 4;
    for (; *p >= '0' && *p <= '9' && b <= n_blocks; ++p) b = b * 10 + (uint64_t)(*p - '0');
    if (p == nm + 4 || *p != '.' || b < first || b >= n_blocks) continue;
    used[i] = true;
    ++n;
  }
  if (n)
    cv_notify(o->warn, o->warn_user,
              "%s: skipped %zu tensors of the multi-token-prediction layer%s %u..%u (qwen35.nextn_predict_layers "
              "%u): krafla runs the %u main layers, as llama.cpp does without speculative decoding",
              g.path, n, n_blocks - first == 1 ? "" : "s", first, n_blocks - 1, n_blocks - first, first);
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
  note_requant(t);
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
  for (uint32_t l = 0; l < h.n_layers && a->arch == ML_ARCH_QWEN35; ++l) ML_TRY(qwen35_layer(l));
  for (uint32_t l = 0; l < h.n_layers && a->arch != ML_ARCH_QWEN35; ++l) {
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
  if (n_blocks > h.n_layers) ML_TRY(skip_mtp());
  for (uint64_t i = 0; i < g.n_tensors; ++i)
    if (!used[i])
      return ml_fail(err, ML_E_FORMAT, "%s: tensor %s is not part of a %s model with %u layers", g.path,
                     g.tensors[i].name, a->name, h.n_layers);
  return ML_OK;
}

}  // namespace

cv_gguf_opts cv_gguf_defaults() { return cv_gguf_opts{}; }

namespace {

// The importer over o's file, parsed, its header read (importer::header). *out owns it.
ml_status open_importer(const cv_gguf_opts* o, importer** out, ml_error* err) {
  *out = nullptr;
  if (!o->path) return ml_fail(err, ML_E_ARG, "gguf: no GGUF file given");
  importer* im = new (std::nothrow) importer;
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
  importer* p = nullptr;
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
  importer* im = gd.p;
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
  if (o->mem) return cv_write_converted(&im->m, o->mem, err);
  return cv_write(&im->m, o->out, err);
}
