// The amx packed matmul's variants timed in one process, interleaved round by round (the device
// machines are shared and drift by 10-25% within a minute), single thread, against avx512vnni's
// packed matmul on the same packed matrix: GOPS per variant and shape, and whether its output
// equals avx512vnni's bit for bit (exit 1 when a variant that must keep the bits does not). Usage:
// amx_variants [TOKENS=64] [ROUNDS=3] [MIN_S=0.02] [small]
// ("small": two tiny shapes, for the -DEMU build on a CPU without AMX). See README.md.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/pack.h"
#include "core/quant_ref.h"
#include "kernels/bind.h"

typedef void matmul_fn(int q4, float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1);
extern "C" {
#define V(name, exact) matmul_fn name;
#include "variants.inc"  // written by build.sh from variants.txt
#undef V
void ml_k_matmul_q8_pk_avx512vnni(float*, int, const ml_qtensor*, const ml_qbatch*, int, int);
void ml_k_matmul_q4_pk_avx512vnni(float*, int, const ml_qtensor*, const ml_qbatch*, int, int);
}

namespace {

void vnni(int q4, float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1) {
  if (q4) ml_k_matmul_q4_pk_avx512vnni(Y, ldy, W, X, r0, r1);
  else ml_k_matmul_q8_pk_avx512vnni(Y, ldy, W, X, r0, r1);
}

struct Variant {
  const char* name;
  matmul_fn* fn;
  bool exact;  // must give avx512vnni's output bit for bit (not a timing-only variant)
};
const Variant kVariants[] = {
    {"vnni", vnni, true},
#define V(name, exact) {#name, name, exact},
#include "variants.inc"
#undef V
};
constexpr int kNv = sizeof kVariants / sizeof kVariants[0];

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

uint64_t g_state = 88172645463325252ull;
float frand() {  // xorshift64, uniform in [-1, 1)
  g_state ^= g_state << 13;
  g_state ^= g_state >> 7;
  g_state ^= g_state << 17;
  return (float)((double)(g_state >> 11) / 9007199254740992.0) * 2 - 1;
}

// A random Q8/Q4 matrix with f16 scales (as ml_convert random --scales f16), packed as the
// build's packed kernels read it; the row-major copy stays in the vectors.
struct Matrix {
  std::vector<uint8_t> q;
  std::vector<uint16_t> d;
  ml_qtensor t{};
  void* pq = nullptr;
  void* pd = nullptr;
  Matrix(int rows, int cols, bool q4) : q((size_t)rows * cols), d((size_t)rows * cols / 32) {
    std::vector<float> w(cols), s(cols / 32);
    for (int r = 0; r < rows; ++r) {
      for (float& x : w) x = frand();
      if (q4) ml_quantize_q4_ref(q.data() + (size_t)r * cols / 2, s.data(), w.data(), cols);
      else ml_quantize_q8_ref(reinterpret_cast<int8_t*>(q.data()) + (size_t)r * cols, s.data(), w.data(), cols);
      for (int b = 0; b < cols / 32; ++b) d[(size_t)r * cols / 32 + b] = _cvtss_sh(s[b], 0);
    }
    t.type = q4 ? ML_DT_Q4 : ML_DT_Q8;
    t.q = q.data();
    t.d = d.data();
    t.d_f16 = 1;
    t.rows = rows;
    t.cols = cols;
    const ml_pack_params p = ml::k::active::pack;
    size_t qb = 0, db = 0;
    ml_pack_sizes(t.type, rows, cols, true, &p, &qb, &db);
    // 4 KB of zeros past each array: the k64 variant's tile loads read one block beyond the end.
    pq = std::calloc(qb + 4096, 1);
    pd = std::calloc(db + 4096, 1);
    ml_pack_matrix(&t, &p, pq, pd);
  }
  ~Matrix() {
    std::free(pq);
    std::free(pd);
  }
};

}  // namespace

int main(int argc, char** argv) {
#ifndef EMU
  if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */)) {
    perror("amx_variants: arch_prctl(ARCH_REQ_XCOMP_PERM): no AMX tile data here");
    return 3;
  }
#endif
  const int nt = argc > 1 ? std::atoi(argv[1]) : 64;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  const double min_s = argc > 3 ? std::atof(argv[3]) : 0.02;
  struct Shape {
    int rows, cols;
  };
  // d2048's q/o, gate/up and down; Qwen2.5-0.5B's q/o, k/v, gate/up and down.
  std::vector<Shape> shapes = {{2048, 2048}, {5632, 2048}, {2048, 5632}, {896, 896},
                               {128, 896},   {4864, 896},  {896, 4864}};
  if (argc > 4) shapes = {{64, 256}, {48, 2080}};
  std::printf("%d tokens, best of %d interleaved rounds of >= %.0f ms; GOPS = 2 rows cols tokens / s\n", nt, rounds,
              min_s * 1e3);
  std::printf("%-5s %-11s", "quant", "rows x cols");
  for (const Variant& v : kVariants) std::printf(" %9s", v.name);
  std::printf("\n");
  double log_ratio[kNv] = {};
  int n_cases = 0, n_wrong = 0;
  for (int q4 = 0; q4 < 2; ++q4)
    for (const Shape& s : shapes) {
      Matrix m(s.rows, s.cols, q4);
      std::vector<int8_t> xq((size_t)nt * s.cols + 4096);  // + a block beyond, as above
      std::vector<float> xd((size_t)nt * s.cols / 32), x(s.cols);
      for (int t = 0; t < nt; ++t) {
        for (float& v : x) v = frand();
        ml_quantize_q8_ref(xq.data() + (size_t)t * s.cols, xd.data() + (size_t)t * s.cols / 32, x.data(), s.cols);
      }
      ml_qbatch X;
      X.q = xq.data();
      X.d = xd.data();
      X.n = s.cols;
      X.n_tokens = nt;
      std::vector<std::vector<float>> Y(kNv, std::vector<float>((size_t)nt * s.rows));
      double best[kNv];
      std::fill(best, best + kNv, 1e30);
      for (int r = 0; r < rounds; ++r)
        for (int i = 0; i < kNv; ++i) {
          const int v = r % 2 ? kNv - 1 - i : i;  // odd rounds in reverse order
          long calls = 0;
          const double t0 = now();
          double t1;
          do {
            kVariants[v].fn(q4, Y[v].data(), s.rows, &m.t, &X, 0, s.rows);
            ++calls;
            t1 = now();
          } while (t1 - t0 < min_s);
          best[v] = std::min(best[v], (t1 - t0) / (double)calls);
        }
      std::printf("%-5s %5dx%-5d", q4 ? "Q4" : "Q8", s.rows, s.cols);
      for (int v = 0; v < kNv; ++v) {
        const bool exact = std::memcmp(Y[v].data(), Y[0].data(), Y[0].size() * sizeof(float)) == 0;
        std::printf(" %8.0f%s", 2.0 * s.rows * s.cols * nt / best[v] / 1e9, exact ? " " : "*");
        if (!exact && kVariants[v].exact) ++n_wrong;
        log_ratio[v] += std::log(best[0] / best[v]);
      }
      std::printf("\n");
      ++n_cases;
    }
  std::printf("%-17s", "geomean vs vnni");
  for (int v = 0; v < kNv; ++v) std::printf(" %9.3f", std::exp(log_ratio[v] / n_cases));
  std::printf("\n* = output differs from avx512vnni's (expected only of the timing-only variants)\n");
  if (n_wrong) std::printf("FAILED: %d outputs of variants that must keep the bits differ\n", n_wrong);
  return n_wrong ? 1 : 0;
}
