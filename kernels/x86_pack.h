// The packed matvec/matmul of the 256- and 512-bit x86 ISAs (avx2, avxvnni, avx512vnni), written
// once over a traits type V that supplies the vector width (V::G rows per group, one 32-bit lane
// per row) and the ISA's integer step. Include it only from a kernels/<isa>/matvec_pk.cpp, which
// defines V and the four extern "C" functions (x86_pack_entry below). Layout: core/pack.h with the
// ISA's ml_pack_params (G = 8 or 16, Q8 offset 0 or 128, Q4 raw nibbles, f32 or f16 scales).
//
// Contract (kernels/ops.h): r0 a multiple of G, any r1 <= rows; rows outside [r0, r1) never
// written; unaligned loads; no allocation, no global state.
//
// One step (4 bytes of each of the G rows, one vector) is dotted against the token's 4 activation
// bytes broadcast to every lane (vpbroadcastd from memory). V supplies:
//   q8_prep(w)                 per-step weight work shared by every token of a tile
//   q8_step(acc, wp, w, x)     acc += the step's 4 products per lane, exact int32
//   q4_start(init) / q4_step(acc, lo, hi, xlo, xhi) / q4_finish(acc, init)
// Where the weights are offset (VNNI Q8: q + 128, unsigned for vpdpbusd) or raw nibbles (Q4:
// 0..15, value + 8), the block's int32 sum starts from -offset * sum(x) (exact), computed once per
// call and token into a stack array; so the sum of a block is exactly scalar's isum.
//
// Rounding: per block, acc[lane] = acc + (float)isum * (d_w * d_x), blocks in order, no FMA: the
// scalar row-major kernel's operations, so y is bit-identical to ml_k_matvec_q*_scalar for any
// scales (f16 scales are widened exactly by vcvtph2ps). The matmul runs the same tile with
// T = 1..V::TILE tokens (a template per count, so the accumulators stay in registers), each step
// loaded once for all T tokens and the same float operations per token: every column equals the
// packed matvec bit for bit.
//
// Columns are taken in chunks of kOffInts / T blocks (the offsets array); a group's float
// accumulators live in y between chunks (an exact store and reload), those of a partial last
// group in a local array.
//
// Prefetch (ML_PREFETCH, CMake option ML_USE_PREFETCH): hardware prefetchers stop at 4 KB page
// boundaries (spec/architecture.txt, "Prefetch"), so the kernels request the weight stream
// ML_PREFETCH_DIST bytes ahead, in one of two ways (Prefetch below):
//   lines      every quant line of each block and its scales (the matmul always; the matvec on
//              Intel and on AMD before Zen 5, except avx512vnni's Q8 matvec on those AMD CPUs,
//              V::kQ8PrefetchOnAmd: on Zen 4 the prefetches cost that stream 8-12% of decode);
//   page kick  only the first line of each 4 KB page of quants, and of scales, as the stream
//              reaches it: the matvec on AMD Zen 5 and later (CPU family >= 26), where it decoded
//              13-60% faster than either lines or none (docs/benchmarks.md). The prefetcher then
//              follows the page on its own. It kicked 4 lines until 2026-12-05; one line won 23
//              of 24 alternated runs against 4, by a median of 8 points of a read probe taken
//              after every token.
// The choice is read once by CPUID (cpu_matvec_prefetch). Prefetching changes no result: every
// way gives the same bits.
#pragma once
#include <cstring>

#include "core/isa_check.h"
#include "core/pack.h"
#include "kernels/x86_avx.h"

#ifndef ML_PREFETCH
#define ML_PREFETCH 0
#endif

namespace ml::k::x86pk {

inline constexpr int ML_PREFETCH_DIST = 4096;  // bytes of the weight stream ahead
inline constexpr int kOffInts = 512;           // int32 block offsets per chunk (tokens x blocks): 2 KB

static inline void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }

inline constexpr uintptr_t kPage = 4096;  // the page the hardware prefetcher does not leave
inline constexpr int kKickLines = 1;       // lines a page kick requests (1, 2, 4 and 8 timed on Zen 5)

// Page kick: the first `lines` cache lines of the page holding address a.
template <int lines>
static inline void kick_page(uintptr_t a) {
  const uint8_t* page = reinterpret_cast<const uint8_t*>(a & ~(kPage - 1));
#pragma GCC unroll 4
  for (int l = 0; l < lines; ++l) prefetch(page + 64 * l);
}

// How a kernel prefetches the weight stream (the header's Prefetch).
enum class Prefetch { none, lines, page_kick };

