#include "ops/delta.h"

#include <cmath>
#include <cstring>

#include "core/checked.h"
#include "kernels/bind.h"
#include "ops/parallel.h"

ml_status ml_delta_check(const ml_delta_shape* s, ml_error* err) {
  if (s->n_k_heads < 1 || s->n_v_heads < s->n_k_heads || s->n_v_heads > ML_DELTA_MAX_HEADS ||
      s->n_v_heads % s->n_k_heads != 0)
    return ml_fail(err, ML_E_SHAPE, "linear attention: %d key heads and %d value heads (need 1 <= nk <= nv <= %d, nv a multiple of nk)",
                   s->n_k_heads, s->n_v_heads, ML_DELTA_MAX_HEADS);
  if (s->k_dim < 1 || s->k_dim > ML_DELTA_MAX_HEAD_DIM || s->v_dim < 1 || s->v_dim > ML_DELTA_MAX_HEAD_DIM)
    return ml_fail(err, ML_E_SHAPE, "linear attention: key dim %d, value dim %d (need 1..%d)", s->k_dim, s->v_dim,
                   ML_DELTA_MAX_HEAD_DIM);
  if (s->conv < 1 || s->conv > ML_DELTA_MAX_CONV)
    return ml_fail(err, ML_E_SHAPE, "linear attention: convolution width %d (need 1..%d)", s->conv, ML_DELTA_MAX_CONV);
  if (!(s->eps > 0.0f) || !std::isfinite(s->eps))
    return ml_fail(err, ML_E_SHAPE, "linear attention: norm eps %g (need finite and > 0)", (double)s->eps);
  // ch <= 3 * 1024 * 512 fits an int, and the limits keep a state under 1.2 GB; checked all the same.
  size_t conv, S, total, bytes;
  if (!ml_mul((size_t)(s->conv - 1), (size_t)ml_delta_channels(s), &conv) ||
      !ml_mul3((size_t)s->n_v_heads, (size_t)s->k_dim, (size_t)s->v_dim, &S) || !ml_add(conv, S, &total) ||
      !ml_mul(total, sizeof(float), &bytes))
    return ml_fail(err, ML_E_NOMEM, "linear attention: the recurrent state's size overflows");
  return ML_OK;
}

size_t ml_delta_state_floats(const ml_delta_shape* s) {
  return (size_t)(s->conv - 1) * ml_delta_channels(s) + (size_t)s->n_v_heads * s->k_dim * s->v_dim;
}

void ml_delta_state_init(ml_delta_state* st, float* mem, const ml_delta_shape* s) {
  st->conv = mem;
  st->S = mem + (size_t)(s->conv - 1) * ml_delta_channels(s);
  ml_delta_state_clear(st, s);
}

void ml_delta_state_clear(const ml_delta_state* st, const ml_delta_shape* s) {
  std::memset(st->conv, 0, (size_t)(s->conv - 1) * ml_delta_channels(s) * sizeof(float));
  std::memset(st->S, 0, (size_t)s->n_v_heads * s->k_dim * s->v_dim * sizeof(float));
}

