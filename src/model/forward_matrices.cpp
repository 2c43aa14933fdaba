// The matrix products of one decode step alone (forward.h, ml_forward_matrices): a benchmark's
// way to split a token's time into the weight stream and everything else. The passes below are
// forward.cpp's, in its order and grouping (qkv [and gate] or the four linear-attention
// projections together; wo or ssm_out; gate and up together; down; the classifier), so each one
// splits its rows across the pool as the forward pass does. Only the activations differ: a fixed
// pattern written into the buffer the forward pass would quantize (xb, hb or lin_z) and quantized
// before each pass outside the timed span, as the forward pass quantizes outside its --profile
// stages.
#include <chrono>

#include "model/forward.h"
#include "ops/matvec.h"

namespace {

using clock_type = std::chrono::steady_clock;

// Weight bytes a product over W reads: its quants and scales, packed or row-major.
double matrix_bytes(const ml_qtensor& W) {
  const double n = (double)W.rows * W.cols;
  const double quants = W.type == ML_DT_Q4 ? n / 2 : n;
  const bool f16 = W.pq ? W.pd_f16 != 0 : W.d_f16 != 0;
  return quants + n / ML_QK * (f16 ? 2 : 4);
}

struct matrix_timer {
  ml_exec* e;
  double seconds = 0, bytes = 0;

  // Writes the fixed activation of width w into x and quantizes it (untimed) for the next pass.
  ml_qbatch input(float* x, int w) {
    for (int i = 0; i < w; ++i) x[i] = 0.01f * (float)(i % 7 - 3);  // a few distinct values, not all zero
    return ml_quantize_rows(e, x, w, w, 1);
  }
  template <class F>
  void pass(F&& run) {
    const auto t0 = clock_type::now();
    run();
    seconds += std::chrono::duration<double>(clock_type::now() - t0).count();
  }
  void count(const ml_qtensor& W) { bytes += matrix_bytes(W); }
};

}  // namespace

double ml_forward_matrices(const ml_model* m, ml_exec* e, double* bytes) {
  const ml_config& c = m->cfg;
  const int lin_v = c.delta.n_v_heads * c.delta.v_dim, ch = ml_delta_channels(&c.delta);
  matrix_timer t{e};
  for (int l = 0; l < c.n_layers; ++l) {
    const ml_layer& L = m->layers[l];
    if (L.kind == ML_LAYER_LINEAR) {
      const ml_qbatch in = t.input(e->xb, c.dim);
      const ml_matmul_job proj[4] = {
          {e->lin_qkv, ch, &L.wqkv}, {e->lin_z, lin_v, &L.wz}, {e->lin_b, c.delta.n_v_heads, &L.wbeta},
          {e->lin_a, c.delta.n_v_heads, &L.walpha}};
      t.pass([&] { ml_op_matmul_group(e->pool, proj, 4, &in); });
      for (const ml_matmul_job& j : proj) t.count(*j.W);
      const ml_qbatch o = t.input(e->lin_z, lin_v);
      t.pass([&] { ml_op_matmul(e->pool, e->xb2, c.dim, &L.wssm_out, &o); });
      t.count(L.wssm_out);
    } else {
      const ml_qbatch in = t.input(e->xb, c.dim);
      const ml_matmul_job qkv[4] = {
          {e->q, c.q_dim, &L.wq}, {e->k, c.kv_dim, &L.wk}, {e->v, c.kv_dim, &L.wv}, {e->gate, c.q_dim, &L.wg}};
      const int n_qkv = c.attn_gate ? 4 : 3;
      t.pass([&] { ml_op_matmul_group(e->pool, qkv, n_qkv, &in); });
      for (int i = 0; i < n_qkv; ++i) t.count(*qkv[i].W);
      const ml_qbatch o = t.input(e->xb, c.q_dim);
      t.pass([&] { ml_op_matmul(e->pool, e->xb2, c.dim, &L.wo, &o); });
      t.count(L.wo);
    }
    const ml_qbatch f = t.input(e->xb, c.dim);
    t.pass([&] { ml_op_gated_up(e->pool, e->hb, e->hb2, c.hidden_dim, &L.w1, &L.w3, &f, c.gelu); });
    t.count(L.w1);
    t.count(L.w3);
    const ml_qbatch h = t.input(e->hb, c.hidden_dim);
    t.pass([&] { ml_op_matmul(e->pool, e->xb2, c.dim, &L.w2, &h); });
    t.count(L.w2);
  }
  const ml_qbatch out = t.input(e->xb, c.dim);
  t.pass([&] { ml_op_matmul(e->pool, e->logits, c.vocab_size, &m->output, &out); });
  t.count(m->output);
  *bytes = t.bytes;
  return t.seconds;
}
