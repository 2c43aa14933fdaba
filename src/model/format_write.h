// Writing .mlb files (ml_convert). The writer lays out the header, the directory, every array
// 64-byte aligned and the tokenizer section exactly as docs/format.md specifies.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "core/status.h"
#include "model/format.h"

// One tensor to write: its directory fields (offsets are filled in by the writer) and its bytes.
struct ml_mlb_tensor_src {
  ml_mlb_tensor t;               // name, type, scale_type, rows, cols
  const void* data = nullptr;    // data_size bytes (computed from type and shape)
  const void* scales = nullptr;  // Q8/Q4: scale bytes; else null
};

// Writes a complete file to path: h (n_tensors, offsets and file_size are computed), the tensors in
// order, then the tokenizer section of tokenizer_kind (1 llama2.c tokenizer.bin, 2 Hugging Face files:
// model/tokenizer/bundle.h) when tokenizer is non-null. Writes to a temporary
// file and renames it (core/out_file.h), so a failed conversion never leaves a half-written model
// behind. ML_E_ARG, before anything is written, when path exists and is not a regular file or is
// a file the process has open through ml_file_open (an input).
ml_status ml_mlb_write(const char* path, const ml_mlb_header* h, const ml_mlb_tensor_src* tensors, size_t n_tensors,
                       const uint8_t* tokenizer, size_t tokenizer_size, ml_error* err, uint32_t tokenizer_kind = 1);

// The same bytes into one 64-byte-aligned buffer of *size bytes (free it with ml_aligned_free), for a
// model converted at load. after_tensor (may be null) is called with i once tensor i's bytes are
// copied, so the caller can free its copy and keep the peak near one model's size.
ml_status ml_mlb_write_memory(const ml_mlb_header* h, const ml_mlb_tensor_src* tensors, size_t n_tensors,
                              const uint8_t* tokenizer, size_t tokenizer_size, uint32_t tokenizer_kind, uint8_t** out,
                              size_t* size, void (*after_tensor)(void*, size_t), void* user, ml_error* err);

// The same bytes written to fd from its current offset (an empty unlinked temporary file,
// core/file.h's ml_file_temp, that is mapped afterwards), so a model converted at load needs no
// buffer of its own size; *size is the number of bytes written. after_tensor as above.
ml_status ml_mlb_write_fd(int fd, const ml_mlb_header* h, const ml_mlb_tensor_src* tensors, size_t n_tensors,
                          const uint8_t* tokenizer, size_t tokenizer_size, uint32_t tokenizer_kind, size_t* size,
                          void (*after_tensor)(void*, size_t), void* user, ml_error* err);