// The packed matvec's prefetch on this CPU, from the vendor and family read once by CPUID
// (core/isa_check.h): the one fact a kernel here takes from outside its arguments, and it changes
// only timing. q8_lines_on_old_amd: V::kQ8PrefetchOnAmd for a Q8 matvec, true for Q4.
static inline Prefetch cpu_matvec_prefetch(bool q8_lines_on_old_amd) {
  enum class Cpu { other, amd_before_zen5, amd_zen5_on };
  static const Cpu cpu = [] {
    const ml_cpuid_regs r = ml_cpuid_read();
    if (!ml_cpuid_amd(&r)) return Cpu::other;
    return ml_cpuid_family(&r) >= 26 ? Cpu::amd_zen5_on : Cpu::amd_before_zen5;
  }();
  if (cpu == Cpu::amd_zen5_on) return Prefetch::page_kick;
  if (cpu == Cpu::amd_before_zen5 && !q8_lines_on_old_amd) return Prefetch::none;
  return Prefetch::lines;
}

static inline int32_t load4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Sum of the 32 quants of a block (exact).
static inline int32_t block_sum(const int8_t* p) {
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), x);  // pairs: |.| <= 254
  return x86::hsum_i32(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)));
}

// Unroll a block's steps fully for one token (few live registers), not for a tile, where GCC
// would reassociate the integer sums into trees that spill.
#define ML_PK_STEPS(n, step)                                              \
  if constexpr (T == 1) {                                                 \
    _Pragma("GCC unroll 8") for (int k_ = 0; k_ < (n); ++k_) step(k_);    \
  } else {                                                                \
    _Pragma("GCC unroll 2") for (int k_ = 0; k_ < (n); ++k_) step(k_);    \
  }

// nblk blocks of one group for T tokens. wq: the group's first block (of the chunk); wd: its
// scales; xq[t]/xd[t]: token t's quants/scales at the chunk's first block; off[t * ostride + b]:
// the offset of block b of token t. acc[t] lane i += row i's terms.
template <class V, int T, bool Q4, bool F16, Prefetch PF>
inline void group_blocks(typename V::vf acc[T], const uint8_t* wq, const void* wd, const int8_t* const xq[T],
                         const float* const xd[T], const int32_t* off, int ostride, int nblk) {
  using vi = typename V::vi;
  using vf = typename V::vf;
  constexpr int G = V::G;
  constexpr int block_bytes = (Q4 ? 16 : 32) * G;
  [[maybe_unused]] constexpr int scale_bytes = F16 ? 2 * G : 4 * G;  // prefetch only
  constexpr bool use_off = Q4 || V::kQ8Offset != 0;
  for (int b = 0; b < nblk; ++b) {
    const uint8_t* wb = wq + (size_t)b * block_bytes;
    if constexpr (PF == Prefetch::lines) {
#pragma GCC unroll 8
      for (int l = 0; l < block_bytes; l += 64) prefetch(wb + ML_PREFETCH_DIST + l);
      prefetch(static_cast<const uint8_t*>(wd) + (size_t)b * scale_bytes + ML_PREFETCH_DIST * scale_bytes / block_bytes);
    } else if constexpr (PF == Prefetch::page_kick) {
      // The block whose prefetch target enters a new page kicks that page's first lines; the
      // scales (a slower stream) 256 bytes ahead of their own, the same way.
      const uintptr_t ahead = reinterpret_cast<uintptr_t>(wb) + ML_PREFETCH_DIST;
      if ((ahead & (kPage - 1)) < (uintptr_t)block_bytes) kick_page<kKickLines>(ahead);
      const uintptr_t sahead = reinterpret_cast<uintptr_t>(static_cast<const uint8_t*>(wd) + (size_t)b * scale_bytes) + 256;
      if ((sahead & (kPage - 1)) < (uintptr_t)scale_bytes) kick_page<1>(sahead);
    }
    vi init[T], s[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) init[t] = use_off ? V::set1(-off[t * ostride + b]) : V::zero();
    if constexpr (Q4) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) s[t] = V::q4_start(init[t]);
      auto step = [&](int k) {
        const vi w = V::load(wb + (size_t)k * 4 * G);
        const vi lo = V::lo_nibbles(w), hi = V::hi_nibbles(w);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const int8_t* xb = xq[t] + (size_t)b * ML_QK;
          s[t] = V::q4_step(s[t], lo, hi, V::set1(load4(xb + 4 * k)), V::set1(load4(xb + 16 + 4 * k)));
        }
      };
      ML_PK_STEPS(4, step);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) s[t] = V::q4_finish(s[t], init[t]);
    } else {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) s[t] = init[t];
      auto step = [&](int k) {
        const vi w = V::load(wb + (size_t)k * 4 * G);
        const vi wp = V::q8_prep(w);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) s[t] = V::q8_step(s[t], wp, w, V::set1(load4(xq[t] + (size_t)b * ML_QK + 4 * k)));
      };
      ML_PK_STEPS(8, step);
    }
    const vf dw = V::template scales<F16>(wd, (size_t)b * G);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[t] = V::fadd(acc[t], V::fmul(V::cvt(s[t]), V::fmul(dw, V::fset1(xd[t][b]))));
  }
}

