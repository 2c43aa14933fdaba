// A validating reader of one .safetensors file (Hugging Face's format: u64 little-endian header
// length N, N bytes of JSON, then the data area). Used by the Hugging Face importer (hf_import.cpp).
// Contract: cv_st_parse checks everything before any tensor is used, and refuses with ML_E_FORMAT
// naming the file and the tensor or key:
// - 2 <= N <= CV_ST_MAX_HEADER and 8 + N <= the file's size;
// - the header is JSON (core/json.h) whose root is an object; "__metadata__", when present, is an
//   object of strings; every other member is a tensor {"dtype", "shape", "data_offsets"};
// - dtype is F32, F16 or BF16 (any other is refused naming the tensor and the dtype);
// - shape is a list of at most CV_ST_MAX_RANK integers in 0..CV_ST_MAX_DIM; the element count and
//   byte size are overflow-checked;
// - data_offsets is [begin, end] relative to the data area with begin <= end <= the area's size
//   and end - begin == elements * itemsize;
// - the tensors tile the data area exactly (sorted by offset, each begins where the previous ends,
//   the last ends at the file's end), as the reference implementation requires: no overlap, no gap;
// - no two tensors have the same name, and no name is empty or holds a NUL.
// The importer decides which ranks and shapes it accepts; this reader only bounds them.
#pragma once
#include <cstddef>
#include <cstdint>

#include "convert/convert.h"
#include "core/bump.h"
#include "core/file.h"
#include "core/status.h"

inline constexpr uint64_t CV_ST_MAX_HEADER = 100000000;  // bytes of header JSON (the reference's limit)
inline constexpr uint32_t CV_ST_MAX_RANK = 8;
inline constexpr uint64_t CV_ST_MAX_DIM = 1ull << 40;  // one dimension
inline constexpr size_t CV_ST_MAX_TENSORS = 1000000;   // per file

enum cv_st_dtype : uint32_t { CV_ST_F32 = 0, CV_ST_F16 = 1, CV_ST_BF16 = 2 };

struct cv_st_tensor {
  const char* name;  // NUL-terminated (the parsed header's copy)
  uint32_t dtype;    // cv_st_dtype
  uint32_t rank;
  uint64_t shape[CV_ST_MAX_RANK];
  uint64_t count;       // elements (the product of shape; 1 for rank 0)
  const uint8_t* data;  // inside the file's mapping
  uint64_t size;        // bytes: count * itemsize
  bool used;            // for the importer: set when a tensor is taken
};

// One parsed file; the tensors are sorted by name. Owns the mapping and the parsed header.
struct cv_st_file {
  char path[512] = {0};  // for messages (truncated)
  ml_file f;
  ml_bump b;
  cv_buf tensors;  // cv_st_tensor[n]
  size_t n = 0;
  const struct ml_json* metadata = nullptr;  // "__metadata__" or null

  cv_st_file() = default;
  cv_st_file(const cv_st_file&) = delete;
  cv_st_file& operator=(const cv_st_file&) = delete;
  ~cv_st_file();
  cv_st_tensor* at(size_t i) const { return tensors.as<cv_st_tensor>() + i; }
};

// Maps path (ml_file_open: ML_E_IO, or ML_E_ARG for a non-regular file) and parses it.
ml_status cv_st_open(cv_st_file* s, const char* path, ml_error* err);

// Parses data[0, size) (which must outlive s), naming it `what` in messages.
ml_status cv_st_parse(cv_st_file* s, const uint8_t* data, size_t size, const char* what, ml_error* err);

// The tensor named name, or null (binary search).
cv_st_tensor* cv_st_find(const cv_st_file* s, const char* name);

// __metadata__[key] when it is present (a NUL-terminated string), else null.
const char* cv_st_metadata(const cv_st_file* s, const char* key);

// "F32", "F16", "BF16".
const char* cv_st_dtype_name(uint32_t dtype);

// The tensor's values as float32 into out (allocated here): F16 and BF16 are widened exactly.
// ML_E_NOMEM naming the tensor when the count does not fit this address space.
ml_status cv_st_to_f32(const cv_st_tensor* t, cv_buf* out, ml_error* err);
