// The one table of a model's tensors: name, shape, type class, the condition under which a file
// has it, and where the loaded view goes. The loader binds by it, the packer and the pack cache
// walk its packed matrices in its order, so a new tensor is one row here (docs/architecture.md).
// constexpr data only: no dynamic initialisers (this file is compiled with the build's ISA flags).
#pragma once
#include <cstdint>

#include "model/model.h"

// A tensor dimension, in terms of the model's hyperparameters.
enum ml_tdim : uint8_t {
  ML_TD_ONE, ML_TD_DIM, ML_TD_HIDDEN, ML_TD_Q, ML_TD_KV, ML_TD_VOCAB, ML_TD_HEAD,
  ML_TD_LIN_CH,    // linear attention: 2 * linear_k_heads * linear_k_dim + linear_v_heads * linear_v_dim
  ML_TD_LIN_V,     // linear_v_heads * linear_v_dim
  ML_TD_LIN_HEADS, // linear_v_heads
  ML_TD_LIN_DV,    // linear_v_dim
  ML_TD_LIN_CONV,  // linear_conv
};

// Which layer kinds have the tensor (bits 1 << ml_layer_kind).
enum ml_tkinds : uint8_t { ML_TK_ATTN = 1u << ML_LAYER_ATTENTION, ML_TK_LINEAR = 1u << ML_LAYER_LINEAR, ML_TK_ALL = 0xff };

// When a file has the tensor.
enum ml_tneed : uint8_t {
  ML_TN_ALWAYS,  // required
  ML_TN_FLAG,    // required when the header's flags have `flag`, absent otherwise
  ML_TN_UNTIED,  // required unless the classifier is tied (ML_FLAG_TIED_CLASSIFIER), absent then
};

// One row. Exactly one of vec (F32: a vector when rows == ONE, else row-major) and mat (a Q8/Q4 matrix) is set; the
// member pointers say where the view goes in the owner (ml_layer for blk.N.<name>, ml_model for
// the model-level tensors).
template <class Owner>
struct ml_tensor_row {
  const char* name;
  uint8_t kinds;  // ml_tkinds: the layer kinds that have it (ML_TK_ALL for model-level tensors)
  ml_tdim rows, cols;
  ml_tneed need;
  uint32_t flag;
  const float* Owner::*vec;
  ml_qtensor Owner::*mat;
  bool packed;  // the packer makes a copy in the build's packed layout
};

using ml_layer_row = ml_tensor_row<ml_layer>;
using ml_model_row = ml_tensor_row<ml_model>;

// Per layer, "blk.<l>.<name>". The packed matrices' order here is the pack cache's order.
inline constexpr ml_layer_row ML_LAYER_TENSORS[] = {
    {"attn_norm", ML_TK_ALL, ML_TD_ONE, ML_TD_DIM, ML_TN_ALWAYS, 0, &ml_layer::attn_norm, nullptr, false},
    {"attn_q", ML_TK_ATTN, ML_TD_Q, ML_TD_DIM, ML_TN_ALWAYS, 0, nullptr, &ml_layer::wq, true},
    {"attn_k", ML_TK_ATTN, ML_TD_KV, ML_TD_DIM, ML_TN_ALWAYS, 0, nullptr, &ml_layer::wk, true},
    {"attn_v", ML_TK_ATTN, ML_TD_KV, ML_TD_DIM, ML_TN_ALWAYS, 0, nullptr, &ml_layer::wv, true},
    {"attn_gate", ML_TK_ATTN, ML_TD_Q, ML_TD_DIM, ML_TN_FLAG, ML_FLAG_ATTN_GATE, nullptr, &ml_layer::wg, true},
    {"attn_q.bias", ML_TK_ATTN, ML_TD_ONE, ML_TD_Q, ML_TN_FLAG, ML_FLAG_QKV_BIAS, &ml_layer::bq, nullptr, false},
    {"attn_k.bias", ML_TK_ATTN, ML_TD_ONE, ML_TD_KV, ML_TN_FLAG, ML_FLAG_QKV_BIAS, &ml_layer::bk, nullptr, false},
    {"attn_v.bias", ML_TK_ATTN, ML_TD_ONE, ML_TD_KV, ML_TN_FLAG, ML_FLAG_QKV_BIAS, &ml_layer::bv, nullptr, false},
    {"attn_q_norm", ML_TK_ATTN, ML_TD_ONE, ML_TD_HEAD, ML_TN_FLAG, ML_FLAG_QK_NORM, &ml_layer::q_norm, nullptr, false},
    {"attn_k_norm", ML_TK_ATTN, ML_TD_ONE, ML_TD_HEAD, ML_TN_FLAG, ML_FLAG_QK_NORM, &ml_layer::k_norm, nullptr, false},
    {"attn_output", ML_TK_ATTN, ML_TD_DIM, ML_TD_Q, ML_TN_ALWAYS, 0, nullptr, &ml_layer::wo, true},
    {"post_attention_norm", ML_TK_ALL, ML_TD_ONE, ML_TD_DIM, ML_TN_FLAG, ML_FLAG_POST_NORMS, &ml_layer::attn_post_norm,
     nullptr, false},
    {"ffn_norm", ML_TK_ALL, ML_TD_ONE, ML_TD_DIM, ML_TN_ALWAYS, 0, &ml_layer::ffn_norm, nullptr, false},
    {"ffn_gate", ML_TK_ALL, ML_TD_HIDDEN, ML_TD_DIM, ML_TN_ALWAYS, 0, nullptr, &ml_layer::w1, true},
    {"ffn_down", ML_TK_ALL, ML_TD_DIM, ML_TD_HIDDEN, ML_TN_ALWAYS, 0, nullptr, &ml_layer::w2, true},
    {"ffn_up", ML_TK_ALL, ML_TD_HIDDEN, ML_TD_DIM, ML_TN_ALWAYS, 0, nullptr, &ml_layer::w3, true},
    {"post_ffw_norm", ML_TK_ALL, ML_TD_ONE, ML_TD_DIM, ML_TN_FLAG, ML_FLAG_POST_NORMS, &ml_layer::ffn_post_norm, nullptr,
     false},
    // Linear-attention layers (Qwen3.5), docs/format.md "Linear-attention layers".
    {"attn_qkv", ML_TK_LINEAR, ML_TD_LIN_CH, ML_TD_DIM, ML_TN_ALWAYS, 0, nullptr, &ml_layer::wqkv, true},
    {"attn_gate", ML_TK_LINEAR, ML_TD_LIN_V, ML_TD_DIM, ML_TN_ALWAYS, 0, nullptr, &ml_layer::wz, true},
    {"ssm_beta", ML_TK_LINEAR, ML_TD_LIN_HEADS, ML_TD_DIM, ML_TN_ALWAYS, 0, nullptr, &ml_layer::wbeta, true},
    {"ssm_alpha", ML_TK_LINEAR, ML_TD_LIN_HEADS, ML_TD_DIM, ML_TN_ALWAYS, 0, nullptr, &ml_layer::walpha, true},
    {"ssm_conv1d", ML_TK_LINEAR, ML_TD_LIN_CH, ML_TD_LIN_CONV, ML_TN_ALWAYS, 0, &ml_layer::ssm_conv1d, nullptr, false},
    {"ssm_a", ML_TK_LINEAR, ML_TD_ONE, ML_TD_LIN_HEADS, ML_TN_ALWAYS, 0, &ml_layer::ssm_a, nullptr, false},
    {"ssm_dt", ML_TK_LINEAR, ML_TD_ONE, ML_TD_LIN_HEADS, ML_TN_ALWAYS, 0, &ml_layer::ssm_dt, nullptr, false},
    {"ssm_norm", ML_TK_LINEAR, ML_TD_ONE, ML_TD_LIN_DV, ML_TN_ALWAYS, 0, &ml_layer::ssm_norm, nullptr, false},
    {"ssm_out", ML_TK_LINEAR, ML_TD_DIM, ML_TD_LIN_V, ML_TN_ALWAYS, 0, nullptr, &ml_layer::wssm_out, true},
};

