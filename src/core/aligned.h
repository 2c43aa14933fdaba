// Aligned heap blocks. std::aligned_alloc + std::free where the C library has them; the Windows
// C runtime has no aligned_alloc, and its aligned blocks must go back through _aligned_free, so
// every block from ml_aligned_alloc is freed with ml_aligned_free (never std::free).
#pragma once
#include <cstddef>
#include <cstdlib>
#ifdef _WIN32
#include <malloc.h>
#endif
#if defined(__linux__) && !defined(__EMSCRIPTEN__)
#include <sys/mman.h>
#define ML_HUGE_PAGES 1
#endif

// size is rounded up to a multiple of align (aligned_alloc's rule); align a power of two.
inline void* ml_aligned_alloc(size_t align, size_t size) {
  const size_t n = (size + align - 1) / align * align;
  if (n < size) return nullptr;
#ifdef _WIN32
  return _aligned_malloc(n == 0 ? align : n, align);
#else
  return std::aligned_alloc(align, n == 0 ? align : n);
#endif
}

inline void ml_aligned_free(void* p) {
#ifdef _WIN32
  _aligned_free(p);
#else
  std::free(p);
#endif
}

// A large buffer that every token streams through (the packed weights, a session's KV cache and
// state: core/arena.cpp). On Linux it is 2 MiB aligned and its whole 2 MiB pages are marked
// MADV_HUGEPAGE, so transparent huge pages back them where the system allows them (the "madvise"
// setting, Debian's default): a decode step then walks hundreds of MB with one TLB entry per 2 MiB
// instead of per 4 KiB (docs/benchmarks.md, "Huge pages"). The tail past the last whole 2 MiB keeps
// 4 KiB pages, so the buffer's resident size is what it uses (a huge page over the tail would make
// a 2.1 MB session resident as 4 MB). The advice is a hint; where it fails or THP is off, the
// buffer is ordinary memory. Elsewhere: ml_aligned_alloc(64, size). Freed with ml_aligned_free.
inline constexpr size_t ML_HUGE_PAGE = size_t{2} << 20;

inline void* ml_aligned_alloc_huge(size_t size) {
#ifdef ML_HUGE_PAGES
  if (size >= ML_HUGE_PAGE) {
    void* p = ml_aligned_alloc(ML_HUGE_PAGE, size);
    if (p) ::madvise(p, size / ML_HUGE_PAGE * ML_HUGE_PAGE, MADV_HUGEPAGE);
    return p;
  }
#endif
  return ml_aligned_alloc(64, size);
}
