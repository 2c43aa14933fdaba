// Status codes and error messages for the whole core.
// Contract: library code never aborts, never throws and never exits. Every fallible function
// returns ml_status and, on failure, fills an ml_error whose message names the file, field,
// option or value at fault. Executables map statuses to exit codes (native/cli/exit_codes.h).
#pragma once
#include <cstddef>

// ml_status, ml_error: the public definitions (src/engine/include/krafla_types.h), shared so the
// C API and the core cannot drift apart.
#include "krafla_types.h"

// ML_PRINTF(f, a): argument f is a printf format whose arguments start at a, for -Wformat. MinGW's
// GCC reads `printf` as the Microsoft runtime's format (no %zu); krafla's C++ code prints through
// MinGW's own C99 printf (libstdc++ defines __USE_MINGW_ANSI_STDIO), whose format is gnu_printf.
#ifdef __MINGW32__
#define ML_PRINTF(f, a) __attribute__((format(gnu_printf, f, a)))
#else
#define ML_PRINTF(f, a) __attribute__((format(printf, f, a)))
#endif

// Fills err (may be null) with status s and a printf-style message; returns s.
ml_status ml_fail(ml_error* err, ml_status s, const char* fmt, ...) ML_PRINTF(3, 4);

// "ok", "io", "format", "shape", "nomem", "isa", "arg".
extern "C" const char* ml_status_name(ml_status s);  // also in krafla.h

// Propagates a non-OK status to the caller.
#define ML_TRY(expr)                    \
  do {                                  \
    ml_status ml_try_s_ = (expr);       \
    if (ml_try_s_ != ML_OK) return ml_try_s_; \
  } while (0)
