#include "model/pack.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/aligned.h"
#include "core/posix_compat.h"
#include "core/checked.h"
#include "core/hash.h"
#include "model/format.h"
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

// Releases a row-major matrix's pages once its packed copy exists. A tied classifier's original is
// the embedding: it is released too, and the rows the embedding lookup reads later come back from
// the file one at a time (a token's row, not the whole table).
void release_original(ml_model* m, const ml_qtensor* W) {
  const ml_file& f = m->file;
  const size_t nb = (size_t)W->rows * W->cols / ML_QK;
  const size_t q_bytes = W->type == ML_DT_Q4 ? nb * 16 : nb * 32;
  const size_t d_bytes = nb * (W->d_f16 ? 2 : 4);
  ml_file_release(&f, (size_t)(static_cast<const uint8_t*>(W->q) - f.data), q_bytes);
  ml_file_release(&f, (size_t)(static_cast<const uint8_t*>(W->d) - f.data), d_bytes);
}

// Packs W in chunks of whole row groups, releasing each chunk's original pages as soon as its
// packed copy exists: a large matrix (a 150,000-row embedding that is also the classifier) never
// has both copies resident at once. The packed layout is group-major, so chunk k of the rows
// packs into the same bytes the whole matrix would put there.
void pack_in_chunks(ml_model* m, ml_qtensor* W, const ml_pack_params* p, uint8_t* pq, uint8_t* pd) {
  const size_t G = (size_t)p->g, nb = (size_t)W->cols / ML_QK;
  const size_t row_q = W->type == ML_DT_Q4 ? nb * 16 : nb * 32, row_d = nb * (W->d_f16 ? 2 : 4);
  const size_t pd_elem = p->d16 && W->d_f16 ? 2 : 4;
  const size_t group_q = nb * G * (W->type == ML_DT_Q4 ? 16 : 32), group_d = nb * G * pd_elem;
  const size_t chunk = ((size_t)1 << 22) / (row_q * G) * G > G ? ((size_t)1 << 22) / (row_q * G) * G : G;  // ~4 MB
  for (size_t r0 = 0; r0 < (size_t)W->rows; r0 += chunk) {
    ml_qtensor part = *W;
    part.rows = (int)(W->rows - r0 < chunk ? W->rows - r0 : chunk);
    part.q = static_cast<const uint8_t*>(W->q) + r0 * row_q;
    part.d = static_cast<const uint8_t*>(W->d) + r0 * row_d;
    ml_pack_matrix(&part, p, pq + r0 / G * group_q, pd + r0 / G * group_d);
    const ml_file& f = m->file;
    ml_file_release(&f, (size_t)(static_cast<const uint8_t*>(part.q) - f.data), (size_t)part.rows * row_q);
    ml_file_release(&f, (size_t)(static_cast<const uint8_t*>(part.d) - f.data), (size_t)part.rows * row_d);
  }
  W->pq = pq;
  W->pd = pd;
  W->pd_f16 = p->d16 && W->d_f16;
}

bool write_all(int fd, const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n < ((size_t)1 << 30) ? n : ((size_t)1 << 30));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

// --- The pack cache (docs/format.md, "The pack cache"): a 512-byte header, then the packed
// region exactly as laid out in memory. Every header byte is determined by this build's pack
// parameters, the model file and the body, so a cache is used only when its header equals the
// one this run would write, byte for byte; the body's XXH3-64 makes that cover every body byte.
constexpr char CACHE_MAGIC[8] = {'K', 'R', 'A', 'F', 'L', 'P', 'K', '1'};
constexpr uint32_t CACHE_VERSION = 3;  // 3: XXH3-64 of the whole body, the model's identity
constexpr size_t CACHE_HEADER = 512;
constexpr size_t CACHE_BODY_HASH_AT = 104;

void put32(uint8_t* b, uint32_t v) { for (int i = 0; i < 4; ++i) b[i] = (uint8_t)(v >> (8 * i)); }
void put64(uint8_t* b, uint64_t v) { for (int i = 0; i < 8; ++i) b[i] = (uint8_t)(v >> (8 * i)); }

