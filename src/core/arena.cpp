#include "core/arena.h"

#include <cstdlib>
#include <cstring>

#include "core/aligned.h"
#include "core/checked.h"

ml_status ml_arena_take(ml_arena* a, size_t count, size_t elem, void** out, ml_error* err) {
  *out = nullptr;
  size_t bytes, start, end;
  if (a->overflow || !ml_mul(count, elem, &bytes) || !ml_align_up(a->used, ML_ALIGN, &start) ||
      !ml_add(start, bytes, &end)) {
    a->overflow = true;
    return ml_fail(err, ML_E_NOMEM, "arena: buffer of %zu x %zu bytes overflows the address space", count, elem);
  }
  if (a->base) {
    if (end > a->cap)
      return ml_fail(err, ML_E_NOMEM, "arena: %zu bytes requested, %zu left", bytes, a->cap - start);
    *out = a->base + start;
  }
  a->used = end;
  return ML_OK;
}

ml_status ml_arena_alloc(ml_arena* a, ml_error* err) {
  if (a->overflow) return ml_fail(err, ML_E_NOMEM, "arena: planned size overflows the address space");
  size_t cap;
  if (!ml_align_up(a->used == 0 ? ML_ALIGN : a->used, ML_ALIGN, &cap))
    return ml_fail(err, ML_E_NOMEM, "arena: %zu bytes overflow", a->used);
  // A session's KV cache and recurrent state are streamed every token like the weights: huge
  // pages where the system allows them (core/aligned.h), so the hardware prefetchers are not
  // stopped at every 4 KiB boundary; below 2 MiB it is an ordinary 64-byte-aligned block.
  static_assert(ML_ALIGN <= 64, "ml_aligned_alloc_huge aligns small blocks to 64 bytes");
  void* p = ml_aligned_alloc_huge(cap);
  if (!p) return ml_fail(err, ML_E_NOMEM, "arena: cannot allocate %zu bytes", cap);
  std::memset(p, 0, cap);
  a->base = static_cast<uint8_t*>(p);
  a->cap = cap;
  a->used = 0;
  return ML_OK;
}

void ml_arena_free(ml_arena* a) {
  ml_aligned_free(a->base);
  *a = ml_arena{};
}
