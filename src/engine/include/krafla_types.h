/* The plain types krafla's public API (krafla.h) and its core share: status codes, the error
 * record, weight types and KV-cache types. One definition for both sides: src/core/status.h and
 * the model layer include this file. C11 and C++; no dependencies. */
#ifndef KRAFLA_TYPES_H
#define KRAFLA_TYPES_H

#ifdef __cplusplus
#define KRAFLA_DEFAULT(...) = __VA_ARGS__
#else
#define KRAFLA_DEFAULT(...)
#endif

/* Every fallible call returns one of these; the executables map them to exit codes
 * (0 ok; 2 arg, format, shape; 3 isa; 1 io, nomem). */
typedef enum ml_status {
  ML_OK = 0,
  ML_E_IO,     /* a file could not be opened, read, mapped or written */
  ML_E_FORMAT, /* a file's contents are malformed (magic, version, offsets, values) */
  ML_E_SHAPE,  /* a tensor or hyperparameter has the wrong shape or type */
  ML_E_NOMEM,  /* an allocation failed or a size would overflow the address space */
  ML_E_ISA,    /* the CPU lacks the build's instruction set */
  ML_E_ARG     /* a caller passed an invalid argument (option, token id, context length) */
} ml_status;

/* A failure's status and its message, which names the file, field, option or value at fault. */
typedef struct ml_error {
  ml_status status KRAFLA_DEFAULT(ML_OK);
  char msg[512] KRAFLA_DEFAULT({0});
} ml_error;

/* Element types of tensors (the .mlb dtype codes, docs/format.md). Weight matrices are Q8 or Q4
 * blocks of 32 values; norms and biases are F32. */
typedef enum ml_dtype { ML_DT_F32 = 0, ML_DT_F16 = 1, ML_DT_Q8 = 2, ML_DT_Q4 = 3 } ml_dtype;

/* What a session's KV cache stores per element. */
typedef enum ml_kv_type { ML_KV_F32 = 0, ML_KV_Q8 = 1, ML_KV_F16 = 2 } ml_kv_type;

#endif
