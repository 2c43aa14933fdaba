#include "core/bump.h"

#include <cstdlib>
#include <cstring>

struct ml_bump_chunk {
  ml_bump_chunk* next;
  size_t cap, used;
  alignas(16) unsigned char data[];
};

ml_bump::~ml_bump() { ml_bump_free(this); }

void* ml_bump_alloc(ml_bump* b, size_t n) {
  const size_t need = (n + 15) & ~(size_t)15;
  if (need < n) return nullptr;
  if (b->limit && (need > b->limit || b->used_total > b->limit - need)) return nullptr;
  ml_bump_chunk* c = b->head;
  if (!c || c->cap - c->used < need) {
    size_t cap = c ? c->cap * 2 : 4096;
    if (cap > (1u << 24)) cap = 1u << 24;
    if (cap < need) cap = need;
    if (cap > (size_t)-1 - sizeof(ml_bump_chunk)) return nullptr;
    ml_bump_chunk* fresh = static_cast<ml_bump_chunk*>(std::malloc(sizeof(ml_bump_chunk) + cap));
    if (!fresh) return nullptr;
    fresh->cap = cap;
    fresh->used = 0;
    // A chunk too big to be the allocation head goes behind it, so the head's room stays usable.
    if (c && need > c->cap) {
      fresh->next = c->next;
      c->next = fresh;
    } else {
      fresh->next = c;
      b->head = fresh;
    }
    c = fresh;
  }
  void* p = c->data + c->used;
  c->used += need;
  b->used_total += need;
  return p;
}

char* ml_bump_strdup(ml_bump* b, const char* s, size_t n) {
  if (n == (size_t)-1) return nullptr;
  char* p = static_cast<char*>(ml_bump_alloc(b, n + 1));
  if (!p) return nullptr;
  if (n) std::memcpy(p, s, n);
  p[n] = 0;
  return p;
}

void ml_bump_free(ml_bump* b) {
  for (ml_bump_chunk* c = b->head; c;) {
    ml_bump_chunk* next = c->next;
    std::free(c);
    c = next;
  }
  b->head = nullptr;
  b->used_total = 0;
}
