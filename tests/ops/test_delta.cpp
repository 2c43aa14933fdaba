// test_delta: the gated delta rule (src/ops/delta.h) against a double-precision reference
// written here from the transformers formulation (Qwen3_5GatedDeltaNet: causal_conv1d_fn with
// SiLU, l2norm with eps 1e-6, q / sqrt(dk), beta = sigmoid(b), g = A * softplus(a + dt_bias),
// torch_recurrent_gated_delta_rule, Qwen3_5RMSNormGated), over random inputs and several shapes:
// GQA ratios 1, 2, 3, conv widths 1 to 4, odd head dims, two or three sequences interleaved in
// one batch, and a 150-token sequence. Then bit-identity: outputs and states are the same bytes
// on 1 or 3 threads and for any cut of the tokens into batches.
//
// Tolerance: relative 1e-4 of each quantity's natural scale, float against double:
//   convolved channel  |x' - ref| <= 1e-4 * (|ref| + sum_j |w_j x_j|)
//   output element     |out - ref| <= 1e-4 * (|ref| + |norm_j silu(z_j)|)   (o is normalized, so
//                      the output's scale is norm_j silu(z_j))
//   state element      |S - ref| <= 1e-4 * max |ref| over the head
// The conv window holds copies of the raw inputs, so it is compared exactly.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/threads.h"
#include "ops/delta.h"

namespace {

constexpr double kTol = 1e-4;

// splitmix64: deterministic, platform-independent.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uni(float lo, float hi) { return lo + (hi - lo) * (float)((next() >> 40) * (1.0 / 16777216.0)); }
  int below(int n) { return (int)(next() % (uint64_t)n); }
};

struct Shape {
  int nk, nv, dk, dv, K;
};

std::string name(const Shape& h) {
  return "nk " + std::to_string(h.nk) + " nv " + std::to_string(h.nv) + " dk " + std::to_string(h.dk) + " dv " +
         std::to_string(h.dv) + " K " + std::to_string(h.K);
}

struct Layer {
  ml_delta_shape s;
  int ch;
  std::vector<float> conv, A, dt, norm;
  Layer(const Shape& h, Rng& r) {
    s.n_k_heads = h.nk, s.n_v_heads = h.nv, s.k_dim = h.dk, s.v_dim = h.dv, s.conv = h.K, s.eps = 1e-6f;
    ch = 2 * h.nk * h.dk + h.nv * h.dv;
    for (int i = 0; i < ch * h.K; ++i) conv.push_back(r.uni(-0.8f, 0.8f));
    // A = -exp(A_log) with A_log in [log 0.01, log 16] (the checkpoint's init range): slow and
    // fast decays.
    for (int i = 0; i < h.nv; ++i) A.push_back(-std::exp(r.uni(-4.6f, 2.77f)));
    for (int i = 0; i < h.nv; ++i) dt.push_back(r.uni(-2.0f, 1.0f));
    for (int i = 0; i < h.dv; ++i) norm.push_back(r.uni(0.5f, 1.5f));
  }
  ml_delta_weights w() const { return {conv.data(), A.data(), dt.data(), norm.data()}; }
};

// n tokens' projections; token t belongs to sequence seq[t].
struct Inputs {
  int n;
  std::vector<float> qkv, z, b, a;
  std::vector<int> seq;
  Inputs(const Layer& L, int n_tok, int n_seq, Rng& r) : n(n_tok) {
    const int nv = L.s.n_v_heads, vd = nv * L.s.v_dim;
    for (int i = 0; i < n * L.ch; ++i) qkv.push_back(r.uni(-2.0f, 2.0f));
    for (int i = 0; i < n * vd; ++i) z.push_back(r.uni(-3.0f, 3.0f));
    for (int i = 0; i < n * nv; ++i) b.push_back(r.uni(-4.0f, 4.0f));
    for (int i = 0; i < n * nv; ++i) a.push_back(r.uni(-5.0f, 3.0f));
    for (int t = 0; t < n; ++t) seq.push_back(r.below(n_seq));
  }
};

// ---- the reference: one sequence in double ----------------------------------------------------

double dsilu(double x) { return x / (1.0 + std::exp(-x)); }

struct RefSeq {
  std::vector<std::vector<double>> inputs;  // raw in_proj_qkv rows seen so far
  std::vector<double> S;                    // [nv][dk][dv]
};

