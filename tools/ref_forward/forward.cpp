// ref_forward's forward pass (see forward.h for the contract). One token at a time:
//   x = tok_embd[token] * embed_scale
//   per layer: h = act(rmsnorm(x)); q, k, v = Wq h, Wk h, Wv h; RoPE(q, k); store k, v;
//              o = attention(q, cache); x += Wo act(o);
//              h = act(rmsnorm(x)); x += W2 act(silu(W1 h) * (W3 h))
//   logits = Wcls act(rmsnorm(x))
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

// Rotates each head_dim-wide head of v in place by the RoPE angles of position pos.
void rope(Vec& v, uint32_t n_heads, uint32_t head_dim, uint32_t pos, double theta, uint32_t rope_type) {
  const uint32_t half = head_dim / 2;
  for (uint32_t h = 0; h < n_heads; ++h) {
    double* head = v.data() + size_t(h) * head_dim;
    for (uint32_t i = 0; i < half; ++i) {
      const double freq = std::pow(theta, -2.0 * i / head_dim);
      const double angle = pos * freq;
      const double c = std::cos(angle), s = std::sin(angle);
      const uint32_t a = rope_type == 0 ? 2 * i : i;
      const uint32_t b = rope_type == 0 ? 2 * i + 1 : i + half;
      const double x0 = head[a], x1 = head[b];
      head[a] = x0 * c - x1 * s;
      head[b] = x0 * s + x1 * c;
    }
  }
}

Vec softmax(const Vec& s) {
  const Vec e = xt::exp(s - xt::amax(s)());
  return e / xt::sum(e)();
}

double silu(double a) { return a / (1.0 + std::exp(-a)); }

}  // namespace

struct Forward::State {
  Cache k, v;    // the stored (emulated) K and V values; for q8, k holds the integer quants
  Cache k_scale; // q8 only: [layer][position][kv_head] the K scales (as float32 values)
};

Forward::Forward(const RefModel& model, KvMode kv, uint32_t max_positions)
    : m_(model), kv_(kv), max_positions_(max_positions), s_(std::make_unique<State>()) {
  const size_t kvdim = size_t(m_.n_kv_heads) * m_.head_dim;
  s_->k = xt::zeros<double>({size_t(m_.n_layers), size_t(max_positions), kvdim});
  s_->v = xt::zeros<double>({size_t(m_.n_layers), size_t(max_positions), kvdim});
  s_->k_scale = xt::zeros<double>({size_t(m_.n_layers), size_t(max_positions), size_t(m_.n_kv_heads)});
}

Forward::~Forward() = default;

std::vector<double> Forward::step(uint32_t token) {
  if (pos_ >= max_positions_) throw RefError(2, "ref_forward: more positions than the cache was sized for");
  if (token >= m_.vocab) throw RefError(2, "ref_forward: token id " + std::to_string(token) + " out of range");
  const uint32_t pos = pos_++;
  const uint32_t hd = m_.head_dim, n_kv = m_.n_kv_heads, group = m_.n_heads / m_.n_kv_heads;
  const double sqrt_hd = std::sqrt(double(hd));
  auto act = [&](const Vec& a) { return m_.quantized ? act_q8(a) : a; };
  auto rms = [&](const Vec& a, const std::vector<double>& w) { return rmsnorm(a, w, m_.norm_eps); };

  Vec x = xt::view(as_xt(m_.tok_embd), token, xt::all()) * m_.embed_scale;

  for (uint32_t l = 0; l < m_.n_layers; ++l) {
    const RefLayer& L = m_.layers[l];
    const Vec h = act(rms(x, L.attn_norm));
    Vec q = matvec(L.wq, h), k = matvec(L.wk, h), v = matvec(L.wv, h);
    rope(q, m_.n_heads, hd, pos, m_.rope_theta, m_.rope_type);
    rope(k, n_kv, hd, pos, m_.rope_theta, m_.rope_type);

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

    // Attention, one query head at a time over positions 0..pos of its KV head.
    Vec o = xt::zeros<double>({size_t(m_.n_heads) * hd});
    for (uint32_t hh = 0; hh < m_.n_heads; ++hh) {
      const uint32_t g = hh / group;
      auto cols = xt::range(g * hd, (g + 1) * hd);
      const Vec qh = xt::view(q, xt::range(hh * hd, (hh + 1) * hd));
      const xt::xtensor<double, 2> kh = xt::view(s_->k, l, xt::range(0, pos + 1), cols);
      const xt::xtensor<double, 2> vh = xt::view(s_->v, l, xt::range(0, pos + 1), cols);
      Vec scores;
      if (kv_ == KvMode::q8) {
        // Integer dot products (exact in double: |sum| <= 127*127*head_dim < 2^53).
        Vec qq = xt::zeros<double>({size_t(hd)});
        const float qd = q8_round_group(qh.data(), hd, qq.data());
        const Vec kd = xt::view(s_->k_scale, l, xt::range(0, pos + 1), g);
        scores = xt::linalg::dot(kh, qq) * double(qd) * kd / sqrt_hd;
      } else {
        scores = xt::linalg::dot(kh, qh) / sqrt_hd;
      }
      const Vec att = softmax(scores);
      xt::view(o, xt::range(hh * hd, (hh + 1) * hd)) = xt::linalg::dot(xt::transpose(vh), att);
    }
    x += matvec(L.wo, act(o));

    const Vec h2 = act(rms(x, L.ffn_norm));
    const Vec gate = matvec(L.w1, h2), up = matvec(L.w3, h2);
    Vec g = xt::zeros<double>({gate.size()});
    for (size_t i = 0; i < g.size(); ++i) g(i) = silu(gate(i)) * up(i);
    x += matvec(L.w2, act(g));
  }

  const Vec logits = matvec(m_.classifier(), act(rms(x, m_.output_norm)));
  return std::vector<double>(logits.begin(), logits.end());
}

}  // namespace ref
