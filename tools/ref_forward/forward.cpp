// ref_forward's forward pass (see forward.h for the contract). One token at a time:
//   x = tok_embd[token] * embed_scale
//   per attention layer:
//     h = act(rmsnorm(x)); q, k, v = Wq h (+bq), Wk h (+bk), Wv h (+bv); gate = Wgate h (flag 4)
//     per-head rmsnorm of q and k (flag 1); RoPE on the first n_rot dims of each head; store k, v
//     o = attention(q, cache [window]) * attn_scale; o *= sigmoid(gate) (flag 4)
//     r = Wo act(o); x += r, or x += rmsnorm(r) * post_attention_norm (flag 2)
//   per linear (gated-delta) layer: see delta_block below; x += r the same way
//   FFN: h = act(rmsnorm(x)); y = W2 act(act_fn(W1 h) * (W3 h)); x += y or rmsnorm(y) (flag 2)
//   logits = Wcls act(rmsnorm(x)); softcap c: c * tanh(logits / c)
// act() is the Q8 round trip for a quantized (.mlb) model and the identity for a float one.
#include "forward.h"

#include <algorithm>
#include <cmath>

#include <xtensor/xadapt.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>
#include <xtensor-blas/xlinalg.hpp>

namespace ref {

using Vec = xt::xtensor<double, 1>;
using Cache = xt::xtensor<double, 3>;  // [layer][position][kv_dim]

namespace {
uint64_t g_near_ties = 0;
}  // namespace

uint64_t near_ties_seen() { return g_near_ties; }

float q8_round_group(const double* x, size_t n, double* q) {
  std::vector<float> xf(n);
  float amax = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    xf[i] = float(x[i]);
    const float a = std::fabs(xf[i]);
    if (!(a <= amax)) amax = a;  // also takes a NaN, which then zeroes the group
  }
  if (!(amax >= 1e-30f)) {
    std::fill(q, q + n, 0.0);
    return 0.0f;
  }
  const float d = amax / 127.0f;
  const float id = 127.0f / amax;
  for (size_t i = 0; i < n; ++i) {
    const double exact = std::fabs(x[i]) * (127.0 / double(amax));
    if (std::fabs(exact - std::floor(exact) - 0.5) <= exact * NEAR_TIE_REL) ++g_near_ties;
    const float scaled = xf[i] * id;                       // float32 multiply
    const float shifted = scaled + std::copysign(0.5f, xf[i]);  // then float32 add
    q[i] = std::clamp(double(std::trunc(shifted)), -127.0, 127.0);
  }
  return d;
}

double round_to_half(double x) {
  if (!std::isfinite(x) || x == 0.0) return x;
  const double a = std::fabs(x);
  int e;
  std::frexp(a, &e);                            // a in [2^(e-1), 2^e)
  const int exponent = std::max(e - 1, -14);    // below 2^-14: subnormal spacing 2^-24
  const double ulp = std::ldexp(1.0, exponent - 10);
  double r = std::nearbyint(a / ulp) * ulp;     // exact scaling; nearbyint rounds ties to even
  if (r > 65504.0) r = INFINITY;
  return std::copysign(r, x);
}

