#include "model/pack.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include <unistd.h>

#include "core/checked.h"
#include "model/tensor_table.h"

namespace {

// The matrices that get packed, in the one order both packing and the cache use (the tensor
// table's), and of those, the ones this build packs.
bool packs(const ml_qtensor* W, const ml_pack_params* p) { return p->g > 0 && (W->type == ML_DT_Q4 || p->pack_q8); }

template <class F>
void for_each_matrix(ml_model* m, const ml_pack_params* p, F&& f) {
  ml_for_each_packed(m, [&](ml_qtensor* W) {
    if (packs(W, p)) f(W);
  });
}

// Offsets of one matrix's packed arrays inside the packed region.
struct layout {
  size_t q_off = 0, d_off = 0, end = 0;
};

bool matrix_layout(const ml_model* m, const ml_qtensor* W, const ml_pack_params* p, size_t at, layout* out) {
  size_t qb, db;
  if (!ml_pack_sizes(W->type, W->rows, W->cols, W->d_f16, p, &qb, &db)) return false;
  size_t q_end, d_off, d_end;
  if (!ml_align_up(at, 64, &out->q_off) || !ml_add(out->q_off, qb, &q_end) || !ml_align_up(q_end, 64, &d_off) ||
      !ml_add(d_off, db, &d_end))
    return false;
  out->d_off = d_off;
  out->end = d_end;
  return true;
}

// Releases a row-major matrix's pages once its packed copy exists (not the embedding's, which the
// embedding lookup still reads when the classifier is tied).
void release_original(ml_model* m, const ml_qtensor* W) {
  if (W->q == m->tok_embd.q) return;
  const ml_file& f = m->file;
  const size_t nb = (size_t)W->rows * W->cols / ML_QK;
  const size_t q_bytes = W->type == ML_DT_Q4 ? nb * 16 : nb * 32;
  const size_t d_bytes = nb * (W->d_f16 ? 2 : 4);
  ml_file_release(&f, (size_t)(static_cast<const uint8_t*>(W->q) - f.data), q_bytes);
  ml_file_release(&f, (size_t)(static_cast<const uint8_t*>(W->d) - f.data), d_bytes);
}

// --- The pack cache: a 512-byte header, then the packed region exactly as laid out in memory.
constexpr char CACHE_MAGIC[8] = {'K', 'R', 'A', 'F', 'L', 'P', 'K', '1'};
constexpr size_t CACHE_HEADER = 512;

uint64_t fnv1a(uint64_t h, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}

// A hash of 64 evenly spaced 64-byte samples of a region (and its first 256 bytes).
uint64_t sampled_hash(const uint8_t* p, size_t n) {
  uint64_t h = fnv1a(0xCBF29CE484222325ull, p, n < 256 ? n : 256);
  if (n < 64) return h;
  for (int i = 0; i < 64; ++i) h = fnv1a(h, p + (n - 64) / 63 * (size_t)i, 64);
  return h;
}

void put32(uint8_t* b, uint32_t v) { for (int i = 0; i < 4; ++i) b[i] = (uint8_t)(v >> (8 * i)); }
void put64(uint8_t* b, uint64_t v) { for (int i = 0; i < 8; ++i) b[i] = (uint8_t)(v >> (8 * i)); }

void cache_header(const ml_model* m, const ml_pack_params* p, const uint8_t* packed, size_t bytes, uint8_t* h) {
  std::memset(h, 0, CACHE_HEADER);
  std::memcpy(h, CACHE_MAGIC, 8);
  put32(h + 8, 2);  // version (2: the step XORs)
  put32(h + 12, (uint32_t)p->g);
  put32(h + 16, (uint32_t)p->q8_offset);
  put32(h + 20, (uint32_t)p->q4_xor);
  put32(h + 24, p->d16 ? 1 : 0);
  put32(h + 28, p->pack_q8 ? 1 : 0);
  put64(h + 32, m->file.size);
  put64(h + 40, sampled_hash(m->file.data, m->file.size));
  put64(h + 48, fnv1a(0xCBF29CE484222325ull, m->file.data, 256));
  put64(h + 56, bytes);
  put64(h + 64, sampled_hash(packed, bytes));
  put32(h + 72, p->q8_step_xor);
  put32(h + 76, p->q4_step_xor);
}

// Maps a matching cache; false (and nothing mapped) when it is missing, stale or damaged.
bool map_cache(ml_model* m, const ml_pack_params* p, const char* path, size_t bytes) {
  ml_file f;
  if (ml_file_open(&f, path, nullptr) != ML_OK) return false;
  uint8_t want[CACHE_HEADER];
  bool ok = f.size == CACHE_HEADER + bytes;
  if (ok) {
    cache_header(m, p, f.data + CACHE_HEADER, bytes, want);
    ok = std::memcmp(want, f.data, CACHE_HEADER) == 0;
  }
  if (!ok) {
    ml_file_close(&f);
    return false;
  }
  m->pack_file = f;
  return true;
}

// Writes header + packed region to path through a temporary file and a rename.
bool write_cache(const ml_model* m, const ml_pack_params* p, const char* path, const uint8_t* packed, size_t bytes) {
  char tmp[4096];
  if (std::snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)::getpid()) >= (int)sizeof tmp) return false;
  FILE* f = std::fopen(tmp, "wb");
  if (!f) return false;
  uint8_t h[CACHE_HEADER];
  cache_header(m, p, packed, bytes, h);
  bool ok = std::fwrite(h, 1, CACHE_HEADER, f) == CACHE_HEADER && std::fwrite(packed, 1, bytes, f) == bytes;
  ok = (std::fflush(f) == 0) && ok;
  ok = (::fsync(::fileno(f)) == 0) && ok;
  ok = (std::fclose(f) == 0) && ok;
  if (ok) ok = std::rename(tmp, path) == 0;
  if (!ok) std::remove(tmp);
  return ok;
}

}  // namespace

