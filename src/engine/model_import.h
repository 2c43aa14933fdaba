// Models in the formats users download, opened directly (converted at load): a Hugging Face model
// folder (config.json beside the safetensors) and a GGUF file, by path or (GGUF) by bytes. The
// converter library writes the .mlb straight into an unlinked temporary file that is then mapped
// (ml_model_load_file), so memory stays about one model: the source is mapped, each tensor's
// converted copy is freed as it is written, and no buffer holds the whole result. Where there is
// no such file (the wasm build) the .mlb is built in one malloc'd buffer instead.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/file.h"
#include "core/status.h"

// What a path or a buffer holds.
enum ml_source_kind { ML_SOURCE_MLB, ML_SOURCE_GGUF, ML_SOURCE_HF_DIR };

// By the first bytes ("GGUF") or, for a path, a folder with config.json. Anything else is MLB
// (the .mlb loader then names what is wrong with it).
ml_source_kind ml_source_kind_of_path(const char* path);
ml_source_kind ml_source_kind_of_bytes(const void* data, size_t size);

// Converts the GGUF file or HF folder at path (data/size: the GGUF's bytes instead, path naming
// them) into f: the .mlb in a mapped unlinked temporary file, or (no temporary file) a malloc'd
// buffer f owns (core/file.h's ml_file_adopt). Close f with ml_file_close.
ml_status ml_import(ml_source_kind kind, const char* path, const void* data, size_t size, ml_file* f, ml_error* err);
