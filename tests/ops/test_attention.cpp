// test_attention: ml_op_kv_store and ml_op_attention (src/ops/attention.h) against a
// double-precision reference written here, for F32, Q8 and F16 caches, GQA ratios 1, 2, 4, 8,
// head_dim 8, 16, 64, positions on both sides of the 64-position block and sliding windows; and
// batch invariance: a token's output is bit-identical alone, inside a batch of tokens from two
// caches (two sessions) at other positions, and on 1, 2 or 3 threads.
//
// What is emulated, and so compared exactly:
//   - the cache contents after ml_op_kv_store, bit for bit: F32 copied, F16 through the core's
//     half conversion (core/half.h, the storage rule), Q8 one scale per (position, KV head) with
//     the activation rounding rule of core/quant_ref.h, re-implemented below;
//   - the reference then reads this emulated cache (dequantized, in double) and, for Q8, the query
//     quantized per head by the same rule, as group_attention does.
// Tolerance (spec/testing.txt: "relative 1e-5 of the sum of term magnitudes"): per output element,
//   |out - ref| <= 1e-5 * (1 + S) * sum_j w_j |v_j|
// where w_j are the reference softmax weights and S = max_j scale * sum_i |q_i k_ji| is the
// largest magnitude sum of a score. The float32 V sum errs by a few ulps of sum_j w_j |v_j|; the
// float32 scores err by a few ulps of S, which exp turns into a relative error of the weights of
// the same size, hence the factor (1 + S) (S is at most 64 here: |q| <= 2, |k| <= 4; about 20 seen).
// Poison: cache positions not yet stored (and, with a window, those before it) hold NaN (Q8:
// NaN scales), as do the scratch, the padding of q and the guard bytes of out, so a read past
// the allowed positions, or a write past a row, shows up.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/threads.h"
#include "core/types.h"  // ML_QUANT_TINY
#include "ops/attention.h"
#include "ops/parallel.h"

namespace {

constexpr double kTol = 1e-5;
constexpr uint32_t kPoisonBits = 0x7FC0DEADu;  // a quiet NaN with a recognisable payload
constexpr uint16_t kPoisonHalf = 0x7E00u;      // half NaN

float poison_f32() {
  float f;
  std::memcpy(&f, &kPoisonBits, 4);
  return f;
}

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
};

const char* type_name(ml_kv_type t) { return t == ML_KV_F32 ? "f32" : t == ML_KV_Q8 ? "q8" : "f16"; }

// The Q8 row rule of core/quant_ref.h, written out again: amax = max |x|; below ML_QUANT_TINY all
// zero with d = 0; else d = amax / 127, id = 127 / amax, q = clamp(trunc(x * id + copysign(0.5, x)),
// -127, 127), multiply then add (the build has -ffp-contract=off).
void emu_row_q8(int8_t* q, float* d, const float* x, int n) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::fabs(x[i]) > amax ? std::fabs(x[i]) : amax;
  if (!(amax >= ML_QUANT_TINY)) {
    for (int i = 0; i < n; ++i) q[i] = 0;
    *d = 0.0f;
    return;
  }
  const float id = 127.0f / amax;
  *d = amax / 127.0f;
  for (int i = 0; i < n; ++i) {
    float t = x[i] * id;
    t = t + std::copysign(0.5f, x[i]);
    int v = (int)t;
    q[i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
  }
}

// One layer cache of one sequence, owning its storage, plus the emulated dequantized contents
// (what the reference reads).
struct TestCache {
  ml_kv_type type;
  int ctx, n_kv, hd, kv_dim;
  std::vector<float> kf, vf;     // F32
  std::vector<uint16_t> kh, vh;  // F16
  std::vector<int8_t> kq, vq;    // Q8 quants
  std::vector<float> ks, vs;     // Q8 scales [n_kv][ctx]
  std::vector<double> kd, vd;    // emulated dequantized K, V [ctx][kv_dim] (the logical order)
  ml_kv_layer L;

