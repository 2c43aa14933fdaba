// ml_vec<T>: a growable array for the core, which is built without exceptions: where std::vector
// would abort on an allocation failure, every growing call here returns false and leaves the
// array as it was, so callers can fail with ML_E_NOMEM. T must be nothrow-movable.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <utility>

template <class T>
class ml_vec {
 public:
  ml_vec() = default;
  ml_vec(const ml_vec&) = delete;
  ml_vec& operator=(const ml_vec&) = delete;
  ml_vec(ml_vec&& o) noexcept : p_(o.p_), n_(o.n_), cap_(o.cap_) { o.p_ = nullptr, o.n_ = o.cap_ = 0; }
  ml_vec& operator=(ml_vec&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = o.p_, n_ = o.n_, cap_ = o.cap_;
      o.p_ = nullptr, o.n_ = o.cap_ = 0;
    }
    return *this;
  }
  ~ml_vec() { reset(); }

  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }
  T* begin() { return p_; }
  T* end() { return p_ + n_; }
  const T* begin() const { return p_; }
  const T* end() const { return p_ + n_; }
  T& back() { return p_[n_ - 1]; }
  const T& back() const { return p_[n_ - 1]; }

  // Capacity for at least n elements; false (nothing changed) when memory or size_t runs out.
  bool reserve(size_t n) {
    if (n <= cap_) return true;
    if (n > (size_t)-1 / sizeof(T)) return false;
    T* q = static_cast<T*>(std::malloc(n * sizeof(T)));
    if (!q) return false;
    for (size_t i = 0; i < n_; ++i) {
      new (q + i) T(std::move(p_[i]));
      p_[i].~T();
    }
    std::free(p_);
    p_ = q;
    cap_ = n;
    return true;
  }
  bool push(T v) {
    if (n_ == cap_ && !reserve(cap_ < 8 ? 8 : (cap_ > (size_t)-1 / 2 ? (size_t)-1 : cap_ * 2))) return false;
    new (p_ + n_) T(std::move(v));
    ++n_;
    return true;
  }
  // Appends count elements copied from src (T trivially copyable).
  bool append(const T* src, size_t count) {
    static_assert(std::is_trivially_copyable_v<T>, "append copies bytes");
    if (count > (size_t)-1 - n_) return false;
    if (n_ + count > cap_ && !reserve(n_ + count > cap_ * 2 ? n_ + count : cap_ * 2)) return false;
    for (size_t i = 0; i < count; ++i) new (p_ + n_ + i) T(src[i]);
    n_ += count;
    return true;
  }
  // Grows (value-initialised elements) or shrinks to n.
  bool resize(size_t n) {
    if (n > n_) {
      if (!reserve(n)) return false;
      for (size_t i = n_; i < n; ++i) new (p_ + i) T();
    } else {
      for (size_t i = n; i < n_; ++i) p_[i].~T();
    }
    n_ = n;
    return true;
  }
  void pop() { p_[--n_].~T(); }
  void clear() { resize(0); }
  void reset() {
    clear();
    std::free(p_);
    p_ = nullptr;
    cap_ = 0;
  }

 private:
  T* p_ = nullptr;
  size_t n_ = 0, cap_ = 0;
};
