// A Hugging Face config.json (and optionally generation_config.json) as an .mlb header
// (docs/format.md, "Header"), for the safetensors importer (hf_import.cpp) and
// `ml_convert random --config`. Architectures (by architectures[0], else model_type):
//   LlamaForCausalLM / MistralForCausalLM (llama, mistral)      arch 0; sliding_window when set
//   Qwen2ForCausalLM (qwen2)                                      arch 1, q/k/v biases
//   Qwen3ForCausalLM (qwen3)                                      arch 2, q/k norms
//   Gemma3ForCausalLM (gemma3_text)                               arch 3
//   Qwen3_5ForConditionalGeneration / Qwen3_5ForCausalLM (qwen3_5 with text_config, qwen3_5_text)
//                                                                 arch 4, gated delta rule + gated attention
// Every model gets rotate-half RoPE (HF's layout: q/k are not permuted), the FFN width padded to a
// multiple of 32 (hidden_dim_orig keeps intermediate_size), wtype Q8 and f32 scales (the caller
// sets its own), bos/eos from bos_token_id/eos_token_id (the first of a list; generation_config's
// when config.json has none; 0 when neither has one). Defaults where a key is absent are
// transformers' (tie_word_embeddings: true for Gemma 3 only; Qwen3.5's partial_rotary_factor 0.25
// and full_attention_interval 4; Gemma 3's sliding_window_pattern 6, query_pre_attn_scalar 256,
// rope_theta 1e6, rope_local_base_freq 1e4). Features the engine does not have (another RoPE
// scaling, biases where the architecture has none, Qwen2's use_sliding_window, attention logit
// soft-capping, an activation other than the architecture's, a quantization_config) are refused.
// Gemma 3's larger models have rope_scaling linear 8: transformers applies it to the global layers
// only; the header has one rope_scaling, which the engine must apply that way.
// Errors: ML_E_FORMAT (ML_E_SHAPE for sizes the format refuses) naming the file and the key,
// e.g. "config.json: text_config.linear_num_value_heads is missing"; ML_E_IO / ML_E_ARG when a
// file cannot be opened or is not a regular file.
#pragma once
#include <cstddef>

#include "core/status.h"
#include "model/format.h"

ml_status cv_hf_config_read(const char* config_path, const char* generation_path_or_null, ml_mlb_header* out,
                            ml_error* err);

// The same over text in memory (tests, fuzzing); `what` names config.json in messages; gen may be
// null. The result passes ml_mlb_check_header.
ml_status cv_hf_config_parse(const char* json, size_t len, const char* gen, size_t gen_len, const char* what,
                             ml_mlb_header* out, ml_error* err);
