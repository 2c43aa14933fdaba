// ml_bump: a bump allocator of malloc'd chunks for short-lived object graphs (a parsed JSON
// document, a template's syntax tree and the values of one rendering). Nothing is freed singly;
// ml_bump_free releases everything at once. Allocation failure returns null (the core has no
// exceptions): callers turn it into ML_E_NOMEM. An optional byte limit bounds what one input may
// make the allocator hold.
#pragma once
#include <cstddef>
#include <cstdint>
#include <new>

struct ml_bump_chunk;

struct ml_bump {
  ml_bump_chunk* head = nullptr;
  size_t used_total = 0;   // bytes handed out
  size_t limit = 0;        // 0: no limit; else allocations past it fail
  ml_bump() = default;
  ml_bump(const ml_bump&) = delete;
  ml_bump& operator=(const ml_bump&) = delete;
  ~ml_bump();
};

// n bytes aligned to 16 (n == 0 gives a valid unique pointer); null when memory or the limit runs out.
void* ml_bump_alloc(ml_bump* b, size_t n);
// A copy of s[0, n) with a NUL after it; null on failure.
char* ml_bump_strdup(ml_bump* b, const char* s, size_t n);
void ml_bump_free(ml_bump* b);

// Constructs a T in the allocator (T must be trivially destructible: nothing runs its destructor).
template <class T, class... A>
T* ml_bump_new(ml_bump* b, A&&... args) {
  void* p = ml_bump_alloc(b, sizeof(T));
  return p ? new (p) T{static_cast<A&&>(args)...} : nullptr;
}
template <class T>
T* ml_bump_array(ml_bump* b, size_t n) {
  if (n > (size_t)-1 / sizeof(T)) return nullptr;
  void* p = ml_bump_alloc(b, n * sizeof(T));
  if (!p) return nullptr;
  T* t = static_cast<T*>(p);
  for (size_t i = 0; i < n; ++i) new (t + i) T();
  return t;
}
