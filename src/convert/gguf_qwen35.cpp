// The GGUF importer's Qwen3.5 part (cv_gguf, gguf_import.cpp).
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

// Qwen3.5's linear-attention shape (hf_config.cpp's bounds): heads, head width, conv kernel.
constexpr uint32_t kMaxLinearHeads = 4096, kMaxLinearDim = 4096, kMaxLinearConv = 64;
// Entries of .rope.dimension_sections, and the largest accepted section.
constexpr uint64_t kRopeSections = 4;
constexpr int32_t kMaxRopeSection = 1 << 16;

}  // namespace

// Qwen3.5's keys (llama.cpp's llama_model_qwen35::load_arch_hparams): the MTP layers counted in
// block_count, the gated-delta shape, which layers are attention layers, the M-RoPE sections.
ml_status gguf_importer::qwen35_header() {
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
ml_status gguf_importer::qwen35_pattern() {
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
ml_status gguf_importer::qwen35_rope_sections() {
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

// Qwen3.5's depthwise convolution: GGUF [kernel, channels] (llama.cpp's ssm_conv1d, F32 as its
// converter writes it; F16/BF16 widened) -> channels x kernel F32, channel c from chan_of[c].
ml_status gguf_importer::add_conv(const char* name, const char* gname, uint32_t channels, uint32_t kernel,
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
ml_status gguf_importer::untile_map(uint32_t n_before, uint32_t width, cv_buf* out) {
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
ml_status gguf_importer::qwen35_layer(uint32_t l) {
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
ml_status gguf_importer::skip_mtp() {
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