namespace {

struct delta_task {
  const ml_delta_batch* b;
  const ml_delta_shape* s;
  const ml_delta_weights* w;
};

namespace k = ml::k::active;

// SiLU in place through the bound silu_mul kernel against ones (vectorized, and the same bits on
// every ISA), in blocks of kSiluBlock values.
constexpr int kSiluBlock = 256;

struct ones_block {
  float v[kSiluBlock];
  ones_block() {
    for (float& x : v) x = 1.0f;
  }
};

void silu_inplace(float* x, int n) {
  static const ones_block ones;
  for (int i = 0; i < n; i += kSiluBlock) k::silu_mul(x + i, ones.v, n - i < kSiluBlock ? n - i : kSiluBlock);
}

// torch's softplus (threshold 20: above it, x itself).
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// [begin, end) of n items for thread i of nt, in multiples of `step` items.
void split(int n, int step, int i, int nt, int* begin, int* end) {
  const int blocks = (n + step - 1) / step;
  const int per = (blocks + nt - 1) / nt;
  *begin = i * per * step < n ? i * per * step : n;
  *end = (i + 1) * per * step < n ? (i + 1) * per * step : n;
}

// Channels [c0, c1) of every token in turn: the convolution over the K-1 stored inputs and this
// one (taps in time order), SiLU, and the window shifted by one. In blocks of kConvBlock channels,
// taps outer and channels inner (vectorized); each channel's sum is still 0 + tap 0 + ... in order.
constexpr int kConvBlock = 64;

void conv_range(const delta_task& t, int c0, int c1) {
  const ml_delta_batch& b = *t.b;
  const int K = t.s->conv, ch = ml_delta_channels(t.s);
  const float* wc = t.w->conv1d;
  for (int tok = 0; tok < b.n; ++tok) {
    float* __restrict x = b.qkv + (size_t)tok * b.ld_qkv;
    float* __restrict win = b.states[tok]->conv;
    for (int c = c0; c < c1; c += kConvBlock) {
      const int n = c1 - c < kConvBlock ? c1 - c : kConvBlock;
      const float* __restrict wr = wc + (size_t)c * K;
      float acc[kConvBlock];
      for (int i = 0; i < n; ++i) acc[i] = 0.0f;
      for (int j = 0; j < K - 1; ++j) {
        const float* __restrict wj = win + (size_t)j * ch + c;
        for (int i = 0; i < n; ++i) acc[i] += wr[(size_t)i * K + j] * wj[i];
      }
      for (int i = 0; i < n; ++i) acc[i] += wr[(size_t)i * K + K - 1] * x[c + i];
      for (int j = 0; j + 1 < K - 1; ++j)
        std::memcpy(win + (size_t)j * ch + c, win + (size_t)(j + 1) * ch + c, (size_t)n * sizeof(float));
      if (K > 1) std::memcpy(win + (size_t)(K - 2) * ch + c, x + c, (size_t)n * sizeof(float));
      std::memcpy(x + c, acc, (size_t)n * sizeof(float));
    }
    silu_inplace(x + c0, c1 - c0);
  }
}

// 1 / sqrt(sum x^2 + ML_DELTA_L2_EPS), the sum in index order.
float inv_l2(const float* x, int n) {
  float ss = 0.0f;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  return 1.0f / std::sqrt(ss + ML_DELTA_L2_EPS);
}

constexpr int kPrefetchRows = 8;

// Value head h of token tok: the state update, the read and the gated RMSNorm. The loops over
// the value dimension are element-wise (vectorized at -O3 without reordering any sum).
void head_step(const delta_task& t, int tok, int h) {
  const ml_delta_batch& b = *t.b;
  const ml_delta_shape& s = *t.s;
  const int dk = s.k_dim, dv = s.v_dim, nk = s.n_k_heads, nv = s.n_v_heads;
  const int kh = h / (nv / nk);
  const float* x = b.qkv + (size_t)tok * b.ld_qkv;
  const float* q = x + (size_t)kh * dk;
  const float* k = x + (size_t)nk * dk + (size_t)kh * dk;
  const float* v = x + (size_t)2 * nk * dk + (size_t)h * dv;

  float qn[ML_DELTA_MAX_HEAD_DIM], kn[ML_DELTA_MAX_HEAD_DIM];
  float mem[ML_DELTA_MAX_HEAD_DIM], o[ML_DELTA_MAX_HEAD_DIM];
  const float iq = inv_l2(q, dk) * (1.0f / std::sqrt((float)dk)), ik = inv_l2(k, dk);
  for (int i = 0; i < dk; ++i) qn[i] = q[i] * iq;
  for (int i = 0; i < dk; ++i) kn[i] = k[i] * ik;

  const float beta = 1.0f / (1.0f + std::exp(-b.b[(size_t)tok * nv + h]));
  const float decay = std::exp(t.w->a[h] * softplus(b.a[(size_t)tok * nv + h] + t.w->dt_bias[h]));

  // S = decay S, mem = S^T k; S += k delta^T, o = S^T q. The decayed state is not stored between
  // the two passes: each pass forms row[j] * decay itself (the same rounding), so the first pass
  // only reads S and the state is written once per token.
  // Four rows per sweep over j: mem[j] and o[j] are loaded and stored once for four rows' terms,
  // which are still added one row after the other (the same sums as row by row).
  float* __restrict S = b.states[tok]->S + (size_t)h * dk * dv;
  const size_t ahead = (size_t)(nv - h) * dk * dv;  // floats from S to the end of the token's state
  for (int j = 0; j < dv; ++j) mem[j] = 0.0f;
  int i = 0;
  for (; i + 4 <= dk; i += 4) {
    const float* __restrict r0 = S + (size_t)i * dv;
    const float *__restrict r1 = r0 + dv, *__restrict r2 = r1 + dv, *__restrict r3 = r2 + dv;
    const float k0 = kn[i], k1 = kn[i + 1], k2 = kn[i + 2], k3 = kn[i + 3];
    if ((size_t)(i + kPrefetchRows + 4) * dv <= ahead)
      for (int l = 0; l < 4 * dv; l += 16) __builtin_prefetch(r0 + (size_t)kPrefetchRows * dv + l, 0, 3);
    for (int j = 0; j < dv; ++j) {
      float m = mem[j];
      m += (r0[j] * decay) * k0;
      m += (r1[j] * decay) * k1;
      m += (r2[j] * decay) * k2;
      m += (r3[j] * decay) * k3;
      mem[j] = m;
    }
  }
  for (; i < dk; ++i) {
    const float* __restrict row = S + (size_t)i * dv;
    const float ki = kn[i];
    for (int j = 0; j < dv; ++j) mem[j] += (row[j] * decay) * ki;
  }
  for (int j = 0; j < dv; ++j) {
    mem[j] = (v[j] - mem[j]) * beta;  // delta
    o[j] = 0.0f;
  }
  for (i = 0; i + 4 <= dk; i += 4) {
    float* __restrict r0 = S + (size_t)i * dv;
    float *__restrict r1 = r0 + dv, *__restrict r2 = r1 + dv, *__restrict r3 = r2 + dv;
    const float k0 = kn[i], k1 = kn[i + 1], k2 = kn[i + 2], k3 = kn[i + 3];
    const float q0 = qn[i], q1 = qn[i + 1], q2 = qn[i + 2], q3 = qn[i + 3];
    for (int j = 0; j < dv; ++j) {
      const float d = mem[j];
      const float s0 = r0[j] * decay + k0 * d, s1 = r1[j] * decay + k1 * d;
      const float s2 = r2[j] * decay + k2 * d, s3 = r3[j] * decay + k3 * d;
      r0[j] = s0;
      r1[j] = s1;
      r2[j] = s2;
      r3[j] = s3;
      float acc = o[j];
      acc += s0 * q0;
      acc += s1 * q1;
      acc += s2 * q2;
      acc += s3 * q3;
      o[j] = acc;
    }
  }
  for (; i < dk; ++i) {
    float* __restrict row = S + (size_t)i * dv;
    const float ki = kn[i], qi = qn[i];
    for (int j = 0; j < dv; ++j) {
      row[j] = row[j] * decay + ki * mem[j];
      o[j] += row[j] * qi;
    }
  }

  float ss = 0.0f;
  for (int j = 0; j < dv; ++j) ss += o[j] * o[j];
  const float r = 1.0f / std::sqrt(ss / (float)dv + s.eps);
  const float* z = b.z + (size_t)tok * b.ld_z + (size_t)h * dv;
  float* out = b.out + (size_t)tok * b.ld_out + (size_t)h * dv;
  float gate[ML_DELTA_MAX_HEAD_DIM];
  std::memcpy(gate, z, (size_t)dv * sizeof(float));
  silu_inplace(gate, dv);
  for (int j = 0; j < dv; ++j) out[j] = t.w->norm[j] * (o[j] * r) * gate[j];
}

void conv_worker(void* ctx, int thread, int n_threads) {
  const delta_task& t = *static_cast<const delta_task*>(ctx);
  int c0, c1;
  split(ml_delta_channels(t.s), 16, thread, n_threads, &c0, &c1);
  if (c0 < c1) conv_range(t, c0, c1);
}

// Heads outer, tokens inner: a head's state stays in cache across the batch.
void update_worker(void* ctx, int thread, int n_threads) {
  const delta_task& t = *static_cast<const delta_task*>(ctx);
  int h0, h1;
  split(t.s->n_v_heads, 1, thread, n_threads, &h0, &h1);
  for (int h = h0; h < h1; ++h)
    for (int tok = 0; tok < t.b->n; ++tok) head_step(t, tok, h);
}

}  // namespace

void ml_op_delta(ml_pool* pool, const ml_delta_batch* b, const ml_delta_shape* s, const ml_delta_weights* w) {
  delta_task t{b, s, w};
  const bool threads = ml_pool_size(pool) > 1;
  const double conv_macs = (double)b->n * ml_delta_channels(s) * s->conv;
  const double update_macs = 4.0 * b->n * s->n_v_heads * s->k_dim * s->v_dim;
  if (threads && conv_macs >= ML_PARALLEL_MIN_MACS)
    ml_pool_run(pool, conv_worker, &t);
  else
    conv_worker(&t, 0, 1);
  if (threads && update_macs >= ML_PARALLEL_MIN_MACS)
    ml_pool_run(pool, update_worker, &t);
  else
    update_worker(&t, 0, 1);
}