namespace {

// A row-major RefMatrix seen as an xtensor expression (no copy).
auto as_xt(const RefMatrix& w) {
  return xt::adapt(w.data, std::array<size_t, 2>{w.rows, w.cols});
}

Vec matvec(const RefMatrix& w, const Vec& x) { return xt::linalg::dot(as_xt(w), x); }

// w * x / sqrt(mean(x^2) + eps)
Vec rmsnorm(const Vec& x, const std::vector<double>& w, double eps) {
  const double ms = xt::mean(x * x)();
  return xt::adapt(w, std::array<size_t, 1>{w.size()}) * x / std::sqrt(ms + eps);
}

// The Q8 round trip of an activation: blocks of 32 (the last may be shorter), each
// quantized with q8_round_group and dequantized (q * d) back to double.
Vec act_q8(const Vec& x) {
  Vec out = xt::zeros<double>({x.size()});
  for (size_t b = 0; b < x.size(); b += 32) {
    const size_t n = std::min<size_t>(32, x.size() - b);
    const double d = q8_round_group(x.data() + b, n, out.data() + b);
    for (size_t i = b; i < b + n; ++i) out(i) *= d;
  }
  return out;
}

// Rotates the first n_rot dims of each head_dim-wide head of v in place by the angles
// pos * inv_freq[i] (i < n_rot/2). Pairs: rope_type 0 (2i, 2i+1); 1 (i, i + n_rot/2).
void rope(Vec& v, uint32_t n_heads, uint32_t head_dim, uint32_t n_rot, uint32_t pos,
          const std::vector<double>& inv_freq, uint32_t rope_type) {
  const uint32_t half = n_rot / 2;
  for (uint32_t h = 0; h < n_heads; ++h) {
    double* head = v.data() + size_t(h) * head_dim;
    for (uint32_t i = 0; i < half; ++i) {
      const double angle = pos * inv_freq[i];
      const double c = std::cos(angle), s = std::sin(angle);
      const uint32_t a = rope_type == 0 ? 2 * i : i;
      const uint32_t b = rope_type == 0 ? 2 * i + 1 : i + half;
      const double x0 = head[a], x1 = head[b];
      head[a] = x0 * c - x1 * s;
      head[b] = x0 * s + x1 * c;
    }
  }
}

// The inverse frequencies base^(-2i/n_rot), i < n_rot/2, then the scaling:
//   linear (2): divided by factor;
//   llama3 (1): Hugging Face's _compute_llama3_parameters: with wavelen = 2*pi/f,
//     wavelen < orig/high: f;  wavelen > orig/low: f/factor;
//     else s = (orig/wavelen - low)/(high - low), (1 - s) f/factor + s f.
std::vector<double> rope_inv_freq(double base, uint32_t n_rot, uint32_t scaling, double factor, double low,
                                  double high, double orig) {
  std::vector<double> f(n_rot / 2);
  for (uint32_t i = 0; i < n_rot / 2; ++i) {
    const double inv = std::pow(base, -2.0 * i / n_rot);
    double r = inv;
    if (scaling == 2) {
      r = inv / factor;
    } else if (scaling == 1) {
      const double wavelen = 2.0 * M_PI / inv;
      if (wavelen < orig / high) {
        r = inv;
      } else if (wavelen > orig / low) {
        r = inv / factor;
      } else {
        const double s = (orig / wavelen - low) / (high - low);
        r = (1.0 - s) * inv / factor + s * inv;
      }
    }
    f[i] = r;
  }
  return f;
}

// RMSNorm of each n-wide head of v in place with the weight w (n values).
void head_rmsnorm(Vec& v, uint32_t n_heads, uint32_t n, const std::vector<double>& w, double eps) {
  for (uint32_t h = 0; h < n_heads; ++h) {
    double ss = 0;
    for (uint32_t i = 0; i < n; ++i) ss += v(size_t(h) * n + i) * v(size_t(h) * n + i);
    const double r = 1.0 / std::sqrt(ss / n + eps);
    for (uint32_t i = 0; i < n; ++i) v(size_t(h) * n + i) = w[i] * (v(size_t(h) * n + i) * r);
  }
}

Vec softmax(const Vec& s) {
  const Vec e = xt::exp(s - xt::amax(s)());
  return e / xt::sum(e)();
}

double silu(double a) { return a / (1.0 + std::exp(-a)); }
double sigmoid(double a) { return 1.0 / (1.0 + std::exp(-a)); }
// GELU, tanh approximation (Hugging Face's gelu_pytorch_tanh).
double gelu_tanh(double a) {
  return 0.5 * a * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (a + 0.044715 * a * a * a)));
}
// torch.nn.functional.softplus (beta 1, threshold 20: the identity above 20).
double softplus(double a) { return a > 20.0 ? a : std::log1p(std::exp(a)); }

void add_bias(Vec& v, const std::vector<double>& b) {
  for (size_t i = 0; i < b.size(); ++i) v(i) += b[i];
}

}  // namespace

struct Forward::State {
  Cache k, v;    // the stored (emulated) K and V values; for q8, k holds the integer quants
  Cache k_scale; // q8 only: [layer][position][kv_head] the K scales (as float32 values)
  std::vector<double> inv_freq_global, inv_freq_local;  // n_rot/2 each
  // Linear layers, indexed by layer (empty for attention layers):
  std::vector<std::vector<double>> conv_hist;  // the last K-1 qkv inputs, oldest first: (K-1) x ch
  std::vector<std::vector<double>> delta;      // nv x dk x dv, S[h][i][j]
};

