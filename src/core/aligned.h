// Aligned heap blocks. std::aligned_alloc + std::free where the C library has them; the Windows
// C runtime has no aligned_alloc, and its aligned blocks must go back through _aligned_free, so
// every block from ml_aligned_alloc is freed with ml_aligned_free (never std::free).
#pragma once
#include <cstddef>
#include <cstdlib>
#ifdef _WIN32
#include <malloc.h>
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
