// The llama2.c tokenizer: tokenizer.bin loading with full validation, run.c-exact encoding with a
// hash index over the pieces and a heap of candidate merges, and run.c's decoding.
//
// run.c's merge loop rescans every adjacent pair per merge (O(n^2) lookups, each a bsearch).
// Here the symbols form a doubly linked list over an array whose order is the text order, and
// every adjacent pair whose concatenation is a token sits in a max-heap keyed by (score, -left
// position). Popping the top gives run.c's choice: highest score, leftmost on ties. Entries made
// stale by a merge are recognised on pop (left symbol dead, or its neighbour or ids changed) and
// dropped. Lookups hash the two pieces without concatenating them.
#include "model/tokenizer/llama2c.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/checked.h"
#include "model/limits.h"

static_assert(std::endian::native == std::endian::little, "tokenizer.bin is little-endian; add byte swaps");

struct ml_l2c {
  int32_t vocab = 0;
  int32_t bos = 1, eos = 2;
  int32_t max_token_length = 0;
  float* score = nullptr;     // [vocab]
  uint32_t* off = nullptr;    // [vocab + 1]: piece i is text[off[i], off[i+1])
  char* text = nullptr;       // every piece, back to back
  int16_t* byte_of = nullptr; // [vocab]: b when piece i is "<0xHH>", else -1
  int32_t* table = nullptr;   // open-addressing hash of piece -> id; -1 empty
  uint32_t table_mask = 0;
  int32_t byte_id[256];       // token of "<0xHH>" for byte b, or -1 (run.c assumes b + 3)
  char byte_char[256];        // byte b as a one-byte piece
};

namespace {

// Merges whose token scores at most this never happen: run.c starts its search at -1e10 and
// takes a pair only when its score is strictly greater.
constexpr float kNoMerge = -1e10f;

inline uint32_t fnv_step(uint32_t h, const char* s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    h ^= static_cast<uint8_t>(s[i]);
    h *= 16777619u;
  }
  return h;
}
constexpr uint32_t kFnvBasis = 2166136261u;

// Id of the piece equal to a[0,na) followed by b[0,nb), or -1.
int32_t find2(const ml_l2c* t, const char* a, size_t na, const char* b, size_t nb) {
  const uint32_t h = fnv_step(fnv_step(kFnvBasis, a, na), b, nb);
  for (uint32_t slot = h & t->table_mask;; slot = (slot + 1) & t->table_mask) {
    const int32_t id = t->table[slot];
    if (id < 0) return -1;
    const size_t len = t->off[id + 1] - t->off[id];
    const char* p = t->text + t->off[id];
    if (len == na + nb && std::memcmp(p, a, na) == 0 && (nb == 0 || std::memcmp(p + na, b, nb) == 0)) return id;
  }
}

