#include "engine/stop_filter.h"

#include <cstring>

namespace {

// The earliest start of any stop string in h[0, n), or n.
size_t first_match(const ml_stop_filter* f, const char* h, size_t n) {
  size_t best = n;
  for (size_t s = 0; s < f->n; ++s) {
    const size_t L = f->lens[s];
    for (size_t i = 0; i + L <= n && i < best; ++i)
      if (std::memcmp(h + i, f->stops[s], L) == 0) {
        best = i;
        break;
      }
  }
  return best;
}

// The longest tail of h[0, n) that is a proper prefix of a stop string.
size_t longest_prefix_tail(const ml_stop_filter* f, const char* h, size_t n) {
  size_t keep = 0;
  for (size_t s = 0; s < f->n; ++s) {
    const size_t L = f->lens[s];
    for (size_t k = (L - 1 < n ? L - 1 : n); k > keep; --k)
      if (std::memcmp(h + n - k, f->stops[s], k) == 0) {
        keep = k;
        break;
      }
  }
  return keep;
}

}  // namespace

bool ml_stop_push(ml_stop_filter* f, const char* text, size_t len, char* out, size_t* released) {
  if (f->n == 0) {
    std::memcpy(out, text, len);
    *released = len;
    return false;
  }
  // out is the working buffer: held bytes, then the new text.
  std::memcpy(out, f->held, f->n_held);
  std::memcpy(out + f->n_held, text, len);
  const size_t n = f->n_held + len;
  f->n_held = 0;
  const size_t cut = first_match(f, out, n);
  if (cut < n) {
    *released = cut;
    return true;
  }
  const size_t keep = longest_prefix_tail(f, out, n);
  std::memcpy(f->held, out + n - keep, keep);  // keep < the longest stop string <= cap
  f->n_held = keep;
  *released = n - keep;
  return false;
}

size_t ml_stop_finish(ml_stop_filter* f, char* out) {
  const size_t n = f->n_held;
  std::memcpy(out, f->held, n);
  f->n_held = 0;
  return n;
}
