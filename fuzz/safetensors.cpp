// Fuzzes the safetensors reader (convert/safetensors.h): cv_st_parse over the whole input, then the
// reader's promises on what it accepts:
// - a refusal is ML_E_FORMAT (ML_E_NOMEM only for an allocation) with a message naming the input;
// - an accepted file's tensors are sorted by name, unique, non-empty and NUL-free; each one's data
//   lies inside the input's data area with size == product(shape) * itemsize; the tensors tile the
//   data area exactly (their sizes add up to it); cv_st_find finds every tensor by its name;
// - cv_st_to_f32 of every tensor of at most 4096 elements equals an independent decoding (F32
//   bits, BF16 bits << 16, IEEE half by ldexp).
// Input: the file's bytes. Seeds: fuzz/corpus/safetensors (tiny files from fuzz/make_seeds.py).
#include "convert/safetensors.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

float half_ref(uint16_t h) {
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const float s = (h & 0x8000) ? -1.0f : 1.0f;
  if (e == 0) return s * std::ldexp((float)m, -24);
  if (e == 31) return m ? NAN : s * INFINITY;
  return s * std::ldexp((float)(1024 + m), e - 25);
}

bool same(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, 4) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cv_st_file f;
  ml_error err{};
  const ml_status s = cv_st_parse(&f, data, size, "in", &err);
  if (s != ML_OK) {
    check(s == ML_E_FORMAT || s == ML_E_NOMEM);
    check(std::strncmp(err.msg, "in", 2) == 0 || s == ML_E_NOMEM);
    return 0;
  }
  check(size >= 10);
  uint64_t hn = 0;
  for (int i = 7; i >= 0; --i) hn = hn << 8 | data[i];
  const uint8_t* area = data + 8 + hn;
  const uint64_t area_size = size - 8 - hn;
  uint64_t total = 0;
  for (size_t i = 0; i < f.n; ++i) {
    const cv_st_tensor* t = f.at(i);
    check(t->name && t->name[0] != 0);
    if (i) check(std::strcmp(f.at(i - 1)->name, t->name) < 0);
    check(cv_st_find(&f, t->name) == t);
    check(t->rank <= CV_ST_MAX_RANK);
    uint64_t count = 1;
    for (uint32_t k = 0; k < t->rank; ++k) count *= t->shape[k];  // cannot overflow: the reader checked
    check(count == t->count);
    const uint64_t item = t->dtype == CV_ST_F32 ? 4 : 2;
    check(t->dtype <= CV_ST_BF16 && t->size == count * item);
    check(t->data >= area && (uint64_t)(t->data - area) <= area_size &&
          t->size <= area_size - (uint64_t)(t->data - area));
    total += t->size;
    if (count > 4096) continue;
    cv_buf v;
    check(cv_st_to_f32(t, &v, &err) == ML_OK);
    for (uint64_t k = 0; k < count; ++k) {
      const uint8_t* p = t->data + k * item;
      float want;
      if (t->dtype == CV_ST_F32) {
        uint32_t b = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        std::memcpy(&want, &b, 4);
      } else if (t->dtype == CV_ST_BF16) {
        uint32_t b = ((uint32_t)p[0] | (uint32_t)p[1] << 8) << 16;
        std::memcpy(&want, &b, 4);
      } else {
        want = half_ref((uint16_t)(p[0] | p[1] << 8));
      }
      check(same(v.as<float>()[k], want));
    }
  }
  check(total == area_size);
  return 0;
}