Forward::Forward(const RefModel& model, KvMode kv, uint32_t max_positions)
    : m_(model), kv_(kv), max_positions_(max_positions), s_(std::make_unique<State>()) {
  const size_t kvdim = size_t(m_.n_kv_heads) * m_.head_dim;
  s_->k = xt::zeros<double>({size_t(m_.n_layers), size_t(max_positions), kvdim});
  s_->v = xt::zeros<double>({size_t(m_.n_layers), size_t(max_positions), kvdim});
  s_->k_scale = xt::zeros<double>({size_t(m_.n_layers), size_t(max_positions), size_t(m_.n_kv_heads)});
  const uint32_t n_rot = m_.n_rot ? m_.n_rot : m_.head_dim;
  s_->inv_freq_global = rope_inv_freq(m_.rope_theta, n_rot, m_.rope_scaling, m_.rope_factor, m_.rope_low_freq_factor,
                                      m_.rope_high_freq_factor, double(m_.rope_orig_max_seq));
  // The sliding layers' own base is never scaled; without one they share the global table.
  s_->inv_freq_local = m_.rope_local_theta > 0 ? rope_inv_freq(m_.rope_local_theta, n_rot, 0, 1, 1, 1, 1)
                                               : s_->inv_freq_global;
  s_->conv_hist.resize(m_.n_layers);
  s_->delta.resize(m_.n_layers);
  const size_t ch = 2 * size_t(m_.linear_k_heads) * m_.linear_k_dim + size_t(m_.linear_v_heads) * m_.linear_v_dim;
  for (uint32_t l = 0; l < m_.n_layers; ++l)
    if (m_.is_linear(l)) {
      s_->conv_hist[l].assign(size_t(m_.linear_conv - 1) * ch, 0.0);
      s_->delta[l].assign(size_t(m_.linear_v_heads) * m_.linear_k_dim * m_.linear_v_dim, 0.0);
    }
}

Forward::~Forward() = default;

// One gated-delta layer (Hugging Face's Qwen3_5GatedDeltaNet, one token, float64), h = act(rmsnorm(x)):
//   qkv = Wqkv h; z = Wz h; b = Wbeta h; a = Walpha h
//   conv: c[ch] = silu(sum_j conv[ch][j] * in[t-(K-1)+j]) over this and the K-1 previous inputs (zeros before 0)
//   q (nk heads of dk), k (nk x dk), v (nv x dv) = c split in that order
//   q, k: each head L2-normalised, x / sqrt(sum x^2 + 1e-6); q *= 1/sqrt(dk)
//   beta = sigmoid(b); g = ssm_a * softplus(a + ssm_dt)
//   per value head j, with key head j / (nv/nk) (repeat_interleave): S *= exp(g_j);
//     delta = (v_j - S^T k) * beta_j; S += k delta^T; o_j = S^T q
//   o_j = rmsnorm(o_j) * ssm_norm * silu(z_j) (eps norm_eps); returns ssm_out act(o).
Vec Forward::delta_block(uint32_t l, const Vec& h) {
  const RefLayer& L = m_.layers[l];
  auto act = [&](const Vec& a) { return m_.quantized ? act_q8(a) : a; };
  const uint32_t nk = m_.linear_k_heads, nv = m_.linear_v_heads, dk = m_.linear_k_dim, dv = m_.linear_v_dim;
  const uint32_t K = m_.linear_conv;
  const size_t ch = 2 * size_t(nk) * dk + size_t(nv) * dv;
  const Vec qkv = matvec(L.wqkv, h), z = matvec(L.wz, h), b = matvec(L.wbeta, h), a = matvec(L.walpha, h);

  // Causal depthwise convolution; the history holds inputs t-(K-1) .. t-1, oldest first.
  std::vector<double>& hist = s_->conv_hist[l];
  std::vector<double> c(ch);
  for (size_t i = 0; i < ch; ++i) {
    double sum = 0;
    for (uint32_t j = 0; j + 1 < K; ++j) sum += L.conv.data[i * K + j] * hist[size_t(j) * ch + i];
    sum += L.conv.data[i * K + (K - 1)] * qkv(i);
    c[i] = silu(sum);
  }
  if (K > 1) {
    std::copy(hist.begin() + ch, hist.end(), hist.begin());
    std::copy(qkv.begin(), qkv.end(), hist.end() - ch);
  }

  const double* q = c.data();
  const double* k = c.data() + size_t(nk) * dk;
  const double* v = c.data() + 2 * size_t(nk) * dk;
  std::vector<double> qn(size_t(nk) * dk), kn(size_t(nk) * dk);
  for (uint32_t hh = 0; hh < nk; ++hh) {
    double sq = 0, sk = 0;
    for (uint32_t i = 0; i < dk; ++i) {
      sq += q[hh * dk + i] * q[hh * dk + i];
      sk += k[hh * dk + i] * k[hh * dk + i];
    }
    const double rq = 1.0 / std::sqrt(sq + 1e-6) / std::sqrt(double(dk)), rk = 1.0 / std::sqrt(sk + 1e-6);
    for (uint32_t i = 0; i < dk; ++i) {
      qn[hh * dk + i] = q[hh * dk + i] * rq;
      kn[hh * dk + i] = k[hh * dk + i] * rk;
    }
  }

  Vec o = xt::zeros<double>({size_t(nv) * dv});
  std::vector<double>& S = s_->delta[l];
  std::vector<double> kv_mem(dv);
  for (uint32_t j = 0; j < nv; ++j) {
    const uint32_t kh = j / (nv / nk);
    const double* kj = kn.data() + size_t(kh) * dk;
    const double* qj = qn.data() + size_t(kh) * dk;
    const double* vj = v + size_t(j) * dv;
    double* Sj = S.data() + size_t(j) * dk * dv;
    const double beta = sigmoid(b(j));
    const double decay = std::exp(L.ssm_a[j] * softplus(a(j) + L.ssm_dt[j]));
    for (size_t i = 0; i < size_t(dk) * dv; ++i) Sj[i] *= decay;
    std::fill(kv_mem.begin(), kv_mem.end(), 0.0);
    for (uint32_t i = 0; i < dk; ++i)
      for (uint32_t e = 0; e < dv; ++e) kv_mem[e] += Sj[size_t(i) * dv + e] * kj[i];
    for (uint32_t e = 0; e < dv; ++e) {
      const double d = (vj[e] - kv_mem[e]) * beta;
      for (uint32_t i = 0; i < dk; ++i) Sj[size_t(i) * dv + e] += kj[i] * d;
    }
    double ss = 0;
    for (uint32_t e = 0; e < dv; ++e) {
      double sum = 0;
      for (uint32_t i = 0; i < dk; ++i) sum += Sj[size_t(i) * dv + e] * qj[i];
      o(size_t(j) * dv + e) = sum;
      ss += sum * sum;
    }
    const double r = 1.0 / std::sqrt(ss / dv + m_.norm_eps);
    for (uint32_t e = 0; e < dv; ++e) {
      const size_t at = size_t(j) * dv + e;
      o(at) = L.ssm_norm[e] * (o(at) * r) * silu(z(at));
    }
  }
  return matvec(L.ssm_out, act(o));
}