// XXH64 of the model's 256-byte header and its tensor directory: the shapes, types and offsets
// of every array, which the identity fields alone would not pin down for a rewritten file.
uint64_t model_layout_hash(const ml_model* m) {
  ml_xxh64_state s;
  ml_xxh64_init(&s);
  ml_xxh64_update(&s, m->file.data, ML_MLB_HEADER_SIZE);
  ml_xxh64_update(&s, m->mlb.dir, (size_t)m->mlb.n_tensors * ML_MLB_DIR_ENTRY_SIZE);
  return ml_xxh64_digest(&s);
}

// The body's hash: XXH64 of the little-endian XXH3-64 digests of its consecutive 1 MiB chunks
// (the last one shorter). The chunks' digests are independent, so the pool's threads compute
// them; the caller combines them in order.
constexpr size_t BODY_CHUNK = (size_t)1 << 20;

struct digest_task {
  const uint8_t* p;
  size_t n, chunks;
  uint64_t* digests;
  std::atomic<size_t> next{0};
};

void digest_worker(void* ctx, int, int) {
  digest_task& t = *static_cast<digest_task*>(ctx);
  for (size_t c = t.next.fetch_add(1); c < t.chunks; c = t.next.fetch_add(1)) {
    const size_t at = c * BODY_CHUNK, len = t.n - at < BODY_CHUNK ? t.n - at : BODY_CHUNK;
    t.digests[c] = ml_xxh3_64(t.p + at, len);
  }
}

// False only when the digests' array cannot be allocated.
bool body_hash(ml_pool* pool, const uint8_t* p, size_t n, uint64_t* out) {
  digest_task t;
  t.p = p;
  t.n = n;
  t.chunks = (n + BODY_CHUNK - 1) / BODY_CHUNK;
  t.digests = static_cast<uint64_t*>(std::malloc((t.chunks ? t.chunks : 1) * sizeof(uint64_t)));
  if (!t.digests) return false;
  ml_pool_run(pool, digest_worker, &t);
  ml_xxh64_state s;
  ml_xxh64_init(&s);
  for (size_t c = 0; c < t.chunks; ++c) {
    uint8_t d[8];
    put64(d, t.digests[c]);
    ml_xxh64_update(&s, d, 8);
  }
  std::free(t.digests);
  *out = ml_xxh64_digest(&s);
  return true;
}


// The header this run expects, with body_hash in its place.
void cache_header(const ml_model* m, const ml_pack_params* p, size_t bytes, uint64_t body_hash, uint8_t* h) {
  std::memset(h, 0, CACHE_HEADER);
  std::memcpy(h, CACHE_MAGIC, 8);
  put32(h + 8, CACHE_VERSION);
  put32(h + 12, (uint32_t)CACHE_HEADER);
  put32(h + 16, (uint32_t)p->g);
  put32(h + 20, (uint32_t)p->q8_offset);
  put32(h + 24, (uint32_t)p->q4_xor);
  put32(h + 28, p->d16 ? 1 : 0);
  put32(h + 32, p->pack_q8 ? 1 : 0);
  put32(h + 36, p->q8_step_xor);
  put32(h + 40, p->q4_step_xor);
  const ml_file_id& id = m->file.id;
  put64(h + 48, m->file.size);
  put64(h + 56, id.dev);
  put64(h + 64, id.ino);
  put64(h + 72, (uint64_t)id.mtime_ns);
  put64(h + 80, (uint64_t)id.ctime_ns);
  put64(h + 88, model_layout_hash(m));
  put64(h + 96, bytes);
  put64(h + CACHE_BODY_HASH_AT, body_hash);
}

// The first part of a header that differs from the expected one, for ml_pack_info::cache_miss.
const char* header_difference(const uint8_t* want, const uint8_t* got) {
  struct part {
    size_t begin, end;
    const char* name;
  };
  static const part parts[] = {{0, 48, "header (format or pack parameters)"},
                               {48, 88, "model identity (size, device, inode, mtime, ctime)"},
                               {88, 96, "model header or tensor directory"},
                               {96, CACHE_HEADER, "header (sizes or reserved bytes)"}};
  for (const part& q : parts)
    if (std::memcmp(want + q.begin, got + q.begin, q.end - q.begin) != 0) return q.name;
  return "header";
}

