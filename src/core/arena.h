// One 64-byte-aligned arena for every runtime buffer of a model, sized once at load.
// Use it in two passes over the same sequence of ml_arena_take calls: a planning pass on an
// arena with no memory (base == null) that only adds up the sizes, then ml_arena_alloc, then the
// real pass. Nothing is allocated while generating. Sizes are overflow-checked.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/status.h"

inline constexpr size_t ML_ALIGN = 64;

struct ml_arena {
  uint8_t* base = nullptr;  // null while planning
  size_t cap = 0;           // bytes owned
  size_t used = 0;          // bytes handed out (planning: bytes needed)
  bool overflow = false;    // a size computation overflowed; ml_arena_alloc/take then fail
};

// Reserves count * elem bytes, 64-byte aligned. While planning, *out is null and only the size
// adds up. Fails with ML_E_NOMEM on overflow or when the arena is too small.
ml_status ml_arena_take(ml_arena* a, size_t count, size_t elem, void** out, ml_error* err);

template <class T>
ml_status ml_arena_take(ml_arena* a, size_t count, T** out, ml_error* err) {
  void* p = nullptr;
  ml_status s = ml_arena_take(a, count, sizeof(T), &p, err);
  *out = static_cast<T*>(p);
  return s;
}

// A [rows][cols] array of T (the product overflow-checked): the buffers of one token or one
// position each, for a batch or a context.
template <class T>
ml_status ml_arena_take2(ml_arena* a, size_t rows, size_t cols, T** out, ml_error* err) {
  if (cols != 0 && rows > (size_t)-1 / cols) {
    a->overflow = true;
    *out = nullptr;
    return ml_fail(err, ML_E_NOMEM, "arena: %zu x %zu values overflow the address space", rows, cols);
  }
  return ml_arena_take(a, rows * cols, out, err);
}

// Allocates the planned size (a->used) and rewinds for the real pass. Zero-fills the memory.
ml_status ml_arena_alloc(ml_arena* a, ml_error* err);

// Frees the memory; the arena returns to its empty planning state.
void ml_arena_free(ml_arena* a);