  TestCache(ml_kv_type t, int ctx_, const ml_attn_shape& s)
      : type(t), ctx(ctx_), n_kv(s.n_kv_heads), hd(s.head_dim), kv_dim(s.n_kv_heads * s.head_dim) {
    const size_t n = (size_t)ctx * kv_dim;
    kd.assign(n, 0.0);
    vd.assign(n, 0.0);
    L.type = t;
    L.ctx = ctx;
    switch (t) {
      case ML_KV_F32:
        kf.resize(n);
        vf.resize(n);
        L.k = kf.data();
        L.v = vf.data();
        break;
      case ML_KV_F16:
        kh.resize(n);
        vh.resize(n);
        L.k = kh.data();
        L.v = vh.data();
        break;
      case ML_KV_Q8:
        kq.resize(n);
        vq.resize(n);
        ks.resize((size_t)ctx * n_kv);
        vs.resize((size_t)ctx * n_kv);
        L.k = kq.data();
        L.v = vq.data();
        L.k_scale = ks.data();
        L.v_scale = vs.data();
        break;
    }
    for (int p = 0; p < ctx; ++p) poison(p);
  }

  // Where KV head h of position p is stored, written out independently of ml_kv_row: head-major,
  // [n_kv][ctx][hd]; its Q8 scale at h * ctx + p.
  size_t at(int p, int h) const { return ((size_t)h * ctx + p) * hd; }
  size_t scale_at(int p, int h) const { return (size_t)h * ctx + p; }

  // Makes position p unreadable: NaN values (Q8: NaN scales).
  void poison(int p) {
    for (int h = 0; h < n_kv; ++h) {
      const size_t r = at(p, h);
      for (int i = 0; i < hd; ++i) {
        if (type == ML_KV_F32) kf[r + i] = vf[r + i] = poison_f32();
        if (type == ML_KV_F16) kh[r + i] = vh[r + i] = kPoisonHalf;
        if (type == ML_KV_Q8) kq[r + i] = vq[r + i] = 0x55;
      }
      if (type == ML_KV_Q8) ks[scale_at(p, h)] = vs[scale_at(p, h)] = poison_f32();
    }
  }

  // Stores k, v at p through ml_op_kv_store, records the emulated contents and returns whether
  // the stored row equals the emulation bit for bit.
  bool store(const ml_attn_shape& s, int p, const float* k, const float* v) {
    ml_op_kv_store(&L, &s, p, k, v);
    const size_t r = (size_t)p * kv_dim;  // the logical row (kd, vd, k, v)
    bool same = true;
    std::vector<int8_t> qk(hd), qv(hd);
    for (int h = 0; h < n_kv; ++h) {
      const size_t o = at(p, h), lo = r + (size_t)h * hd, kvo = (size_t)h * hd;
      switch (type) {
        case ML_KV_F32:
          same = same && std::memcmp(&kf[o], k + kvo, hd * 4) == 0 && std::memcmp(&vf[o], v + kvo, hd * 4) == 0;
          for (int i = 0; i < hd; ++i) kd[lo + i] = k[kvo + i], vd[lo + i] = v[kvo + i];
          break;
        case ML_KV_F16:
          for (int i = 0; i < hd; ++i) {
            const uint16_t hk = ml_float_to_half(k[kvo + i]), hv = ml_float_to_half(v[kvo + i]);
            same = same && kh[o + i] == hk && vh[o + i] == hv;
            kd[lo + i] = ml_half_to_float(hk), vd[lo + i] = ml_half_to_float(hv);
          }
          break;
        case ML_KV_Q8: {
          float dk, dv;
          emu_row_q8(qk.data(), &dk, k + kvo, hd);
          emu_row_q8(qv.data(), &dv, v + kvo, hd);
          const size_t si = scale_at(p, h);
          same = same && std::memcmp(&kq[o], qk.data(), hd) == 0 && std::memcmp(&vq[o], qv.data(), hd) == 0 &&
                 std::memcmp(&ks[si], &dk, 4) == 0 && std::memcmp(&vs[si], &dv, 4) == 0;
          for (int i = 0; i < hd; ++i) kd[lo + i] = (double)qk[i] * dk, vd[lo + i] = (double)qv[i] * dv;
          break;
        }
      }
    }
    return same;
  }
};

// Random k, v rows for one position: k in [-2, 2] and v in [-1, 1], each KV head scaled by its own
// factor (k by [0.5, 2], v by [0.25, 4]), so Q8 scales differ per (position, KV head).
void random_kv(Rng& rng, const ml_attn_shape& s, std::vector<float>& k, std::vector<float>& v) {
  const int hd = s.head_dim;
  k.resize((size_t)s.n_kv_heads * hd);
  v.resize(k.size());
  for (int h = 0; h < s.n_kv_heads; ++h) {
    const float fk = rng.uni(0.5f, 2.0f), fv = rng.uni(0.25f, 4.0f);
    for (int i = 0; i < hd; ++i) {
      k[(size_t)h * hd + i] = fk * rng.uni(-2.0f, 2.0f);
      v[(size_t)h * hd + i] = fv * rng.uni(-1.0f, 1.0f);
    }
  }
}