// What lies at path, without opening it (opening a FIFO for reading blocks until a writer
// comes): 0 nothing, 1 a regular file (symlinks followed), -1 anything else.
int cache_kind(const char* path) {
  struct stat st;
  if (::stat(path, &st) != 0) return errno == ENOENT ? 0 : -1;
  return S_ISREG(st.st_mode) ? 1 : -1;
}

// Maps a matching cache; false (and nothing mapped, *why saying what differed) when it is
// missing, stale or damaged.
bool map_cache(ml_model* m, const ml_pack_params* p, ml_pool* pool, const char* path, size_t bytes, const char** why) {
  const int kind = cache_kind(path);
  if (kind <= 0) {
    *why = kind == 0 ? "missing" : "not a regular file";
    return false;
  }
  ml_file f;
  if (ml_file_open(&f, path, nullptr) != ML_OK) {
    *why = "cannot be opened";
    return false;
  }
  uint8_t want[CACHE_HEADER];
  bool ok = f.size == CACHE_HEADER + bytes;
  if (!ok) *why = "size";
  if (ok) {  // the header first (cheap), taking the stored body hash; then the body against it
    cache_header(m, p, bytes, 0, want);
    std::memcpy(want + CACHE_BODY_HASH_AT, f.data + CACHE_BODY_HASH_AT, 8);
    ok = std::memcmp(want, f.data, CACHE_HEADER) == 0;
    if (!ok) *why = header_difference(want, f.data);
  }
  if (ok) {
    uint64_t stored = 0;
    for (int i = 7; i >= 0; --i) stored = stored << 8 | f.data[CACHE_BODY_HASH_AT + i];
    uint64_t got = 0;
    ok = body_hash(pool, f.data + CACHE_HEADER, bytes, &got) && got == stored;
    if (!ok) *why = "body hash";
  }
  if (!ok) {
    ml_file_close(&f);
    return false;
  }
  m->pack_file = f;
  return true;
}

// Writes header + packed region to path through a temporary file and a rename. Only a regular
// file (or nothing) at path is replaced: a FIFO, device, directory or symlink there is left alone.
bool write_cache(const ml_model* m, const ml_pack_params* p, const char* path, const uint8_t* packed, size_t bytes,
                 uint64_t hash) {
  struct stat st;
  if (::lstat(path, &st) == 0 ? !S_ISREG(st.st_mode) : errno != ENOENT) return false;
  char tmp[4096];
  if (std::snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)::getpid()) >= (int)sizeof tmp) return false;
  // O_EXCL: never open (and block on, or write through) whatever may already sit at tmp.
  const int fd = ::open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  uint8_t h[CACHE_HEADER];
  cache_header(m, p, bytes, hash, h);
  bool ok = write_all(fd, h, CACHE_HEADER) && write_all(fd, packed, bytes);
  ok = (::fsync(fd) == 0) && ok;
  ok = (::close(fd) == 0) && ok;
  if (ok) ok = ml_file_replace(tmp, path);  // std::rename cannot replace a file on Windows
  if (!ok) ::unlink(tmp);
  return ok;
}

}  // namespace

void ml_pack_cache_path(const char* model_path, int g, char* out, size_t cap) {
  std::snprintf(out, cap, "%s.pk%d", model_path, g);
}

