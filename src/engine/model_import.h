// Models in the formats users download, opened directly (converted at load): a Hugging Face model
// folder (config.json beside the safetensors) and a GGUF file, by path or (GGUF) by bytes. The
// converter library writes the .mlb into memory, and the model takes that buffer
// (ml_model_load_owned), so memory stays about one model: the source is mapped, each tensor's
// converted copy is freed as it is laid out, and the result moves to an unlinked mapped file.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/status.h"

// What a path or a buffer holds.
enum ml_source_kind { ML_SOURCE_MLB, ML_SOURCE_GGUF, ML_SOURCE_HF_DIR };

// By the first bytes ("GGUF") or, for a path, a folder with config.json. Anything else is MLB
// (the .mlb loader then names what is wrong with it).
ml_source_kind ml_source_kind_of_path(const char* path);
ml_source_kind ml_source_kind_of_bytes(const void* data, size_t size);

// Converts the GGUF file or HF folder at path (data/size: the GGUF's bytes instead, path naming
// them) into an .mlb in a malloc'd buffer (*out, *out_size; free with std::free).
ml_status ml_import_to_memory(ml_source_kind kind, const char* path, const void* data, size_t size, uint8_t** out,
                              size_t* out_size, ml_error* err);
