#include "core/status.h"

#include <cstdarg>
#include <cstdio>

ml_status ml_fail(ml_error* err, ml_status s, const char* fmt, ...) {
  if (err) {
    err->status = s;
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
  }
  return s;
}

const char* ml_status_name(ml_status s) {
  switch (s) {
    case ML_OK: return "ok";
    case ML_E_IO: return "io";
    case ML_E_FORMAT: return "format";
    case ML_E_SHAPE: return "shape";
    case ML_E_NOMEM: return "nomem";
    case ML_E_ISA: return "isa";
    case ML_E_ARG: return "arg";
  }
  return "unknown";
}