void fill_cache(TestCache& c, const ml_attn_shape& s, Rng& rng, int n_pos) {
  std::vector<float> k, v;
  for (int p = 0; p < n_pos; ++p) {
    random_kv(rng, s, k, v);
    c.store(s, p, k.data(), v.data());
  }
}

// The reference for one token: out[h*hd + i] = sum_j w_j v_j[i] over j in [first, pos], with
// w = softmax_j(scale * q_h . k_j) in double over the emulated cache; mag[.] = sum_j w_j |v_j[i]|
// and smax = max_j scale * sum_i |q_h[i] k_j[i]| (the tolerance's terms).
void reference(const TestCache& c, const ml_attn_shape& s, const float* q, int pos, std::vector<double>& out,
               std::vector<double>& mag, double& smax) {
  const int hd = s.head_dim, group = s.n_heads / s.n_kv_heads;
  const int first = s.window > 0 && pos - s.window + 1 > 0 ? pos - s.window + 1 : 0;
  const int n = pos + 1 - first;
  out.assign((size_t)s.n_heads * hd, 0.0);
  mag.assign(out.size(), 0.0);
  smax = 0.0;
  std::vector<double> qh(hd), sc(n);
  std::vector<int8_t> qq(hd);
  for (int h = 0; h < s.n_heads; ++h) {
    const int kvh = h / group;
    const float* qf = q + (size_t)h * hd;
    if (c.type == ML_KV_Q8) {
      float d;
      emu_row_q8(qq.data(), &d, qf, hd);
      for (int i = 0; i < hd; ++i) qh[i] = (double)qq[i] * d;
    } else {
      for (int i = 0; i < hd; ++i) qh[i] = qf[i];
    }
    double mx = -INFINITY;
    for (int j = 0; j < n; ++j) {
      const double* kj = &c.kd[(size_t)(first + j) * c.kv_dim + (size_t)kvh * hd];
      double dot = 0.0, abs_sum = 0.0;
      for (int i = 0; i < hd; ++i) dot += qh[i] * kj[i], abs_sum += std::fabs(qh[i] * kj[i]);
      sc[j] = (double)s.scale * dot;
      smax = std::fmax(smax, (double)s.scale * abs_sum);
      mx = std::fmax(mx, sc[j]);
    }
    double sum = 0.0;
    for (int j = 0; j < n; ++j) sum += (sc[j] = std::exp(sc[j] - mx));
    for (int j = 0; j < n; ++j) {
      const double w = sc[j] / sum;
      const double* vj = &c.vd[(size_t)(first + j) * c.kv_dim + (size_t)kvh * hd];
      for (int i = 0; i < hd; ++i) {
        out[(size_t)h * hd + i] += w * vj[i];
        mag[(size_t)h * hd + i] += w * std::fabs(vj[i]);
      }
    }
  }
}

// The largest |out - ref| / ((1 + smax) * mag) over a token's row (infinite if not finite).
double rel_err(const float* out, const std::vector<double>& ref, const std::vector<double>& mag, double smax) {
  double worst = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(out[i])) return INFINITY;
    const double e = std::fabs((double)out[i] - ref[i]);
    if (e == 0.0) continue;
    worst = std::fmax(worst, e / ((1.0 + smax) * mag[i]));
  }
  return worst;
}

// Per-thread scratch, poisoned, with a per-head stride larger than any context used.
struct Scratch {
  std::vector<float> scores, qd;
  std::vector<int8_t> qq;
  ml_attn_scratch sc;
  Scratch(int n_threads, const ml_attn_shape& s, int ctx) {
    const int group = s.n_heads / s.n_kv_heads;
    scores.assign((size_t)n_threads * group * ctx, poison_f32());
    qq.assign((size_t)n_threads * group * s.head_dim, 0x55);
    qd.assign((size_t)n_threads * group, poison_f32());
    sc = {scores.data(), qq.data(), qd.data(), ctx};
  }
};

// Output rows with a padded stride, poisoned: only [n_heads * head_dim] of each row may change.
struct OutRows {
  int ld, width, n;
  std::vector<float> buf;
  OutRows(int n_tokens, int w) : ld(w + 3), width(w), n(n_tokens), buf((size_t)n_tokens * (w + 3) + 5, poison_f32()) {}
  float* row(int t) { return buf.data() + (size_t)t * ld; }
  bool guards_intact() const {
    for (size_t i = 0; i < buf.size(); ++i) {
      if (i < (size_t)n * ld && (int)(i % ld) < width) continue;
      if (std::memcmp(&buf[i], &kPoisonBits, 4) != 0) return false;
    }
    return true;
  }
};