void ml_pack_cache_path(const char* model_path, int g, char* out, size_t cap) {
  std::snprintf(out, cap, "%s.pk%d", model_path, g);
}

ml_status ml_model_pack(ml_model* m, const ml_pack_params* p, const char* cache_path, ml_pack_info* info,
                        ml_error* err) {
  *info = ml_pack_info{};
  bool any = false;
  for_each_matrix(m, p, [&](ml_qtensor*) { any = true; });
  if (!any) return ML_OK;
  // Lay out every matrix, then either map the cache or pack into fresh memory.
  size_t total = 0;
  bool overflow = false;
  for_each_matrix(m, p, [&](ml_qtensor* W) {
    layout lay;
    if (!matrix_layout(m, W, p, total, &lay)) overflow = true;
    else total = lay.end;
  });
  if (overflow) return ml_fail(err, ML_E_NOMEM, "packing: the packed matrices' size overflows the address space");

  const uint8_t* base = nullptr;
  if (cache_path && map_cache(m, p, cache_path, total)) {
    base = m->pack_file.data + CACHE_HEADER;
    info->from_cache = true;
  } else {
    size_t cap;
    if (!ml_align_up(total, 64, &cap)) return ml_fail(err, ML_E_NOMEM, "packing: %zu bytes overflow", total);
    m->packed_mem = std::aligned_alloc(64, cap == 0 ? 64 : cap);
    if (!m->packed_mem) return ml_fail(err, ML_E_NOMEM, "packing: cannot allocate %zu bytes", total);
    base = static_cast<const uint8_t*>(m->packed_mem);
  }
  size_t at = 0;
  for_each_matrix(m, p, [&](ml_qtensor* W) {
    layout lay;
    matrix_layout(m, W, p, at, &lay);
    if (info->from_cache) {
      W->pq = base + lay.q_off;
      W->pd = base + lay.d_off;
      W->pd_f16 = p->d16 && W->d_f16;
    } else {
      uint8_t* mem = static_cast<uint8_t*>(m->packed_mem);
      // Alignment gaps are zeroed so the cache's bytes (and its hash) are deterministic.
      size_t qb, db;
      ml_pack_sizes(W->type, W->rows, W->cols, W->d_f16, p, &qb, &db);
      std::memset(mem + at, 0, lay.q_off - at);
      std::memset(mem + lay.q_off + qb, 0, lay.d_off - (lay.q_off + qb));
      ml_pack_matrix(W, p, mem + lay.q_off, mem + lay.d_off);
    }
    release_original(m, W);
    at = lay.end;
  });
  info->packed = true;
  info->g = p->g;
  info->bytes = total;
  if (cache_path && !info->from_cache) {
    info->cache_written = write_cache(m, p, cache_path, static_cast<const uint8_t*>(m->packed_mem), total);
    // The header's sampled hash of the model faulted pages of the released matrices back in
    // (the kernel maps whole large folios around each sample: about 100 MiB on a 300 MiB model).
    for_each_matrix(m, p, [&](ml_qtensor* W) { release_original(m, W); });
  }
  return ML_OK;
}