#undef ML_PK_STEPS

// T tokens (quants xq + t * n, scales xd + t * n / 32) into Y + t * ldy, rows [r0, r1); PF: prefetch.
template <class V, int T, bool Q4, bool F16, Prefetch PF = ML_PREFETCH ? Prefetch::lines : Prefetch::none>
void tile(float* Y, size_t ldy, const ml_qtensor* W, const int8_t* xq, const float* xd, int n, int r0, int r1) {
  using vf = typename V::vf;
  constexpr int G = V::G;
  if (r1 <= r0) return;
  const int nb = W->cols / ML_QK;
  constexpr size_t block_bytes = (Q4 ? 16 : 32) * G;
  constexpr size_t scale_size = F16 ? 2 : 4;
  constexpr int chunk = kOffInts / T;
  constexpr bool use_off = Q4 || V::kQ8Offset != 0;
  const uint8_t* pq = static_cast<const uint8_t*>(W->pq);
  const uint8_t* pd = static_cast<const uint8_t*>(W->pd);
  int32_t off[kOffInts];
  alignas(64) float tail[T][G];  // accumulators of a partial last group (its rows >= r1 are never written)
  const int g0 = r0 / G, g_full = r1 / G, g1 = (r1 + G - 1) / G;
  if constexpr (PF == Prefetch::page_kick) {
    // group_blocks kicks each page as the block ML_PREFETCH_DIST before it is read, so the page
    // after the stream's first is never kicked: kick it here.
    kick_page<kKickLines>(reinterpret_cast<uintptr_t>(pq + (size_t)g0 * nb * block_bytes) + ML_PREFETCH_DIST);
  }
  for (int c0 = 0; c0 < nb; c0 += chunk) {
    const int nblk = nb - c0 < chunk ? nb - c0 : chunk;
    const int8_t* xqs[T];
    const float* xds[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      xqs[t] = xq + (size_t)t * n + (size_t)c0 * ML_QK;
      xds[t] = xd + (size_t)t * (n / ML_QK) + c0;
      if (use_off)
        for (int b = 0; b < nblk; ++b)
          off[t * chunk + b] = (Q4 ? 8 : V::kQ8Offset) * block_sum(xqs[t] + (size_t)b * ML_QK);
    }
    for (int g = g0; g < g1; ++g) {
      float* dst[T];
      vf acc[T];
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        dst[t] = g < g_full ? Y + (size_t)t * ldy + (size_t)g * G : tail[t];
        acc[t] = c0 == 0 ? V::fzero() : V::floadu(dst[t]);
      }
      const size_t at = (size_t)g * nb + c0;  // the group's first block of the chunk
      group_blocks<V, T, Q4, F16, PF>(acc, pq + at * block_bytes, pd + at * G * scale_size, xqs, xds, off, chunk, nblk);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) V::fstoreu(dst[t], acc[t]);
    }
  }
  if (g1 > g_full)
    for (int t = 0; t < T; ++t)
      for (int r = g_full * G; r < r1; ++r) Y[(size_t)t * ldy + r] = tail[t][r - g_full * G];
}

template <class V, bool Q4, bool F16>
void matvec(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  if constexpr (!ML_PREFETCH) {
    tile<V, 1, Q4, F16, Prefetch::none>(y, 0, W, x->q, x->d, x->n, r0, r1);
  } else {
    switch (cpu_matvec_prefetch(Q4 || V::kQ8PrefetchOnAmd)) {
      case Prefetch::page_kick: tile<V, 1, Q4, F16, Prefetch::page_kick>(y, 0, W, x->q, x->d, x->n, r0, r1); break;
      case Prefetch::none: tile<V, 1, Q4, F16, Prefetch::none>(y, 0, W, x->q, x->d, x->n, r0, r1); break;
      case Prefetch::lines: tile<V, 1, Q4, F16, Prefetch::lines>(y, 0, W, x->q, x->d, x->n, r0, r1); break;
    }
  }
}

// The remainder of a matmul: one tile of 1..TILE-1 tokens, its count a template argument.
template <class V, bool Q4, bool F16, int T = 1>
void tile_n(int nt, float* Y, size_t ldy, const ml_qtensor* W, const int8_t* q, const float* d, int n, int r0,
            int r1) {
  if constexpr (T < V::TILE) {
    if (nt == T) tile<V, T, Q4, F16>(Y, ldy, W, q, d, n, r0, r1);
    else tile_n<V, Q4, F16, T + 1>(nt, Y, ldy, W, q, d, n, r0, r1);
  }
}

