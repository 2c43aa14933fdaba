// Packing a loaded model's weight matrices into the build's row-interleaved layout (core/pack.h),
// and the pack cache that saves the packed arrays next to the model for later runs.
// Every matrix but the embedding is packed (a tied classifier gets its own packed copy). Each
// thread packs one matrix at a time, in chunks, and releases the original's mapped pages as soon
// as each chunk's copy is written, so resident memory stays near the model's size plus a chunk
// (about 4 MB) per thread.
#pragma once
#include <cstddef>

#include "core/pack.h"
#include "core/status.h"
#include "core/threads.h"
#include "model/model.h"

struct ml_pack_info {
  bool packed = false;       // the model runs on packed kernels
  bool from_cache = false;   // the packed arrays were mapped from a pack cache
  bool cache_written = false;
  const char* cache_miss = nullptr;  // why a cache was not used: "missing", "body hash", ... (static)
  int g = 0;                 // the pack group
  size_t bytes = 0;          // packed quants + scales
};

// Packs m with p (p->g == 0: nothing to do). cache_path: null for no cache; else a matching
// cache is mapped instead of packing, and a missing, mismatched or damaged one is rewritten
// (atomically: a temporary file renamed into place). A cache matches when its whole header
// equals the one this run would write (this build's pack parameters; the model's size, device,
// inode, mtime and ctime, and XXH64 of its header and tensor directory) and its body's XXH3-64
// equals the header's (docs/format.md, "The pack cache"). Something at cache_path that is not a
// regular file is never opened for reading nor replaced. A cache that cannot be written is not
// an error: the model still runs, packed in memory. pool (null: the caller alone) packs whole
// matrices in parallel and hashes a cache's body; the bytes are the same for any thread count.
ml_status ml_model_pack(ml_model* m, const ml_pack_params* p, const char* cache_path, ml_pool* pool,
                        ml_pack_info* info, ml_error* err);

// The cache file the engine uses for a model: MODEL.pk<G>.
void ml_pack_cache_path(const char* model_path, int g, char* out, size_t cap);
