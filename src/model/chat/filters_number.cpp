// The chat-template filters on numbers (filters.cpp dispatches to them): int, float and round, with
// jinja2's parameter names, defaults and Python's conversions and rounding.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "model/chat/builtin_util.h"

namespace jj {

ml_status int_filter(const argv& a, const jv& v, jv* out) {
  jv dflt = arg(a, 0, "default", v_int(0));
  jv basev = arg(a, 1, "base", v_int(10));
  int64_t base = 10;
  ML_TRY(int_arg(a, basev, "base", &base));
  switch (v.k) {
    case vk::integer: *out = v; return ML_OK;
    case vk::boolean: *out = v_int(v.b); return ML_OK;
    case vk::real:
      if (std::isnan(v.f) || std::fabs(v.f) >= 9.2e18) {
        *out = dflt;
        return ML_OK;
      }
      *out = v_int((int64_t)v.f);
      return ML_OK;
    case vk::str: {
      char buf[64];
      jv s = strip(v, nullptr, true, true);
      if (s.n == 0 || s.n >= sizeof buf) {
        *out = dflt;
        return ML_OK;
      }
      size_t k = 0;
      for (size_t i = 0; i < s.n; ++i)
        if (s.s[i] != '_') buf[k++] = s.s[i];
      buf[k] = 0;
      char* end;
      errno = 0;
      long long x = strtoll(buf, &end, (int)base);
      if (*end == 0 && errno == 0 && end != buf) {
        *out = v_int(x);
        return ML_OK;
      }
      double f = strtod(buf, &end);  // int(float(value))
      if (*end == 0 && end != buf && std::isfinite(f) && std::fabs(f) < 9.2e18) {
        *out = v_int((int64_t)f);
        return ML_OK;
      }
      *out = dflt;
      return ML_OK;
    }
    default: *out = dflt; return ML_OK;
  }
}

ml_status float_filter(const argv& a, const jv& v, jv* out) {
  jv dflt = arg(a, 0, "default", v_real(0.0));
  if (is_number(v)) {
    *out = v_real(num(v));
    return ML_OK;
  }
  if (v.k == vk::str) {
    jv s = strip(v, nullptr, true, true);
    char buf[64];
    if (s.n > 0 && s.n < sizeof buf) {
      memcpy(buf, s.s, s.n);
      buf[s.n] = 0;
      char* end;
      double f = strtod(buf, &end);
      bool hex = strchr(buf, 'x') || strchr(buf, 'X');
      if (*end == 0 && !hex) {
        *out = v_real(f);
        return ML_OK;
      }
    }
  }
  *out = dflt;
  return ML_OK;
}

ml_status round_filter(const argv& a, const jv& v, jv* out) {
  jv pv = arg(a, 0, "precision", v_int(0));
  jv mv = arg(a, 1, "method", v_str("common", 6));
  int64_t prec = 0;
  ML_TRY(int_arg(a, pv, "precision", &prec));
  ML_TRY(need_str(a, mv, "method"));
  if (!is_number(v)) return rt_fail(a.r, a.at, ML_E_ARG, "round: a number is needed, not %s", type_name(v));
  if (prec < -300 || prec > 300) return rt_fail(a.r, a.at, ML_E_ARG, "round: precision out of range");
  bool common = mv.n == 6 && memcmp(mv.s, "common", 6) == 0;
  bool ceil_ = mv.n == 4 && memcmp(mv.s, "ceil", 4) == 0;
  bool floor_ = mv.n == 5 && memcmp(mv.s, "floor", 5) == 0;
  if (!common && !ceil_ && !floor_) return rt_fail(a.r, a.at, ML_E_ARG, "round: method must be common, ceil or floor");
  if (common) {
    if (v.k != vk::real) {  // Python: round(int, n) is an int
      *out = v.k == vk::boolean ? v_int(v.b) : v;
      return ML_OK;
    }
    if (!std::isfinite(v.f)) {
      *out = v;
      return ML_OK;
    }
    if (prec >= 0) {
      // printf rounds the exact binary value, ties to even: Python's round() does the same.
      char buf[400];
      snprintf(buf, sizeof buf, "%.*f", (int)prec, v.f);
      *out = v_real(strtod(buf, nullptr));
    } else {
      double p = std::pow(10.0, (double)-prec);
      *out = v_real(std::nearbyint(v.f / p) * p);
    }
    return ML_OK;
  }
  double p = std::pow(10.0, (double)prec);
  double x = num(v) * p;
  *out = v_real((ceil_ ? std::ceil(x) : std::floor(x)) / p);
  return ML_OK;
}

}  // namespace jj