// Tiles of V::TILE tokens, then one tile of the rest.
template <class V, bool Q4, bool F16>
void matmul(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1) {
  const int n = X->n, nt = X->n_tokens;
  const size_t ld = (size_t)ldy;
  int t = 0;
  for (; t + V::TILE <= nt; t += V::TILE)
    tile<V, V::TILE, Q4, F16>(Y + t * ld, ld, W, X->q + (size_t)t * n, X->d + (size_t)t * (n / ML_QK), n, r0, r1);
  if (t < nt) tile_n<V, Q4, F16>(nt - t, Y + t * ld, ld, W, X->q + (size_t)t * n, X->d + (size_t)t * (n / ML_QK), n, r0, r1);
}

// The parts of V shared by the 256-bit ISAs (avx2, avxvnni): G = 8 rows, 4-token matmul tiles,
// loads, nibble masks and the float side. Each ISA's V derives from it and adds kQ8Offset and the
// integer step (q8_prep, q8_step, q4_start, q4_step, q4_finish).
struct Lanes256 {
  using vi = __m256i;
  using vf = __m256;
  static constexpr int G = 8;
  static constexpr int TILE = 4;
  static constexpr bool kQ8PrefetchOnAmd = true;  // the Q8 matvec prefetches lines on AMD before Zen 5 too
  static vi zero() { return _mm256_setzero_si256(); }
  static vi set1(int32_t v) { return _mm256_set1_epi32(v); }
  static vi load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static vi lo_nibbles(vi w) { return _mm256_and_si256(w, _mm256_set1_epi8(0x0F)); }
  static vi hi_nibbles(vi w) { return _mm256_and_si256(_mm256_srli_epi16(w, 4), _mm256_set1_epi8(0x0F)); }
  static vf fzero() { return _mm256_setzero_ps(); }
  static vf fset1(float v) { return _mm256_set1_ps(v); }
  static vf floadu(const float* p) { return _mm256_loadu_ps(p); }
  static void fstoreu(float* p, vf v) { _mm256_storeu_ps(p, v); }
  static vf cvt(vi v) { return _mm256_cvtepi32_ps(v); }
  static vf fmul(vf a, vf b) { return _mm256_mul_ps(a, b); }
  static vf fadd(vf a, vf b) { return _mm256_add_ps(a, b); }
  template <bool F16>
  static vf scales(const void* d, size_t i) {
    if constexpr (F16) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(d) + i)));
    else return _mm256_loadu_ps(static_cast<const float*>(d) + i);
  }
};

#ifdef __AVX512F__
// The 16 scales of a G = 16 group at d + i: f16 widened exactly by vcvtph2ps, or f32 (the 512-bit
// packed kernels: avx512vnni's V and amx's tile).
template <bool F16>
static inline __m512 scales512(const void* d, size_t i) {
  if constexpr (F16) return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(d) + i)));
  else return _mm512_loadu_ps(static_cast<const float*>(d) + i);
}
#endif

}  // namespace ml::k::x86pk

// The four extern "C" entry points of ISA `isa` over traits V, dispatching on the packed scales'
// type (W->pd_f16).
#define ML_X86_PACK_ENTRIES(V, isa)                                                                              \
  extern "C" void ml_k_matvec_q8_pk_##isa(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {     \
    if (W->pd_f16) ml::k::x86pk::matvec<V, false, true>(y, W, x, r0, r1);                                        \
    else ml::k::x86pk::matvec<V, false, false>(y, W, x, r0, r1);                                                 \
  }                                                                                                              \
  extern "C" void ml_k_matvec_q4_pk_##isa(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {     \
    if (W->pd_f16) ml::k::x86pk::matvec<V, true, true>(y, W, x, r0, r1);                                         \
    else ml::k::x86pk::matvec<V, true, false>(y, W, x, r0, r1);                                                  \
  }                                                                                                              \
  extern "C" void ml_k_matmul_q8_pk_##isa(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0,    \
                                          int r1) {                                                              \
    if (W->pd_f16) ml::k::x86pk::matmul<V, false, true>(Y, ldy, W, X, r0, r1);                                   \
    else ml::k::x86pk::matmul<V, false, false>(Y, ldy, W, X, r0, r1);                                            \
  }                                                                                                              \
  extern "C" void ml_k_matmul_q4_pk_##isa(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0,    \
                                          int r1) {                                                              \
    if (W->pd_f16) ml::k::x86pk::matmul<V, true, true>(Y, ldy, W, X, r0, r1);                                    \
    else ml::k::x86pk::matmul<V, true, false>(Y, ldy, W, X, r0, r1);                                             \
  }
