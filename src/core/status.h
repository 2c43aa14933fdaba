// Status codes and error messages for the whole core.
// Contract: library code never aborts, never throws and never exits. Every fallible function
// returns ml_status and, on failure, fills an ml_error whose message names the file, field,
// option or value at fault. Executables map statuses to exit codes (native/cli/exit_codes.h).
#pragma once
#include <cstddef>

// ml_status, ml_error: the public definitions (src/engine/include/krafla_types.h), shared so the
// C API and the core cannot drift apart.
#include "krafla_types.h"

// Fills err (may be null) with status s and a printf-style message; returns s.
ml_status ml_fail(ml_error* err, ml_status s, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

// "ok", "io", "format", "shape", "nomem", "isa", "arg".
extern "C" const char* ml_status_name(ml_status s);  // also in krafla.h

// Propagates a non-OK status to the caller.
#define ML_TRY(expr)                    \
  do {                                  \
    ml_status ml_try_s_ = (expr);       \
    if (ml_try_s_ != ML_OK) return ml_try_s_; \
  } while (0)
