// Status codes and error messages for the whole core.
// Contract: library code never aborts, never throws and never exits. Every fallible function
// returns ml_status and, on failure, fills an ml_error whose message names the file, field,
// option or value at fault. Executables map statuses to exit codes (native/cli/exit_codes.h).
#pragma once
#include <cstddef>

enum ml_status : int {
  ML_OK = 0,
  ML_E_IO,      // a file could not be opened, read, mapped or written
  ML_E_FORMAT,  // a file's contents are malformed (magic, version, offsets, values)
  ML_E_SHAPE,   // a tensor or hyperparameter has the wrong shape or type
  ML_E_NOMEM,   // an allocation failed or a size would overflow the address space
  ML_E_ISA,     // the CPU lacks the build's instruction set
  ML_E_ARG,     // a caller passed an invalid argument (option, token id, context length)
};

struct ml_error {
  ml_status status = ML_OK;
  char msg[512] = {0};
};

// Fills err (may be null) with status s and a printf-style message; returns s.
ml_status ml_fail(ml_error* err, ml_status s, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

// "ok", "io", "format", "shape", "nomem", "isa", "arg".
const char* ml_status_name(ml_status s);

// Propagates a non-OK status to the caller.
#define ML_TRY(expr)                    \
  do {                                  \
    ml_status ml_try_s_ = (expr);       \
    if (ml_try_s_ != ML_OK) return ml_try_s_; \
  } while (0)