// Query rows with a padded stride; the padding is NaN.
std::vector<float> random_q(Rng& rng, int n_tokens, int width, int ldq) {
  std::vector<float> q((size_t)n_tokens * ldq, poison_f32());
  for (int t = 0; t < n_tokens; ++t)
    for (int i = 0; i < width; ++i) q[(size_t)t * ldq + i] = rng.uni(-2.0f, 2.0f);
  return q;
}

// Decodes positions 0..max(at) into a fresh cache, one store per position; at each position of
// `at` runs ml_op_attention for one token and checks it against the reference. With a window,
// positions before it are poisoned first.
void check_decode(ml_kv_type type, int ratio, int hd, int window, std::initializer_list<int> at) {
  const int n_kv = 2;
  ml_attn_shape s{ratio * n_kv, n_kv, hd, 1.0f / std::sqrt((float)hd), window};
  int last = 0;
  for (int p : at) last = p > last ? p : last;
  const int width = s.n_heads * hd, ldq = width + 5;
  TestCache c(type, last + 1, s);
  Scratch scr(1, s, last + 4);
  Rng rng(1000003u * (unsigned)type + 10007u * ratio + 101u * hd + (unsigned)window);
  std::vector<float> k, v;
  std::vector<double> ref, mag;
  int store_mismatches = 0;
  for (int p = 0; p <= last; ++p) {
    random_kv(rng, s, k, v);
    store_mismatches += !c.store(s, p, k.data(), v.data());
    if (window > 0)
      for (int j = 0; j <= p - window; ++j) c.poison(j);
    bool wanted = false;
    for (int a : at) wanted = wanted || a == p;
    if (!wanted) continue;
    const std::vector<float> q = random_q(rng, 1, width, ldq);
    OutRows out(1, width);
    const ml_kv_layer* caches[] = {&c.L};
    ml_op_attention(nullptr, out.row(0), out.ld, q.data(), ldq, 1, &p, caches, &s, &scr.sc);
    double smax;
    reference(c, s, q.data(), p, ref, mag, smax);
    const double err = rel_err(out.row(0), ref, mag, smax);
    INFO(type_name(type) << " cache, n_heads " << s.n_heads << " n_kv_heads " << n_kv << " head_dim " << hd
                         << " window " << window << " pos " << p << ": error " << err << " of (1 + S) * sum w|v|");
    CHECK(err <= kTol);
    CHECK(out.guards_intact());
  }
  INFO(type_name(type) << " cache, n_heads " << s.n_heads << " head_dim " << hd);
  CHECK(store_mismatches == 0);
}

constexpr ml_kv_type kTypes[] = {ML_KV_F32, ML_KV_Q8, ML_KV_F16};

}  // namespace

TEST_CASE("attention: kv_store and attention match a double reference (F32 Q8 F16 caches, GQA 1 to 8)",
          "[attention]") {
  for (ml_kv_type type : kTypes)
    for (int ratio : {1, 2, 4, 8})
      for (int hd : {8, 16, 64}) check_decode(type, ratio, hd, 0, {0, 1, 63, 64, 65, 130, 200});
}

TEST_CASE("attention: a window attends to only the last window positions", "[attention]") {
  for (ml_kv_type type : kTypes)
    for (int ratio : {1, 4})
      for (int window : {1, 17, 64, 100})
        check_decode(type, ratio, 16, window, {0, 1, 16, 17, 63, 64, 65, 100, 101, 130, 200});
}