// Model-level tensors; the classifier is packed after every layer's matrices.
inline constexpr ml_model_row ML_MODEL_TENSORS[] = {
    {"tok_embd", ML_TK_ALL, ML_TD_VOCAB, ML_TD_DIM, ML_TN_ALWAYS, 0, nullptr, &ml_model::tok_embd, false},
    {"output_norm", ML_TK_ALL, ML_TD_ONE, ML_TD_DIM, ML_TN_ALWAYS, 0, &ml_model::output_norm, nullptr, false},
    {"output", ML_TK_ALL, ML_TD_VOCAB, ML_TD_DIM, ML_TN_UNTIED, 0, nullptr, &ml_model::output, true},
};

// The size a dimension stands for.
inline uint32_t ml_tdim_size(ml_tdim d, const ml_mlb_header& h) {
  switch (d) {
    case ML_TD_ONE: return 1;
    case ML_TD_DIM: return h.dim;
    case ML_TD_HIDDEN: return h.hidden_dim;
    case ML_TD_Q: return h.n_heads * h.head_dim;
    case ML_TD_KV: return h.n_kv_heads * h.head_dim;
    case ML_TD_VOCAB: return h.vocab_size;
    case ML_TD_HEAD: return h.head_dim;
    case ML_TD_LIN_CH: return 2 * h.linear_k_heads * h.linear_k_dim + h.linear_v_heads * h.linear_v_dim;
    case ML_TD_LIN_V: return h.linear_v_heads * h.linear_v_dim;
    case ML_TD_LIN_HEADS: return h.linear_v_heads;
    case ML_TD_LIN_DV: return h.linear_v_dim;
    case ML_TD_LIN_CONV: return h.linear_conv;
  }
  return 0;
}

// The kind of layer l of a file with header h: with linear_period N, every layer but each Nth
// (l % N == N - 1) is a linear-attention layer.
inline ml_layer_kind ml_layer_kind_of(const ml_mlb_header& h, uint32_t l) {
  return h.linear_period > 0 && l % h.linear_period != h.linear_period - 1 ? ML_LAYER_LINEAR : ML_LAYER_ATTENTION;
}

// Whether a file with header h has the tensor (in a layer of kind `kind`).
template <class Owner>
bool ml_tensor_present(const ml_tensor_row<Owner>& r, const ml_mlb_header& h, ml_layer_kind kind = ML_LAYER_ATTENTION) {
  if (!(r.kinds & (1u << kind))) return false;
  switch (r.need) {
    case ML_TN_ALWAYS: return true;
    case ML_TN_FLAG: return (h.flags & r.flag) != 0;
    case ML_TN_UNTIED: return (h.flags & ML_FLAG_TIED_CLASSIFIER) == 0;
  }
  return false;
}

// Calls f(W) for every packed matrix the model has, in the pack (and pack cache) order: each
// layer's, then the classifier (a tied classifier is a view of the embedding and gets its copy).
template <class F>
void ml_for_each_packed(ml_model* m, F&& f) {
  for (int l = 0; l < m->cfg.n_layers; ++l)
    for (const ml_layer_row& r : ML_LAYER_TENSORS)
      if (r.packed && ml_tensor_present(r, m->mlb.h, m->layers[l].kind)) f(&(m->layers[l].*r.mat));
  for (const ml_model_row& r : ML_MODEL_TENSORS)
    if (r.packed) f(&(m->*r.mat));
}
