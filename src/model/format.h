// The .mlb file format (docs/format.md is the byte-level specification): the header and the
// tensor directory as parsed structs, the parser/validator, and the writer used by ml_convert.
// Contract: ml_mlb_parse validates every field, offset and size against the file and fails with
// ML_E_FORMAT or ML_E_SHAPE and a message naming the field and its value; it never reads past
// the buffer it is given.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/status.h"

inline constexpr char ML_MLB_MAGIC[8] = {'K', 'R', 'A', 'F', 'L', 'M', 'L', 'B'};
inline constexpr uint32_t ML_MLB_VERSION = 2;      // written; version 1 files still load
inline constexpr uint32_t ML_MLB_VERSION_MIN = 1;
inline constexpr uint32_t ML_MLB_HEADER_SIZE = 256;
inline constexpr uint32_t ML_MLB_DIR_ENTRY_SIZE = 96;
inline constexpr uint32_t ML_MLB_NAME_MAX = 48;  // including the terminating NUL
inline constexpr uint64_t ML_MLB_ALIGN = 64;
inline constexpr uint32_t ML_MLB_RESERVED_OFFSET_V1 = 184;  // version 1: header bytes 184..255 are zero
inline constexpr uint32_t ML_MLB_RESERVED_OFFSET = 200;     // version 2: header bytes 200..255 are zero
inline constexpr size_t ML_MLB_NAME_ESC = 4 * ML_MLB_NAME_MAX;  // an escaped name, NUL included

enum ml_arch : uint32_t { ML_ARCH_LLAMA = 0, ML_ARCH_QWEN2 = 1, ML_ARCH_QWEN3 = 2, ML_ARCH_GEMMA3 = 3, ML_ARCH_QWEN35 = 4 };
// ml_dtype (F32, F16, Q8, Q4): krafla_types.h, through core/status.h.
enum ml_scale_type : uint32_t { ML_SCALE_F32 = 0, ML_SCALE_F16 = 1 };
enum ml_rope_type : uint32_t { ML_ROPE_INTERLEAVED = 0, ML_ROPE_HALF = 1 };
enum ml_rope_scaling : uint32_t { ML_ROPE_SCALING_NONE = 0, ML_ROPE_SCALING_LLAMA3 = 1, ML_ROPE_SCALING_LINEAR = 2 };
enum ml_activation : uint32_t { ML_ACT_SILU = 0, ML_ACT_GELU_TANH = 1 };
enum ml_mlb_flags : uint32_t {
  ML_FLAG_QKV_BIAS = 1u << 0,
  ML_FLAG_QK_NORM = 1u << 1,
  ML_FLAG_POST_NORMS = 1u << 2,
  ML_FLAG_TIED_CLASSIFIER = 1u << 3,
  ML_FLAG_ATTN_GATE = 1u << 4,  // attention output times sigmoid(attn_gate . h) (Qwen3.5's full-attention layers)
};
inline constexpr uint32_t ML_FLAGS_KNOWN = 0x1f;

// The header, field for field (docs/format.md, "Header").
struct ml_mlb_header {
  uint32_t version = ML_MLB_VERSION;
  uint32_t header_size = ML_MLB_HEADER_SIZE;
  uint32_t arch = ML_ARCH_LLAMA;
  uint32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
  uint32_t vocab_size = 0, max_seq = 0;
  uint32_t wtype = ML_DT_Q8, scale_type = ML_SCALE_F32;
  float norm_eps = 1e-5f, rope_theta = 10000.0f;
  uint32_t rope_type = ML_ROPE_INTERLEAVED, rope_scaling = ML_ROPE_SCALING_NONE;
  float rope_factor = 1.0f, rope_low_freq_factor = 1.0f, rope_high_freq_factor = 1.0f;
  uint32_t rope_orig_max_seq = 0;
  uint32_t flags = 0, activation = ML_ACT_SILU;
  float embed_scale = 1.0f;
  uint32_t sliding_window = 0, sliding_pattern = 0;
  uint32_t linear_period = 0, linear_k_heads = 0, linear_v_heads = 0, linear_k_dim = 0, linear_v_dim = 0,
           linear_conv = 0;
  uint32_t bos_id = 1, eos_id = 2;
  uint32_t hidden_dim_orig = 0;
  uint32_t n_tensors = 0;
  // Version 2 (zero in version 1 files, where each means its default):
  float rope_local_theta = 0.0f;  // RoPE base of sliding-window layers; 0: rope_theta (Gemma 3: 10000)
  uint32_t n_rot = 0;             // rotated dimensions per head, even, <= head_dim; 0: head_dim (Qwen3.5: 64)
  float attn_scale = 0.0f;        // attention score scale; 0: 1/sqrt(head_dim) (Gemma 3: query_pre_attn_scalar^-0.5)
  float logit_softcap = 0.0f;     // 0: none; c > 0: logits = c * tanh(logits / c) (Gemma 2/3 where configured)
  uint64_t dir_offset = 0, tokenizer_offset = 0, tokenizer_size = 0, file_size = 0;
};

