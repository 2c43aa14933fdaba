// A validating GGUF reader (llama.cpp's model file; ggml's docs/gguf.md, versions 2 and 3) over a
// mapped file or a caller's buffer.
//
// Contract: gguf_parse checks the whole layout before anything is used -- the magic, the version,
// the tensor and key counts (named limits below, and each bounded by what the rest of the file can
// hold), every key and string length, every array's element type and count (overflow-checked,
// inside the file; arrays of arrays are refused), duplicate keys and tensor names,
// general.alignment (a u32 power of two), each tensor's dims (1..4, each >= 1, the product below
// 2^63, ne[0] a multiple of its type's block), its type (known to gguf_block_of), its offset
// (aligned, inside the data area with its size) and that no two tensors' bytes overlap. A damaged
// file fails with ML_E_FORMAT and a message "<file>: ..." naming the key or tensor at fault. After
// a successful parse the getters and accessors only read what was validated. Nothing allocates
// after the parse, nothing aborts, throws or exits.
#pragma once
#include <cstddef>
#include <cstdint>

#include "convert/convert.h"
#include "convert/gguf_types.h"
#include "core/file.h"
#include "core/status.h"

inline constexpr uint64_t GGUF_LIMIT_TENSORS = 1000000;  // tensor infos (the .mlb's ML_LIMIT_TENSORS)
inline constexpr uint64_t GGUF_LIMIT_KV = 65536;          // metadata keys (real files have ~50)
inline constexpr uint64_t GGUF_LIMIT_KEY_LEN = 65535;     // bytes of a key
inline constexpr uint32_t GGUF_LIMIT_DIMS = 4;            // ggml's GGML_MAX_DIMS
inline constexpr uint32_t GGUF_NAME_MAX = 64;             // ggml's GGML_MAX_NAME, NUL included
inline constexpr uint32_t GGUF_LIMIT_ALIGNMENT = 1u << 20;  // general.alignment

// One metadata entry. key points into the file (key_len bytes, no NUL).
struct gguf_kv {
  const char* key;
  uint32_t key_len;
  uint32_t type;        // gguf_vtype
  uint32_t elem_type;   // arrays: the elements' type; else == type
  uint64_t n;           // arrays: the element count; else 1
  const uint8_t* data;  // the value (a string: its u64 length first; an array: its first element)
};

// One tensor. ne[0] is the row length (the fastest-varying dimension); dims past n_dims are 1.
struct gguf_tensor {
  char name[GGUF_NAME_MAX];  // NUL-terminated
  uint32_t n_dims;
  uint64_t ne[GGUF_LIMIT_DIMS];
  uint32_t type;      // gguf_ttype
  uint64_t offset;    // from the start of the data area
  uint64_t size;      // bytes
  const uint8_t* data;
};

// A string: bytes (not NUL-terminated) and their count.
struct gguf_str {
  const char* p;
  uint64_t len;
};

struct gguf_file {
  const char* path = "";  // names the file in messages
  ml_file file;           // gguf_open's mapping (closed on destruction)
  uint32_t version = 0;
  uint32_t alignment = GGUF_DEFAULT_ALIGNMENT;
  uint64_t data_offset = 0;  // the data area's start in the file
  gguf_kv* kv = nullptr;
  uint64_t n_kv = 0;
  gguf_tensor* tensors = nullptr;
  uint64_t n_tensors = 0;
  uint32_t* by_name = nullptr;  // tensor indices sorted by name (gguf_find_tensor)
  cv_buf kv_buf, tensor_buf, name_buf;

  gguf_file() = default;
  gguf_file(const gguf_file&) = delete;
  gguf_file& operator=(const gguf_file&) = delete;
  ~gguf_file();
};

// Maps path and parses it. ML_E_IO / ML_E_ARG (not a regular file) from ml_file_open, else as
// gguf_parse.
ml_status gguf_open(gguf_file* g, const char* path, ml_error* err);

// Parses data[0, size), which must outlive g; path names it in messages.
ml_status gguf_parse(gguf_file* g, const uint8_t* data, size_t size, const char* path, ml_error* err);

// The entry whose key is key, or null.
const gguf_kv* gguf_find(const gguf_file* g, const char* key);

// Typed getters. When the key is absent: ML_E_FORMAT "<file>: key K is missing" if required, else
// ML_OK with *out untouched. A present key of the wrong type, or a value out of range, fails with
// ML_E_FORMAT naming the key, its type and value.
// u32: any integer type whose value is in 0..UINT32_MAX.
ml_status gguf_get_u32(const gguf_file* g, const char* key, bool required, uint32_t* out, ml_error* err);
// f32: F32, or F64 / an integer type whose value is a finite float.
ml_status gguf_get_f32(const gguf_file* g, const char* key, bool required, float* out, ml_error* err);
ml_status gguf_get_str(const gguf_file* g, const char* key, bool required, gguf_str* out, ml_error* err);
// An array whose elements have type elem (GGUF_V_STRING, GGUF_V_F32, GGUF_V_I32, ...); *out is
// null when absent and not required.
ml_status gguf_get_array(const gguf_file* g, const char* key, uint32_t elem, bool required, const gguf_kv** out,
                         ml_error* err);

// Element i (< kv->n) of an array of f32 / i32.
float gguf_arr_f32(const gguf_kv* kv, uint64_t i);
int32_t gguf_arr_i32(const gguf_kv* kv, uint64_t i);
// Every string of a string array, into out (kv->n entries, allocated here).
ml_status gguf_arr_strings(const gguf_file* g, const gguf_kv* kv, cv_buf* out, ml_error* err);

// The tensor named name, or null (binary search).
const gguf_tensor* gguf_find_tensor(const gguf_file* g, const char* name);

// The name of a value type for messages ("u32", "string", ...; "type N" when unknown).
const char* gguf_vtype_name(uint32_t type);
