// GGUF's constants, shared by the reader (gguf.cpp) and the writer (gguf_write.cpp): the metadata
// value types, the ggml tensor types krafla knows by id with their block shapes, and the file's
// fixed fields. Source: ggml's docs/gguf.md (format version 3; version 2 has the same layout).
#pragma once
#include <cstdint>

inline constexpr uint32_t GGUF_MAGIC = 0x46554747;  // "GGUF" read as a little-endian u32
inline constexpr uint32_t GGUF_VERSION = 3;         // written; versions 2 and 3 are read
inline constexpr uint32_t GGUF_DEFAULT_ALIGNMENT = 32;  // general.alignment when absent

// Metadata value types.
enum gguf_vtype : uint32_t {
  GGUF_V_U8 = 0, GGUF_V_I8 = 1, GGUF_V_U16 = 2, GGUF_V_I16 = 3, GGUF_V_U32 = 4, GGUF_V_I32 = 5,
  GGUF_V_F32 = 6, GGUF_V_BOOL = 7, GGUF_V_STRING = 8, GGUF_V_ARRAY = 9, GGUF_V_U64 = 10, GGUF_V_I64 = 11,
  GGUF_V_F64 = 12,
};

// ggml tensor types (ggml.h's GGML_TYPE_* values).
enum gguf_ttype : uint32_t {
  GGUF_T_F32 = 0, GGUF_T_F16 = 1, GGUF_T_Q4_0 = 2, GGUF_T_Q4_1 = 3, GGUF_T_Q5_0 = 6, GGUF_T_Q5_1 = 7,
  GGUF_T_Q8_0 = 8, GGUF_T_Q8_1 = 9, GGUF_T_Q2_K = 10, GGUF_T_Q3_K = 11, GGUF_T_Q4_K = 12, GGUF_T_Q5_K = 13,
  GGUF_T_Q6_K = 14, GGUF_T_Q8_K = 15, GGUF_T_BF16 = 30,
};

// A tensor type's block: `values` elements stored in `bytes` bytes. Q8_0 is an f16 scale then 32
// int8; Q4_0 an f16 scale then 16 bytes, byte j holding element j (low nibble) and j + 16 (high).
struct gguf_block {
  uint32_t type;
  uint32_t values, bytes;
  const char* name;
};

inline constexpr gguf_block GGUF_BLOCKS[] = {
    {GGUF_T_F32, 1, 4, "F32"},       {GGUF_T_F16, 1, 2, "F16"},        {GGUF_T_Q4_0, 32, 18, "Q4_0"},
    {GGUF_T_Q4_1, 32, 20, "Q4_1"},   {GGUF_T_Q5_0, 32, 22, "Q5_0"},    {GGUF_T_Q5_1, 32, 24, "Q5_1"},
    {GGUF_T_Q8_0, 32, 34, "Q8_0"},   {GGUF_T_Q8_1, 32, 36, "Q8_1"},    {GGUF_T_Q2_K, 256, 84, "Q2_K"},
    {GGUF_T_Q3_K, 256, 110, "Q3_K"}, {GGUF_T_Q4_K, 256, 144, "Q4_K"},  {GGUF_T_Q5_K, 256, 176, "Q5_K"},
    {GGUF_T_Q6_K, 256, 210, "Q6_K"}, {GGUF_T_Q8_K, 256, 292, "Q8_K"},  {GGUF_T_BF16, 1, 2, "BF16"},
};

// The block of a type, or null when krafla does not know it.
inline const gguf_block* gguf_block_of(uint32_t type) {
  for (const gguf_block& b : GGUF_BLOCKS)
    if (b.type == type) return &b;
  return nullptr;
}