namespace {

// One matrix to pack: where its packed arrays go, and where the previous one's ended (the
// alignment gap from there is zeroed, so the cache's bytes and hash are deterministic).
struct pack_job {
  ml_qtensor* W;
  layout lay;
  size_t gap_from;
};

struct pack_task {
  ml_model* m;
  const ml_pack_params* p;
  uint8_t* mem;
  pack_job* jobs;
  int n;
  std::atomic<int> next{0};
};

// Threads take whole matrices in order; each packs its matrix in chunks and releases the
// original's pages as it goes, so at most one chunk per thread is resident twice.
void pack_worker(void* ctx, int, int) {
  pack_task& t = *static_cast<pack_task*>(ctx);
  for (int i = t.next.fetch_add(1); i < t.n; i = t.next.fetch_add(1)) {
    const pack_job& j = t.jobs[i];
    size_t qb, db;
    ml_pack_sizes(j.W->type, j.W->rows, j.W->cols, j.W->d_f16, t.p, &qb, &db);
    std::memset(t.mem + j.gap_from, 0, j.lay.q_off - j.gap_from);
    std::memset(t.mem + j.lay.q_off + qb, 0, j.lay.d_off - (j.lay.q_off + qb));
    pack_in_chunks(t.m, j.W, t.p, t.mem + j.lay.q_off, t.mem + j.lay.d_off);
    release_original(t.m, j.W);
  }
}

// Maps a matching cache over the laid-out matrices, or packs them on the pool (and writes the
// cache when one was asked for).
ml_status pack_all(ml_model* m, const ml_pack_params* p, const char* cache_path, ml_pool* pool, pack_job* jobs,
                   int n, size_t total, ml_pack_info* info, ml_error* err) {
  if (cache_path && map_cache(m, p, pool, cache_path, total, &info->cache_miss)) {
    const uint8_t* base = m->pack_file.data + CACHE_HEADER;
    for (int i = 0; i < n; ++i) {
      ml_qtensor* W = jobs[i].W;
      W->pq = base + jobs[i].lay.q_off;
      W->pd = base + jobs[i].lay.d_off;
      W->pd_f16 = p->d16 && W->d_f16;
      release_original(m, W);
    }
    info->from_cache = true;
  } else {
    size_t cap;
    if (!ml_align_up(total, 64, &cap)) return ml_fail(err, ML_E_NOMEM, "packing: %zu bytes overflow", total);
    m->packed_mem = ml_aligned_alloc_huge(cap == 0 ? 64 : cap);
    if (!m->packed_mem) return ml_fail(err, ML_E_NOMEM, "packing: cannot allocate %zu bytes", total);
    pack_task t;
    t.m = m;
    t.p = p;
    t.mem = static_cast<uint8_t*>(m->packed_mem);
    t.jobs = jobs;
    t.n = n;
    ml_pool_run(pool, pack_worker, &t);
  }
  info->packed = true;
  info->g = p->g;
  info->bytes = total;
  if (cache_path && !info->from_cache) {
    const uint8_t* mem = static_cast<const uint8_t*>(m->packed_mem);
    uint64_t hash;
    info->cache_written = body_hash(pool, mem, total, &hash) && write_cache(m, p, cache_path, mem, total, hash);
  }
  return ML_OK;
}

}  // namespace

ml_status ml_model_pack(ml_model* m, const ml_pack_params* p, const char* cache_path, ml_pool* pool,
                        ml_pack_info* info, ml_error* err) {
  *info = ml_pack_info{};
  int n = 0;
  for_each_matrix(m, p, [&](ml_qtensor*) { ++n; });
  if (n == 0) return ML_OK;
  // Lay out every matrix, then either map the cache or pack into fresh memory.
  pack_job* jobs = static_cast<pack_job*>(std::malloc((size_t)n * sizeof(pack_job)));
  if (!jobs) return ml_fail(err, ML_E_NOMEM, "packing: cannot allocate the list of %d matrices", n);
  size_t total = 0;
  bool overflow = false;
  int i = 0;
  for_each_matrix(m, p, [&](ml_qtensor* W) {
    pack_job& j = jobs[i++];
    j.W = W;
    j.gap_from = total;
    if (!matrix_layout(m, W, p, total, &j.lay)) overflow = true;
    else total = j.lay.end;
  });
  if (overflow) {
    std::free(jobs);
    return ml_fail(err, ML_E_NOMEM, "packing: the packed matrices' size overflows the address space");
  }
  const ml_status s = pack_all(m, p, cache_path, pool, jobs, n, total, info, err);
  std::free(jobs);
  return s;
}