// One token: fills conv_out [ch] and out [nv*dv], advances the sequence.
void ref_step(const Layer& L, RefSeq& R, const float* qkv, const float* z, const float* b, const float* a,
              std::vector<double>& conv_out, std::vector<double>& conv_mag, std::vector<double>& out) {
  const int nk = L.s.n_k_heads, nv = L.s.n_v_heads, dk = L.s.k_dim, dv = L.s.v_dim, K = L.s.conv;
  if (R.S.empty()) R.S.assign((size_t)nv * dk * dv, 0.0);
  R.inputs.emplace_back(qkv, qkv + L.ch);
  const int T = (int)R.inputs.size() - 1;  // this token's time
  conv_out.assign(L.ch, 0.0);
  conv_mag.assign(L.ch, 0.0);
  for (int c = 0; c < L.ch; ++c) {
    double acc = 0, mag = 0;
    for (int j = 0; j < K; ++j) {
      const int tau = T - (K - 1) + j;  // tap K-1 on time T
      if (tau < 0) continue;
      acc += (double)L.conv[(size_t)c * K + j] * R.inputs[tau][c];
      mag += std::fabs((double)L.conv[(size_t)c * K + j] * R.inputs[tau][c]);
    }
    conv_out[c] = dsilu(acc);
    conv_mag[c] = mag;
  }
  out.assign((size_t)nv * dv, 0.0);
  const int group = nv / nk;
  for (int kh = 0; kh < nk; ++kh) {
    std::vector<double> q(dk), k(dk);
    double sq = 0, sk = 0;
    for (int i = 0; i < dk; ++i) {
      q[i] = conv_out[(size_t)kh * dk + i];
      k[i] = conv_out[(size_t)(nk + kh) * dk + i];
      sq += q[i] * q[i];
      sk += k[i] * k[i];
    }
    for (int i = 0; i < dk; ++i) {
      q[i] = q[i] / std::sqrt(sq + 1e-6) / std::sqrt((double)dk);
      k[i] = k[i] / std::sqrt(sk + 1e-6);
    }
    for (int g = 0; g < group; ++g) {  // the value heads kh*group .. kh*group+group-1 share kh
      const int h = kh * group + g;
      const double* v = &conv_out[(size_t)2 * nk * dk + (size_t)h * dv];
      const double beta = 1.0 / (1.0 + std::exp(-(double)b[h]));
      const double x = (double)a[h] + L.dt[h];
      const double decay = std::exp((double)L.A[h] * std::log(1.0 + std::exp(x)));
      double* S = &R.S[(size_t)h * dk * dv];
      // S' = decay S + k (x) beta (v - decay S^T k);  o = S'^T q
      for (int j = 0; j < dv; ++j) {
        double stk = 0;
        for (int i = 0; i < dk; ++i) stk += S[(size_t)i * dv + j] * k[i];
        const double delta = beta * (v[j] - decay * stk);
        for (int i = 0; i < dk; ++i) S[(size_t)i * dv + j] = decay * S[(size_t)i * dv + j] + k[i] * delta;
      }
      std::vector<double> o(dv, 0.0);
      double ms = 0;
      for (int j = 0; j < dv; ++j) {
        for (int i = 0; i < dk; ++i) o[j] += S[(size_t)i * dv + j] * q[i];
        ms += o[j] * o[j] / dv;
      }
      for (int j = 0; j < dv; ++j)
        out[(size_t)h * dv + j] = L.norm[j] * o[j] / std::sqrt(ms + L.s.eps) * dsilu(z[(size_t)h * dv + j]);
    }
  }
}

// ---- running the op --------------------------------------------------------------------------

struct Run {
  std::vector<float> out, conv_out;     // [n][nv*dv], [n][ch]
  std::vector<std::vector<float>> mem;  // per sequence: its state's floats
};

// Runs the inputs through the op in batches of the given sizes (summing to n), on `pool`.
Run run_op(ml_pool* pool, const Layer& L, const Inputs& in, int n_seq, const std::vector<int>& batches,
           bool out_in_z = false) {
  const int nv = L.s.n_v_heads, vd = nv * L.s.v_dim;
  Run r;
  r.conv_out = in.qkv;
  std::vector<float> z = in.z;
  r.out.assign((size_t)in.n * vd, std::nanf(""));
  r.mem.assign(n_seq, std::vector<float>(ml_delta_state_floats(&L.s), std::nanf("")));
  std::vector<ml_delta_state> st(n_seq);
  for (int i = 0; i < n_seq; ++i) ml_delta_state_init(&st[i], r.mem[i].data(), &L.s);
  const ml_delta_weights w = L.w();
  int t0 = 0;
  for (int n : batches) {
    std::vector<ml_delta_state*> sp;
    for (int t = t0; t < t0 + n; ++t) sp.push_back(&st[in.seq[t]]);
    ml_delta_batch b;
    b.n = n;
    b.qkv = r.conv_out.data() + (size_t)t0 * L.ch;
    b.ld_qkv = L.ch;
    b.z = z.data() + (size_t)t0 * vd;
    b.ld_z = vd;
    b.b = in.b.data() + (size_t)t0 * nv;
    b.a = in.a.data() + (size_t)t0 * nv;
    b.out = out_in_z ? z.data() + (size_t)t0 * vd : r.out.data() + (size_t)t0 * vd;
    b.ld_out = vd;
    b.states = sp.data();
    ml_op_delta(pool, &b, &L.s, &w);
    t0 += n;
  }
  REQUIRE(t0 == in.n);
  if (out_in_z) r.out = z;
  return r;
}

