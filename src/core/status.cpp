#include "core/status.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

ml_status ml_fail(ml_error* err, ml_status s, const char* fmt, ...) {
  if (err) {
    err->status = s;
    va_list ap;
    va_start(ap, fmt);
    // Formatted apart first: an argument may be err->msg itself (a message wrapped with its file).
    char msg[sizeof err->msg];
    std::vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    std::memcpy(err->msg, msg, sizeof msg);
  }
  return s;
}

extern "C" const char* ml_status_name(ml_status s) {
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