// One directory entry (docs/format.md, "Tensor directory entry").
struct ml_mlb_tensor {
  char name[ML_MLB_NAME_MAX] = {0};
  uint32_t type = ML_DT_F32, scale_type = ML_SCALE_F32;
  uint32_t rows = 0, cols = 0;
  uint64_t data_offset = 0, data_size = 0, scale_offset = 0, scale_size = 0;
};

// A parsed, validated file. Pointers point into the caller's buffer.
struct ml_mlb {
  ml_mlb_header h;
  const uint8_t* base = nullptr;
  size_t size = 0;
  uint32_t n_tensors = 0;
  const uint8_t* dir = nullptr;      // raw directory; read entries with ml_mlb_tensor_at
  const uint8_t* tokenizer = nullptr;  // tokenizer section payload (after its 8-byte head), or null
  size_t tokenizer_size = 0;           // payload bytes
  uint32_t tokenizer_kind = 0;         // 1 = llama2.c tokenizer.bin, 2 = Hugging Face files (tokenizer/bundle.h)
};

// Parses and validates the header, the directory and the layout of every array (bounds,
// alignment, overlap, sizes). Content checks that need the model (tensor shapes, Q8 range) are
// done by the loader.
ml_status ml_mlb_parse(ml_mlb* m, const uint8_t* data, size_t size, ml_error* err);

// Hyperparameters the format allows (model/limits.h bounds, the header table's rules); the
// converter checks the header it is about to write with it. ML_E_FORMAT/ML_E_SHAPE naming the field.
ml_status ml_mlb_check_header(const ml_mlb_header* h, ml_error* err);

// A tensor name for messages: printable ASCII as is, every other byte (and '\\') as \xNN.
void ml_mlb_escape_name(const char* name, char out[ML_MLB_NAME_ESC]);

// Entry i of the directory (i < n_tensors).
ml_mlb_tensor ml_mlb_tensor_at(const ml_mlb* m, uint32_t i);

// Finds a tensor by name; false when absent. A linear scan: for many lookups use ml_mlb_index.
bool ml_mlb_find(const ml_mlb* m, const char* name, ml_mlb_tensor* out);

// The directory in name order, for O(log n) lookups (the loader binds every tensor by name).
struct ml_mlb_index {
  uint32_t* order = nullptr;  // directory indices sorted by name
  uint32_t n = 0;
};
ml_status ml_mlb_index_build(const ml_mlb* m, ml_mlb_index* idx, ml_error* err);
// The directory index of the tensor named name, or -1.
int64_t ml_mlb_index_find(const ml_mlb_index* idx, const ml_mlb* m, const char* name);
void ml_mlb_index_free(ml_mlb_index* idx);

// Encodes a header into 256 bytes (reserved bytes zero) and an entry into 96 bytes.
void ml_mlb_encode_header(const ml_mlb_header* h, uint8_t out[ML_MLB_HEADER_SIZE]);
void ml_mlb_encode_tensor(const ml_mlb_tensor* t, uint8_t out[ML_MLB_DIR_ENTRY_SIZE]);