std::vector<int> random_batches(int n, int max_batch, Rng& r) {
  std::vector<int> v;
  while (n > 0) {
    const int b = 1 + r.below(max_batch < n ? max_batch : n);
    v.push_back(b);
    n -= b;
  }
  return v;
}

// Compares a run with the reference, token by token, then the final states.
void check_against_reference(const Layer& L, const Inputs& in, int n_seq, const Run& r) {
  const int nv = L.s.n_v_heads, dk = L.s.k_dim, dv = L.s.v_dim, K = L.s.conv, vd = nv * dv;
  std::vector<RefSeq> ref(n_seq);
  std::vector<double> co, cm, out;
  double worst = 0;  // largest error / allowed seen
  for (int t = 0; t < in.n; ++t) {
    ref_step(L, ref[in.seq[t]], &in.qkv[(size_t)t * L.ch], &in.z[(size_t)t * vd], &in.b[(size_t)t * nv],
             &in.a[(size_t)t * nv], co, cm, out);
    for (int c = 0; c < L.ch; ++c) {
      const double d = std::fabs(r.conv_out[(size_t)t * L.ch + c] - co[c]), lim = kTol * (std::fabs(co[c]) + cm[c]);
      if (!(d <= lim)) FAIL_CHECK("token " << t << " channel " << c << ": " << r.conv_out[(size_t)t * L.ch + c]
                                           << " vs " << co[c]);
    }
    for (int i = 0; i < vd; ++i) {
      const double zi = in.z[(size_t)t * vd + i];
      const double lim = kTol * (std::fabs(out[i]) + std::fabs(L.norm[i % dv] * dsilu(zi)));
      const double d = std::fabs(r.out[(size_t)t * vd + i] - out[i]);
      worst = std::max(worst, d / lim);
      if (!(d <= lim)) FAIL_CHECK("token " << t << " out " << i << ": " << r.out[(size_t)t * vd + i] << " vs " << out[i]);
    }
  }
  INFO("worst output error / tolerance " << worst);
  for (int sq = 0; sq < n_seq; ++sq) {
    const RefSeq& R = ref[sq];
    const float* conv = r.mem[sq].data();
    const float* S = conv + (size_t)(K - 1) * L.ch;
    // The window: the last K-1 raw inputs, oldest first, zeros before the first token.
    for (int j = 0; j < K - 1; ++j) {
      const int tau = (int)R.inputs.size() - (K - 1) + j;
      for (int c = 0; c < L.ch; ++c) {
        const float want = tau >= 0 ? (float)R.inputs[tau][c] : 0.0f;
        if (conv[(size_t)j * L.ch + c] != want) FAIL_CHECK("seq " << sq << " window " << j << " channel " << c);
      }
    }
    if (R.S.empty()) continue;
    for (int h = 0; h < nv; ++h) {
      double mx = 0;
      for (size_t i = 0; i < (size_t)dk * dv; ++i) mx = std::max(mx, std::fabs(R.S[(size_t)h * dk * dv + i]));
      for (size_t i = 0; i < (size_t)dk * dv; ++i) {
        const size_t at = (size_t)h * dk * dv + i;
        if (!(std::fabs(S[at] - R.S[at]) <= kTol * mx)) FAIL_CHECK("seq " << sq << " S[" << at << "]: " << S[at] << " vs " << R.S[at]);
      }
    }
  }
}

struct Pools {
  std::vector<ml_pool*> p;
  Pools() {
    p.push_back(nullptr);
    if (ml_pool_threads_built()) {
      ml_pool* q = nullptr;
      ml_error err;
      REQUIRE(ml_pool_create(&q, 3, &err) == ML_OK);
      p.push_back(q);
    }
  }
  ~Pools() {
    for (ml_pool* q : p) ml_pool_destroy(q);
  }
};

}  // namespace

