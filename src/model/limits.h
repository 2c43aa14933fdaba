// The engine's named limits (docs/reliability.md, "Limits and bad input"). The .mlb parser and
// loader refuse files beyond them, the converter refuses to write such files, and the apps refuse
// option values beyond them, all before any work is done, so the three can never disagree.
// Every limit keeps its products inside 64-bit (and, for the context, int) arithmetic.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/status.h"

inline constexpr uint32_t ML_LIMIT_TENSORS = 1000000;       // directory entries (96 MB of directory)
inline constexpr uint32_t ML_LIMIT_LAYERS = 4096;           // n_layers
inline constexpr uint32_t ML_LIMIT_HEADS = 4096;            // n_heads (and so n_kv_heads)
inline constexpr uint32_t ML_LIMIT_HEAD_DIM = 4096;         // head_dim
inline constexpr uint32_t ML_LIMIT_DIM = 65536;             // dim (Llama 3 405B: 16384)
inline constexpr uint32_t ML_LIMIT_HIDDEN = 262144;         // hidden_dim (Llama 3 405B: 53248)
inline constexpr uint32_t ML_LIMIT_VOCAB = 1u << 24;        // vocab_size, 16,777,216 (Gemma 3: 262,144)
inline constexpr uint32_t ML_LIMIT_MAX_SEQ = 1u << 24;      // max_seq and --ctx, 16,777,216 positions
inline constexpr uint32_t ML_LIMIT_TOKEN_BYTES = 1u << 20;  // a tokenizer.bin's max_token_length
// The context a model gets when none is asked for (--ctx, ml_model_params.ctx): its max_seq, but
// at most this many positions (llama.cpp's default context is 4096 too).
inline constexpr int ML_DEFAULT_CTX_CAP = 4096;

// This machine's physical memory in bytes (sysconf _SC_PHYS_PAGES x _SC_PAGE_SIZE); 0 when unknown
// (then no request is refused for its size alone).
uint64_t ml_phys_mem_bytes();

// Fails with ML_E_NOMEM when bytes exceed this machine's physical memory; the message is
// "<what> needs N bytes, more than this machine's M bytes of RAM<hint>", so what and hint name the
// field or option that decided the size. OK when the memory size is unknown.
ml_status ml_check_ram(uint64_t bytes, const char* what, const char* hint, ml_error* err);