std::vector<double> Forward::step(uint32_t token) {
  if (pos_ >= max_positions_) throw RefError(2, "ref_forward: more positions than the cache was sized for");
  if (token >= m_.vocab) throw RefError(2, "ref_forward: token id " + std::to_string(token) + " out of range");
  const uint32_t pos = pos_++;
  const uint32_t hd = m_.head_dim, n_kv = m_.n_kv_heads, group = m_.n_heads / m_.n_kv_heads;
  const uint32_t n_rot = m_.n_rot ? m_.n_rot : hd;
  const double sqrt_hd = std::sqrt(double(hd));
  // The score scale: the header's attn_scale, or a division by sqrt(head_dim) when it is 0.
  auto scaled = [&](Vec s) {
    if (m_.attn_scale > 0) return Vec(s * m_.attn_scale);
    return Vec(s / sqrt_hd);
  };
  auto act = [&](const Vec& a) { return m_.quantized ? act_q8(a) : a; };
  auto rms = [&](const Vec& a, const std::vector<double>& w) { return rmsnorm(a, w, m_.norm_eps); };
  auto residual = [&](Vec& x, const Vec& r, const std::vector<double>& post_norm) {
    if (m_.post_norms) x += rms(r, post_norm);
    else x += r;
  };

  Vec x = xt::view(as_xt(m_.tok_embd), token, xt::all()) * m_.embed_scale;

  for (uint32_t l = 0; l < m_.n_layers; ++l) {
    const RefLayer& L = m_.layers[l];
    const Vec h = act(rms(x, L.attn_norm));
    if (L.linear) {
      residual(x, delta_block(l, h), L.post_attn_norm);
    } else {
      Vec q = matvec(L.wq, h), k = matvec(L.wk, h), v = matvec(L.wv, h);
      if (m_.qkv_bias) {
        add_bias(q, L.bq);
        add_bias(k, L.bk);
        add_bias(v, L.bv);
      }
      Vec gate;
      if (m_.attn_gate) gate = matvec(L.wgate, h);
      if (m_.qk_norm) {
        head_rmsnorm(q, m_.n_heads, hd, L.q_norm, m_.norm_eps);
        head_rmsnorm(k, n_kv, hd, L.k_norm, m_.norm_eps);
      }
      const bool sliding = m_.is_sliding(l);
      const std::vector<double>& inv_freq = sliding ? s_->inv_freq_local : s_->inv_freq_global;
      rope(q, m_.n_heads, hd, n_rot, pos, inv_freq, m_.rope_type);
      rope(k, n_kv, hd, n_rot, pos, inv_freq, m_.rope_type);
      // Store this position's K and V as the cache would hold them.
      auto k_row = xt::view(s_->k, l, pos, xt::all());
      auto v_row = xt::view(s_->v, l, pos, xt::all());
      switch (kv_) {
        case KvMode::f64: k_row = k; v_row = v; break;
        case KvMode::f32:
          k_row = xt::cast<double>(xt::cast<float>(k));
          v_row = xt::cast<double>(xt::cast<float>(v));
          break;
        case KvMode::f16:
          for (size_t i = 0; i < k.size(); ++i) {
            k_row(i) = round_to_half(k(i));
            v_row(i) = round_to_half(v(i));
          }
          break;
        case KvMode::q8:
          for (uint32_t g = 0; g < n_kv; ++g) {
            Vec kq = xt::zeros<double>({size_t(hd)}), vq = xt::zeros<double>({size_t(hd)});
            const float kd = q8_round_group(k.data() + size_t(g) * hd, hd, kq.data());
            const float vd = q8_round_group(v.data() + size_t(g) * hd, hd, vq.data());
            xt::view(k_row, xt::range(g * hd, (g + 1) * hd)) = kq;           // integer quants
            s_->k_scale(l, pos, g) = kd;
            xt::view(v_row, xt::range(g * hd, (g + 1) * hd)) = vq * double(vd);  // dequantized
          }
          break;
      }

      // Attention, one query head at a time over positions lo..pos of its KV head: all of them,
      // or on a sliding layer the last sliding_window, (pos - W, pos].
      const uint32_t W = m_.sliding_window;
      const uint32_t lo = sliding && pos + 1 > W ? pos + 1 - W : 0;
      Vec o = xt::zeros<double>({size_t(m_.n_heads) * hd});
      for (uint32_t hh = 0; hh < m_.n_heads; ++hh) {
        const uint32_t g = hh / group;
        auto cols = xt::range(g * hd, (g + 1) * hd);
        const Vec qh = xt::view(q, xt::range(hh * hd, (hh + 1) * hd));
        const xt::xtensor<double, 2> kh = xt::view(s_->k, l, xt::range(lo, pos + 1), cols);
        const xt::xtensor<double, 2> vh = xt::view(s_->v, l, xt::range(lo, pos + 1), cols);
        Vec scores;
        if (kv_ == KvMode::q8) {
          // Integer dot products (exact in double: |sum| <= 127*127*head_dim < 2^53).
          Vec qq = xt::zeros<double>({size_t(hd)});
          const float qd = q8_round_group(qh.data(), hd, qq.data());
          const Vec kd = xt::view(s_->k_scale, l, xt::range(lo, pos + 1), g);
          scores = scaled(xt::linalg::dot(kh, qq) * double(qd) * kd);
        } else {
          scores = scaled(xt::linalg::dot(kh, qh));
        }
        const Vec att = softmax(scores);
        xt::view(o, xt::range(hh * hd, (hh + 1) * hd)) = xt::linalg::dot(xt::transpose(vh), att);
      }
      if (m_.attn_gate)
        for (size_t i = 0; i < o.size(); ++i) o(i) *= sigmoid(gate(i));
      residual(x, matvec(L.wo, act(o)), L.post_attn_norm);
    }

    const Vec h2 = act(rms(x, L.ffn_norm));
    const Vec gate = matvec(L.w1, h2), up = matvec(L.w3, h2);
    Vec g = xt::zeros<double>({gate.size()});
    for (size_t i = 0; i < g.size(); ++i) g(i) = (m_.activation == 1 ? gelu_tanh(gate(i)) : silu(gate(i))) * up(i);
    residual(x, matvec(L.w2, act(g)), L.post_ffn_norm);
  }

  Vec logits = matvec(m_.classifier(), act(rms(x, m_.output_norm)));
  if (m_.logit_softcap > 0)
    for (size_t i = 0; i < logits.size(); ++i) logits(i) = m_.logit_softcap * std::tanh(logits(i) / m_.logit_softcap);
  return std::vector<double>(logits.begin(), logits.end());
}

}  // namespace ref