TEST_CASE("delta: shapes are checked, a state is carved and cleared", "[delta]") {
  ml_error err;
  ml_delta_shape s;
  s.n_k_heads = 2, s.n_v_heads = 4, s.k_dim = 8, s.v_dim = 6, s.conv = 4;
  CHECK(ml_delta_check(&s, &err) == ML_OK);
  CHECK(ml_delta_channels(&s) == 2 * 2 * 8 + 4 * 6);
  CHECK(ml_delta_state_floats(&s) == (size_t)3 * 56 + 4 * 8 * 6);
  std::vector<float> mem(ml_delta_state_floats(&s), 1.0f);
  ml_delta_state st;
  ml_delta_state_init(&st, mem.data(), &s);
  CHECK(st.conv == mem.data());
  CHECK(st.S == mem.data() + 3 * 56);
  for (float f : mem) CHECK(f == 0.0f);
  for (float& f : mem) f = 2.0f;
  ml_delta_state_clear(&st, &s);
  for (float f : mem) CHECK(f == 0.0f);

  ml_delta_shape bad = s;
  bad.n_v_heads = 3;  // not a multiple of nk
  CHECK(ml_delta_check(&bad, &err) == ML_E_SHAPE);
  bad = s, bad.n_v_heads = 1;  // fewer value heads than key heads
  CHECK(ml_delta_check(&bad, &err) == ML_E_SHAPE);
  bad = s, bad.k_dim = ML_DELTA_MAX_HEAD_DIM + 1;
  CHECK(ml_delta_check(&bad, &err) == ML_E_SHAPE);
  bad = s, bad.v_dim = 0;
  CHECK(ml_delta_check(&bad, &err) == ML_E_SHAPE);
  bad = s, bad.conv = 0;
  CHECK(ml_delta_check(&bad, &err) == ML_E_SHAPE);
  bad = s, bad.eps = std::nanf("");
  CHECK(ml_delta_check(&bad, &err) == ML_E_SHAPE);
  // The largest shape the limits allow: about 1.1 GB of state, which even a 32-bit size_t holds.
  bad = s, bad.n_k_heads = bad.n_v_heads = ML_DELTA_MAX_HEADS, bad.k_dim = bad.v_dim = ML_DELTA_MAX_HEAD_DIM;
  bad.conv = ML_DELTA_MAX_CONV;
  CHECK(ml_delta_check(&bad, &err) == ML_OK);
}

TEST_CASE("delta: matches a double reference (GQA 1 to 3, conv 1 to 4, interleaved sequences)", "[delta]") {
  const Shape shapes[] = {{1, 1, 4, 4, 4}, {2, 4, 16, 8, 4}, {2, 6, 8, 12, 3},
                          {3, 3, 5, 7, 2}, {2, 2, 8, 8, 1},  {4, 8, 32, 32, 4}};
  Pools pools;
  uint64_t seed = 1;
  for (const Shape& h : shapes)
    for (ml_pool* pool : pools.p) {
      INFO(name(h) << " threads " << ml_pool_size(pool));
      Rng r(seed++);
      const Layer L(h, r);
      const Inputs in(L, 24, 2, r);
      const Run run = run_op(pool, L, in, 2, random_batches(in.n, 8, r));
      check_against_reference(L, in, 2, run);
    }
}

TEST_CASE("delta: a 150-token sequence of Qwen3.5's head size matches the reference", "[delta]") {
  Pools pools;
  Rng r(77);
  const Layer L({8, 16, 128, 128, 4}, r);
  const Inputs in(L, 150, 1, r);
  const Run run = run_op(pools.p.back(), L, in, 1, random_batches(in.n, 32, r));
  check_against_reference(L, in, 1, run);
}

TEST_CASE("delta: outputs and states are bit-identical on 1 or 3 threads and for any batch split", "[delta]") {
  // Qwen3.5 0.8B's shape; 7 tokens (the update crosses ML_PARALLEL_MIN_MACS even for one token)
  // and 48 (the convolution crosses it too), of three sequences interleaved.
  Pools pools;
  for (int n_tok : {7, 48}) {
    Rng r(100 + n_tok);
    const Layer L({16, 16, 128, 128, 4}, r);
    const Inputs in(L, n_tok, 3, r);
    const Run base = run_op(pools.p[0], L, in, 3, {n_tok});
    std::vector<std::vector<int>> splits = {{n_tok}, std::vector<int>(n_tok, 1), random_batches(n_tok, 5, r)};
    for (ml_pool* pool : pools.p)
      for (const auto& split : splits) {
        INFO(n_tok << " tokens, threads " << ml_pool_size(pool) << ", " << split.size() << " batches");
        const Run x = run_op(pool, L, in, 3, split);
        CHECK(std::memcmp(x.out.data(), base.out.data(), x.out.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(x.conv_out.data(), base.conv_out.data(), x.conv_out.size() * sizeof(float)) == 0);
        for (int s = 0; s < 3; ++s)
          CHECK(std::memcmp(x.mem[s].data(), base.mem[s].data(), x.mem[s].size() * sizeof(float)) == 0);
      }
    // The output may overwrite z in place.
    const Run inplace = run_op(pools.p.back(), L, in, 3, {n_tok}, true);
    CHECK(std::memcmp(inplace.out.data(), base.out.data(), base.out.size() * sizeof(float)) == 0);
  }
}