TEST_CASE("attention: a token's output is bit-identical alone, in a batch of two caches, on 1 to 3 threads",
          "[attention]") {
  const int ctx = 320;
  struct Tok {
    int cache, pos;
  };
  const Tok toks[] = {{0, 300}, {1, 299}, {0, 64}, {1, 0}, {0, 130}, {1, 257}, {0, 63}};
  const int n_tok = (int)(sizeof toks / sizeof toks[0]);
  std::vector<ml_pool*> pools = {nullptr};
  for (int n : {1, 2, 3}) {
    if (n > 1 && !ml_pool_threads_built()) continue;  // the single-threaded wasm build
    ml_pool* p = nullptr;
    ml_error err;
    REQUIRE(ml_pool_create(&p, n, &err) == ML_OK);
    pools.push_back(p);
  }
  for (ml_kv_type type : kTypes)
    for (int window : {0, 100}) {
      ml_attn_shape s{16, 4, 64, 0.125f, window};
      const int width = s.n_heads * s.head_dim, ldq = width + 5;
      // The op's own measure of work (2 * heads * positions * head_dim): the batch always splits
      // across the pool, and without a window so does the first token alone.
      auto macs = [&](int p) { return 2.0 * s.n_heads * (p + 1 - ml_attn_first(p, window)) * s.head_dim; };
      double batch_macs = 0;
      for (const Tok& t : toks) batch_macs += macs(t.pos);
      REQUIRE(batch_macs >= ML_PARALLEL_MIN_MACS);
      if (window == 0) REQUIRE(macs(toks[0].pos) >= ML_PARALLEL_MIN_MACS);
      Rng rng(77u + 3u * (unsigned)type + (unsigned)window);
      TestCache a(type, ctx, s), b(type, ctx, s);
      fill_cache(a, s, rng, ctx);
      fill_cache(b, s, rng, ctx);
      const TestCache* tc[] = {&a, &b};
      const std::vector<float> q = random_q(rng, n_tok, width, ldq);
      std::vector<int> pos(n_tok);
      std::vector<const ml_kv_layer*> caches(n_tok);
      for (int t = 0; t < n_tok; ++t) pos[t] = toks[t].pos, caches[t] = &tc[toks[t].cache]->L;
      Scratch scr(3, s, ctx + 1);

      // Each token alone, one thread: the baseline, itself checked against the reference.
      OutRows alone(n_tok, width);
      for (int t = 0; t < n_tok; ++t) {
        ml_op_attention(nullptr, alone.row(t), alone.ld, q.data() + (size_t)t * ldq, ldq, 1, &pos[t], &caches[t], &s,
                        &scr.sc);
        std::vector<double> ref, mag;
        double smax;
        reference(*tc[toks[t].cache], s, q.data() + (size_t)t * ldq, pos[t], ref, mag, smax);
        INFO(type_name(type) << " cache, window " << window << ", token " << t << " at pos " << pos[t]);
        CHECK(rel_err(alone.row(t), ref, mag, smax) <= kTol);
      }
      CHECK(alone.guards_intact());

      for (ml_pool* pool : pools) {
        const int nt = ml_pool_size(pool);
        INFO(type_name(type) << " cache, window " << window << ", " << nt << " thread(s)"
                             << (pool ? "" : " (null pool)"));
        int differ = 0;
        // Alone again, on this pool (the first token's work alone exceeds ML_PARALLEL_MIN_MACS).
        for (int t = 0; t < n_tok; ++t) {
          OutRows o(1, width);
          ml_op_attention(pool, o.row(0), o.ld, q.data() + (size_t)t * ldq, ldq, 1, &pos[t], &caches[t], &s, &scr.sc);
          differ += std::memcmp(o.row(0), alone.row(t), (size_t)width * 4) != 0;
        }
        // The whole batch, both caches interleaved.
        OutRows all(n_tok, width);
        ml_op_attention(pool, all.row(0), all.ld, q.data(), ldq, n_tok, pos.data(), caches.data(), &s, &scr.sc);
        for (int t = 0; t < n_tok; ++t) differ += std::memcmp(all.row(t), alone.row(t), (size_t)width * 4) != 0;
        CHECK(all.guards_intact());
        // The batch in reverse order: other tokens, other threads around each one.
        std::vector<int> rpos(pos.rbegin(), pos.rend());
        std::vector<const ml_kv_layer*> rcaches(caches.rbegin(), caches.rend());
        std::vector<float> rq((size_t)n_tok * ldq);
        for (int t = 0; t < n_tok; ++t)
          std::memcpy(&rq[(size_t)t * ldq], &q[(size_t)(n_tok - 1 - t) * ldq], (size_t)ldq * 4);
        OutRows rev(n_tok, width);
        ml_op_attention(pool, rev.row(0), rev.ld, rq.data(), ldq, n_tok, rpos.data(), rcaches.data(), &s, &scr.sc);
        for (int t = 0; t < n_tok; ++t)
          differ += std::memcmp(rev.row(n_tok - 1 - t), alone.row(t), (size_t)width * 4) != 0;
        CHECK(differ == 0);
      }
    }
  for (ml_pool* p : pools) ml_pool_destroy(p);
}