inline const char* piece_of(const ml_l2c* t, int32_t id, size_t* len) {
  *len = t->off[id + 1] - t->off[id];
  return t->text + t->off[id];
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// b when s[0,n) is "<0xHH>", else -1.
int parse_byte_piece(const char* s, size_t n) {
  if (n != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
  const int hi = hex_digit(s[3]), lo = hex_digit(s[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

int32_t read_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// One pass over the file: validates every entry and counts tokens and piece bytes. With
// vocab_size 0 the token count is whatever ends exactly at the end of the buffer.
ml_status scan(const uint8_t* data, size_t size, uint32_t vocab_size, int32_t* max_len, uint32_t* n_tokens,
               size_t* text_bytes, ml_error* err) {
  if (size < 4) return ml_fail(err, ML_E_FORMAT, "tokenizer: max_token_length truncated (%zu bytes, need 4)", size);
  *max_len = read_i32(data);
  if (*max_len <= 0 || *max_len > (int32_t)ML_LIMIT_TOKEN_BYTES)
    return ml_fail(err, ML_E_FORMAT, "tokenizer: max_token_length %d is out of range 1..%u", (int)*max_len,
                   ML_LIMIT_TOKEN_BYTES);
  size_t pos = 4, total = 0;
  uint32_t i = 0;
  for (;; i++) {
    if (vocab_size != 0 && i == vocab_size) break;
    if (vocab_size == 0 && pos == size) break;
    if (i == ML_LIMIT_VOCAB) return ml_fail(err, ML_E_FORMAT, "tokenizer: more than %u tokens", i);
    if (size - pos < 8)
      return ml_fail(err, ML_E_FORMAT, "tokenizer: token %u: %s truncated at byte %zu (file has %zu bytes)", i,
                     size - pos < 4 ? "score" : "len", pos, size);
    float score;
    std::memcpy(&score, data + pos, 4);
    const int32_t len = read_i32(data + pos + 4);
    if (std::isnan(score)) return ml_fail(err, ML_E_FORMAT, "tokenizer: token %u: score is NaN", i);
    if (len < 0) return ml_fail(err, ML_E_FORMAT, "tokenizer: token %u: len %d is negative", i, (int)len);
    if (len > *max_len)
      return ml_fail(err, ML_E_FORMAT, "tokenizer: token %u: len %d exceeds max_token_length %d", i, (int)len,
                     (int)*max_len);
    pos += 8;
    if (size - pos < (size_t)len)
      return ml_fail(err, ML_E_FORMAT, "tokenizer: token %u: bytes truncated: len %d at byte %zu, file has %zu bytes",
                     i, (int)len, pos, size);
    pos += (size_t)len;
    total += (size_t)len;
  }
  if (pos != size)
    return ml_fail(err, ML_E_FORMAT, "tokenizer: %zu bytes follow token %u: the file holds more than vocab_size %u tokens",
                   size - pos, i - 1, vocab_size);
  if (i < 3) return ml_fail(err, ML_E_FORMAT, "tokenizer: vocab_size %u is below 3 (<unk>, <s>, </s>)", i);
  if ((uint64_t)total > UINT32_MAX) return ml_fail(err, ML_E_FORMAT, "tokenizer: %zu bytes of pieces exceed 4 GiB", total);
  *n_tokens = i;
  *text_bytes = total;
  return ML_OK;
}

template <class T>
ml_status alloc_array(T** out, size_t count, const char* what, ml_error* err) {
  size_t bytes;
  if (!ml_mul(count ? count : 1, sizeof(T), &bytes))
    return ml_fail(err, ML_E_NOMEM, "tokenizer: %s of %zu entries overflows", what, count);
  *out = static_cast<T*>(std::malloc(bytes));
  if (!*out) return ml_fail(err, ML_E_NOMEM, "tokenizer: cannot allocate %zu bytes for %s", bytes, what);
  return ML_OK;
}

// ---- encoding ------------------------------------------------------------------------------

struct Sym {
  int32_t id;
  int32_t prev, next;  // neighbours in the list, -1 at the ends
};

// A candidate merge of symbols left and left's right neighbour right, valid while both still
// hold lid and rid and are adjacent.
struct Cand {
  float score;
  int32_t left, right, lid, rid, merged;
};

// Max-heap order: higher score first, then smaller (leftmost) position.
inline bool heap_less(const Cand& a, const Cand& b) {
  if (a.score != b.score) return a.score < b.score;
  return a.left > b.left;
}

struct Encoder {
  const ml_l2c* t;
  Sym* sym;
  Cand* heap;
  size_t n_heap;

  void try_pair(int32_t left) {
    if (left < 0) return;
    const int32_t right = sym[left].next;
    if (right < 0) return;
    size_t la, lb;
    const char* a = piece_of(t, sym[left].id, &la);
    const char* b = piece_of(t, sym[right].id, &lb);
    const int32_t id = find2(t, a, la, b, lb);
    if (id < 0 || !(t->score[id] > kNoMerge)) return;
    heap[n_heap++] = Cand{t->score[id], left, right, sym[left].id, sym[right].id, id};
    std::push_heap(heap, heap + n_heap, heap_less);
  }

  void merge_all() {
    while (n_heap > 0) {
      std::pop_heap(heap, heap + n_heap, heap_less);
      const Cand c = heap[--n_heap];
      Sym& l = sym[c.left];
      if (l.id != c.lid || l.next != c.right || sym[c.right].id != c.rid) continue;  // stale
      l.id = c.merged;
      const int32_t nx = sym[c.right].next;
      l.next = nx;
      if (nx >= 0) sym[nx].prev = c.left;
      sym[c.right].id = -1;  // dead: any entry naming it as left or right is now stale
      try_pair(l.prev);
      try_pair(c.left);
    }
  }
};

}  // namespace

ml_status ml_l2c_check(const uint8_t* data, size_t size, uint32_t vocab_size, ml_error* err) {
  int32_t max_len;
  uint32_t n;
  size_t text;
  return scan(data, size, vocab_size, &max_len, &n, &text, err);
}

ml_status ml_l2c_load(ml_l2c** out, const uint8_t* data, size_t size, uint32_t vocab_size,
                                    ml_error* err) {
  *out = nullptr;
  if (!data && size != 0) return ml_fail(err, ML_E_ARG, "tokenizer: data is null");
  int32_t max_len = 0;
  uint32_t n = 0;
  size_t text_bytes = 0;
  ML_TRY(scan(data, size, vocab_size, &max_len, &n, &text_bytes, err));

  ml_l2c* t = new (std::nothrow) ml_l2c;
  if (!t) return ml_fail(err, ML_E_NOMEM, "tokenizer: cannot allocate the tokenizer");
  t->vocab = (int32_t)n;
  t->bos = 1;
  t->eos = 2;
  t->max_token_length = max_len;
  // Table: a power of two at least twice the vocabulary keeps probe chains short.
  uint32_t table_size = 16;
  while (table_size < 2u * n && table_size < (1u << 31)) table_size <<= 1;
  ml_status s = ML_OK;
  if ((s = alloc_array(&t->score, n, "scores", err)) != ML_OK ||
      (s = alloc_array(&t->off, (size_t)n + 1, "piece offsets", err)) != ML_OK ||
      (s = alloc_array(&t->text, text_bytes, "pieces", err)) != ML_OK ||
      (s = alloc_array(&t->byte_of, n, "byte pieces", err)) != ML_OK ||
      (s = alloc_array(&t->table, table_size, "the piece index", err)) != ML_OK) {
    ml_l2c_free(t);
    return s;
  }
  t->table_mask = table_size - 1;
  std::fill(t->table, t->table + table_size, -1);
  std::fill(t->byte_id, t->byte_id + 256, -1);
  for (int b = 0; b < 256; b++) t->byte_char[b] = (char)b;

  size_t pos = 4;
  uint32_t toff = 0;
  for (uint32_t i = 0; i < n; i++) {
    int32_t len;
    std::memcpy(&t->score[i], data + pos, 4);
    std::memcpy(&len, data + pos + 4, 4);
    pos += 8;
    t->off[i] = toff;
    std::memcpy(t->text + toff, data + pos, (size_t)len);
    pos += (size_t)len;
    toff += (uint32_t)len;
  }
  t->off[n] = toff;

  for (uint32_t i = 0; i < n; i++) {
    size_t len;
    const char* p = piece_of(t, (int32_t)i, &len);
    const int b = parse_byte_piece(p, len);
    t->byte_of[i] = (int16_t)b;
    const uint32_t h = fnv_step(kFnvBasis, p, len);
    // Insert unless an equal piece is already there (the lowest id wins).
    for (uint32_t slot = h & t->table_mask;; slot = (slot + 1) & t->table_mask) {
      const int32_t id = t->table[slot];
      if (id < 0) {
        t->table[slot] = (int32_t)i;
        break;
      }
      size_t l2;
      const char* q = piece_of(t, id, &l2);
      if (l2 == len && std::memcmp(p, q, len) == 0) break;
    }
  }
  for (int b = 0; b < 256; b++) {
    static const char kHex[] = "0123456789ABCDEF";
    const char name[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
    t->byte_id[b] = find2(t, name, 6, nullptr, 0);
  }
  *out = t;
  return ML_OK;
}

void ml_l2c_free(ml_l2c* t) {
  if (!t) return;
  std::free(t->score);
  std::free(t->off);
  std::free(t->text);
  std::free(t->byte_of);
  std::free(t->table);
  delete t;
}

ml_status ml_l2c_set_special(ml_l2c* t, int32_t bos, int32_t eos, ml_error* err) {
  if (bos < 0 || bos >= t->vocab)
    return ml_fail(err, ML_E_ARG, "tokenizer: bos id %d outside the vocabulary [0, %d)", (int)bos, (int)t->vocab);
  if (eos < 0 || eos >= t->vocab)
    return ml_fail(err, ML_E_ARG, "tokenizer: eos id %d outside the vocabulary [0, %d)", (int)eos, (int)t->vocab);
  t->bos = bos;
  t->eos = eos;
  return ML_OK;
}

int32_t ml_l2c_vocab(const ml_l2c* t) { return t->vocab; }
int32_t ml_l2c_bos(const ml_l2c* t) { return t->bos; }
int32_t ml_l2c_eos(const ml_l2c* t) { return t->eos; }
int32_t ml_l2c_max_token_length(const ml_l2c* t) { return t->max_token_length; }

ml_status ml_l2c_encode(const ml_l2c* t, const char* text, size_t len, bool add_bos, int32_t* ids,
                              size_t cap, size_t* n, ml_error* err) {
  *n = 0;
  if (!text && len != 0) return ml_fail(err, ML_E_ARG, "encode: text is null");
  // Symbols: BOS, the dummy prefix, at most one per byte (all of them byte fallbacks).
  if (len > (size_t)INT32_MAX - 2) return ml_fail(err, ML_E_ARG, "encode: text of %zu bytes is too long", len);
  const size_t max_sym = len + 2;
  size_t sym_bytes, heap_count, heap_bytes;
  // Heap entries: the initial pairs plus at most two per merge, fewer than 3 per symbol.
  if (!ml_mul(max_sym, sizeof(Sym), &sym_bytes) || !ml_mul(max_sym, 3, &heap_count) ||
      !ml_mul(heap_count, sizeof(Cand), &heap_bytes))
    return ml_fail(err, ML_E_NOMEM, "encode: scratch for %zu bytes of text overflows", len);
  Sym* sym = static_cast<Sym*>(std::malloc(sym_bytes));
  Cand* heap = static_cast<Cand*>(std::malloc(heap_bytes));
  if (!sym || !heap) {
    std::free(sym);
    std::free(heap);
    return ml_fail(err, ML_E_NOMEM, "encode: cannot allocate %zu bytes of scratch", sym_bytes + heap_bytes);
  }

  int32_t ns = 0;
  ml_status s = ML_OK;
  auto push = [&](int32_t id) {
    sym[ns] = Sym{id, ns - 1, -1};
    if (ns > 0) sym[ns - 1].next = ns;
    ns++;
  };
  // Pushes the tokens for bytes p[0, k): the whole group if it is a token, else byte fallbacks.
  auto push_group = [&](const char* p, size_t k, size_t at) -> bool {
    const int32_t id = find2(t, p, k, nullptr, 0);
    if (id >= 0) {
      push(id);
      return true;
    }
    for (size_t j = 0; j < k; j++) {
      const uint8_t b = (uint8_t)p[j];
      if (t->byte_id[b] < 0) {
        s = ml_fail(err, ML_E_ARG, "encode: byte 0x%02X at offset %zu is not in the vocabulary, which has no <0x%02X> token",
                    b, at + j, b);
        return false;
      }
      push(t->byte_id[b]);
    }
    return true;
  };

  if (add_bos) push(t->bos);  // run.c keeps BOS in the list its merge loop scans
  if (len > 0 && push_group(" ", 1, 0)) {
    // run.c's grouping: a byte, plus the continuation bytes (10xxxxxx) after it, at most 4 bytes.
    for (size_t i = 0; i < len && s == ML_OK;) {
      size_t k = 1;
      while (k < 4 && i + k < len && ((uint8_t)text[i + k] & 0xC0) == 0x80) k++;
      if (!push_group(text + i, k, i)) break;
      i += k;
    }
  }
  if (s == ML_OK) {
    Encoder e{t, sym, heap, 0};
    for (int32_t i = 0; i + 1 < ns; i++) e.try_pair(i);
    e.merge_all();
    size_t count = 0;
    for (int32_t i = ns > 0 ? 0 : -1; i >= 0; i = sym[i].next) count++;
    *n = count;
    if (count > cap) {
      s = ml_fail(err, ML_E_ARG, "encode: the text needs %zu ids, room for %zu", count, cap);
    } else {
      count = 0;
      for (int32_t i = ns > 0 ? 0 : -1; i >= 0; i = sym[i].next) ids[count++] = sym[i].id;
    }
  }
  std::free(sym);
  std::free(heap);
  return s;
}

const char* ml_l2c_piece(const ml_l2c* t, int32_t prev, int32_t id, size_t* len) {
  if (id < 0 || id >= t->vocab) {
    *len = 0;
    return nullptr;
  }
  const char* p = piece_of(t, id, len);
  // After BOS SentencePiece drops the dummy-prefix space (llama2.c PR #89).
  if (prev == t->bos && *len > 0 && p[0] == ' ') {
    p++;
    (*len)--;
  }
  // A byte piece, as run.c's sscanf("<0x%02hhX>") sees it, but only when the piece (after the
  // strip, which cannot apply to it) is exactly "<0xHH>".
  if (t->byte_of[id] >= 0) {
    *len = 1;
    return &t->byte_char[t->byte_of[id]];
  }
  return p;
}

const char* ml_l2c_token(const ml_l2c* t, int32_t id, size_t* len) {
  if (id < 0 || id >= t->vocab) {
    *len = 0;
    return nullptr;
  }
  return piece_of(t, id, len);
}

float ml_l2c_score(const ml_l2c* t, int32_t id) {
  return id < 0 || id >= t->vocab ? 0.0f : t->score[id];
}

int32_t ml_l2c_find(const ml_l2c* t, const char* s, size_t len) { return find2(t, s, len, nullptr, 0); }
