// The read loops of the bandwidth probe, shared by ml_bwprobe and ml_bench --probe-mb: sum n bytes
// (a multiple of 256) from p (256-byte aligned) with the widest vector loads the CPU has, so that the
// loads cannot be dropped. Compiled per target with function attributes (no ISA flags at build
// time) and picked by CPUID at run time.
//
// Each loop comes in five prefetch modes, because which one reads fastest depends on the CPU:
// none (the hardware prefetchers alone), every line 4 KiB ahead, and a page kick of 1, 2 or 4
// lines (the first lines of the page 4 KiB ahead, requested once per page, which is what krafla's
// matvec does on Zen 5, kernels/x86_pack.h). On a Zen 5 VM a page kick read 29-38 GB/s on one
// thread where the plain loop read 19-24 (docs/benchmarks.md), so a probe of plain loads alone is
// no ceiling there.
#pragma once
#include <cstddef>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ML_BW_X86 1
#endif

namespace ml::bw {

enum prefetch_mode { PF_NONE = 0, PF_LINES = 1, PF_KICK1 = 2, PF_KICK2 = 3, PF_KICK4 = 4 };
constexpr int kPrefetchModes = 5;
inline const char* prefetch_name(int mode) {
  static const char* const names[kPrefetchModes] = {"no prefetch", "every line 4 KiB ahead", "page kick of 1 line",
                                                    "page kick of 2 lines", "page kick of 4 lines"};
  return mode >= 0 && mode < kPrefetchModes ? names[mode] : "?";
}

// The software prefetches of one 256-byte step at p.
template <int Mode>
inline void ahead(const uint8_t* p) {
  if (Mode == PF_LINES) {
    for (int l = 0; l < 4; ++l) __builtin_prefetch(p + 4096 + 64 * l, 0, 3);
  } else if (Mode >= PF_KICK1) {
    constexpr int lines = Mode == PF_KICK1 ? 1 : Mode == PF_KICK2 ? 2 : 4;
    if ((reinterpret_cast<uintptr_t>(p + 4096) & 4095) == 0)
      for (int l = 0; l < lines; ++l) __builtin_prefetch(p + 4096 + 64 * l, 0, 3);
  }
}

template <int Mode>
inline uint64_t read_words(const uint8_t* p, size_t n) {
  const uint64_t* w = reinterpret_cast<const uint64_t*>(p);
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (size_t s = 0; s < n; s += 256) {
    ahead<Mode>(p + s);
    for (size_t i = s / 8; i < (s + 256) / 8; i += 4) a += w[i], b += w[i + 1], c += w[i + 2], d += w[i + 3];
  }
  return a ^ b ^ c ^ d;
}

#ifdef ML_BW_X86
template <int Mode>
__attribute__((target("sse2"))) inline uint64_t read_sse2(const uint8_t* p, size_t n) {
  __m128i a = _mm_setzero_si128(), b = a, c = a, d = a;
  for (size_t s = 0; s < n; s += 256) {
    ahead<Mode>(p + s);
    for (size_t i = s; i < s + 256; i += 64) {
      a = _mm_add_epi64(a, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i)));
      b = _mm_add_epi64(b, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i + 16)));
      c = _mm_add_epi64(c, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i + 32)));
      d = _mm_add_epi64(d, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i + 48)));
    }
  }
  a = _mm_xor_si128(_mm_xor_si128(a, b), _mm_xor_si128(c, d));
  uint64_t out[2];
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), a);
  return out[0] ^ out[1];
}

template <int Mode>
__attribute__((target("avx2"))) inline uint64_t read_avx2(const uint8_t* p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  for (size_t s = 0; s < n; s += 256) {
    ahead<Mode>(p + s);
    for (size_t i = s; i < s + 256; i += 128) {
      a = _mm256_add_epi64(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
      b = _mm256_add_epi64(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
      c = _mm256_add_epi64(c, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
      d = _mm256_add_epi64(d, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
    }
  }
  a = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
  uint64_t out[4];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), a);
  return out[0] ^ out[1] ^ out[2] ^ out[3];
}

template <int Mode>
__attribute__((target("avx512f"))) inline uint64_t read_avx512(const uint8_t* p, size_t n) {
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  for (size_t i = 0; i < n; i += 256) {
    ahead<Mode>(p + i);
    a = _mm512_add_epi64(a, _mm512_load_si512(p + i));
    b = _mm512_add_epi64(b, _mm512_load_si512(p + i + 64));
    c = _mm512_add_epi64(c, _mm512_load_si512(p + i + 128));
    d = _mm512_add_epi64(d, _mm512_load_si512(p + i + 192));
  }
  a = _mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d));
  uint64_t out[8];
  _mm512_storeu_si512(out, a);
  return out[0] ^ out[1] ^ out[2] ^ out[3] ^ out[4] ^ out[5] ^ out[6] ^ out[7];
}
#endif

using read_fn = uint64_t (*)(const uint8_t*, size_t);

// The widest loads this CPU runs (their name in *name), in each prefetch mode: fns[mode].
inline void pick(const char** name, read_fn fns[kPrefetchModes]) {
#ifdef ML_BW_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    *name = "avx512 (64-byte loads)";
    fns[0] = read_avx512<0>, fns[1] = read_avx512<1>, fns[2] = read_avx512<2>, fns[3] = read_avx512<3>, fns[4] = read_avx512<4>;
    return;
  }
  if (__builtin_cpu_supports("avx2")) {
    *name = "avx2 (32-byte loads)";
    fns[0] = read_avx2<0>, fns[1] = read_avx2<1>, fns[2] = read_avx2<2>, fns[3] = read_avx2<3>, fns[4] = read_avx2<4>;
    return;
  }
  if (__builtin_cpu_supports("sse2")) {
    *name = "sse2 (16-byte loads)";
    fns[0] = read_sse2<0>, fns[1] = read_sse2<1>, fns[2] = read_sse2<2>, fns[3] = read_sse2<3>, fns[4] = read_sse2<4>;
    return;
  }
#endif
  *name = "64-bit words";
  fns[0] = read_words<0>, fns[1] = read_words<1>, fns[2] = read_words<2>, fns[3] = read_words<3>, fns[4] = read_words<4>;
}

}  // namespace ml::bw
