// Private to the tokenizer.json tokenizer (hf_*.cpp): the loaded tokenizer's layout, the text
// representation that keeps every byte's origin (hf_text), the split list the pre-tokenizers work
// on (hf_pts), and each component's parse/apply entry points.
//
// Text in the pipeline is UTF-8 with, for each byte, the span [begin, end) of the original
// character it came from (as the Rust library's NormalizedString alignments): a token's offsets
// are the union of its bytes' spans.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/bump.h"
#include "core/json.h"
#include "core/status.h"
#include "core/vec.h"
#include "model/tokenizer/hf.h"

struct ml_regex;

// Bounds on what a tokenizer.json may make us hold.
inline constexpr uint32_t HF_MAX_VOCAB = 16777216;      // ids 0 .. 2^24-1
inline constexpr uint32_t HF_MAX_TOKEN_BYTES = 65536;   // one token's string
inline constexpr uint32_t HF_MAX_ADDED = 1048576;       // added tokens
inline constexpr int HF_MAX_NEST = 32;                  // Sequence inside Sequence ...
inline constexpr uint32_t HF_MAX_SEQ_ITEMS = 256;       // members of one Sequence / template
inline constexpr size_t HF_MAX_TEXT = (size_t)1 << 30;  // encode input bytes (offsets are 32-bit)
inline constexpr uint32_t HF_CACHE_WORD = 256;          // words longer than this skip the cache

struct hf_strv {
  const char* s = nullptr;
  uint32_t n = 0;
};

// ---- text with alignments ----
struct hf_text {
  ml_vec<char> s;
  ml_vec<ml_tok_span> al;  // one per byte of s
};

// One piece of the text being pre-tokenized: s[off, off+len) of the owning hf_pts; id >= 0 when it
// is an added token already (no further processing).
struct hf_split {
  uint32_t off, len;
  int32_t id;
};
struct hf_pts {
  ml_vec<char> s;
  ml_vec<ml_tok_span> al;
  ml_vec<hf_split> sp;
};

// ---- components ----
enum hf_norm_kind : uint8_t { HF_N_SEQ, HF_N_PREPEND, HF_N_REPLACE, HF_N_NFC, HF_N_NFD, HF_N_NFKC, HF_N_NFKD, HF_N_LOWER, HF_N_STRIP };
struct hf_norm {
  hf_norm_kind kind;
  hf_strv a, b;            // PREPEND: a; REPLACE: a -> b (a literal when re is null)
  ml_regex* re;            // REPLACE with a Regex pattern
  bool left, right;        // STRIP
  hf_norm** kids;
  uint32_t nkids;
};

enum hf_split_behavior : uint8_t { HF_REMOVED, HF_ISOLATED, HF_MERGED_PREV, HF_MERGED_NEXT, HF_CONTIGUOUS };
enum hf_pre_kind : uint8_t { HF_P_SEQ, HF_P_BYTELEVEL, HF_P_SPLIT, HF_P_DIGITS, HF_P_METASPACE, HF_P_WHITESPACE, HF_P_WSSPLIT, HF_P_PUNCT };
enum hf_prepend : uint8_t { HF_PREPEND_ALWAYS, HF_PREPEND_FIRST, HF_PREPEND_NEVER };
struct hf_pre {
  hf_pre_kind kind;
  bool flag1, flag2;       // BYTELEVEL: add_prefix_space, use_regex; DIGITS: individual; METASPACE: split; SPLIT: invert
  hf_split_behavior behavior;
  hf_prepend prepend;      // METASPACE
  uint32_t rep;            // METASPACE replacement char
  hf_strv lit;             // SPLIT with a String pattern
  ml_regex* re;            // SPLIT with a Regex pattern
  hf_pre** kids;
  uint32_t nkids;
};

enum hf_dec_kind : uint8_t { HF_D_SEQ, HF_D_BYTELEVEL, HF_D_METASPACE, HF_D_REPLACE, HF_D_BYTEFALLBACK, HF_D_FUSE, HF_D_STRIP };
struct hf_dec {
  hf_dec_kind kind;
  hf_prepend prepend;      // METASPACE
  uint32_t rep;            // METASPACE replacement; STRIP content char
  uint32_t start, stop;    // STRIP
  hf_strv a, b;            // REPLACE literal a -> b
  ml_regex* re;            // REPLACE with a Regex pattern
  hf_dec** kids;
  uint32_t nkids;
};

struct hf_added {
  hf_strv content;
  int32_t id;
  bool special, lstrip, rstrip, single_word, normalized;
};

// Aho-Corasick-free matcher: a byte trie walked from each position (leftmost-longest).
struct hf_trie_node {
  int32_t first_child, next_sibling;
  int32_t added;  // index into added[] whose pattern ends here, or -1
  uint8_t byte;
};
struct hf_trie {
  ml_vec<hf_trie_node> nodes;  // node 0 is the root
  int32_t root_child[256];
};

// A per-encode cache of word -> tokens (the Rust library keeps one per model; one per call here
// keeps the tokenizer immutable and shareable across threads).
struct hf_wcache {
  struct entry {
    uint32_t hash, key_off, key_len, tok_off, tok_n;
  };
  ml_vec<int32_t> slots;  // entry index or -1
  ml_vec<entry> entries;
  ml_vec<char> keys;
  ml_vec<int32_t> ids;
  ml_vec<uint32_t> ends;  // each token's end byte within its word
};
inline constexpr uint32_t HF_CACHE_ENTRIES = 65536;

struct ml_hf_tok {
  ml_bump mem;  // strings and component graphs
  // model vocabulary + added tokens, by id
  uint32_t n_ids = 0;               // max id + 1
  hf_strv* tok = nullptr;           // [n_ids]: the model vocabulary's strings (s null elsewhere)
  hf_strv* dtok = nullptr;          // [n_ids]: what decode reads (an added token's, else tok); s null for a hole
  uint8_t* flags = nullptr;         // [n_ids]: HF_F_*
  int32_t* vocab_table = nullptr;   // open addressing over model vocab ids (-1 empty)
  uint32_t vocab_mask = 0;
  uint32_t n_model = 0;             // entries in the model vocab
  // merges: open addressing keyed by (left id, right id)
  struct merge_slot {
    int32_t a, b, rank, id;
  }* merge_table = nullptr;
  uint32_t merge_mask = 0;
  // model options
  int32_t unk = -1;
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
  hf_strv cont_prefix, eow_suffix;
  int32_t byte_tok[256];            // "<0xNN>" ids or -1
  // added tokens
  hf_added* added = nullptr;
  uint32_t n_added = 0;
  hf_trie trie_raw;                 // non-normalized contents
  hf_trie trie_norm;                // normalized contents, normalized
  // pipeline
  hf_norm* norm = nullptr;
  hf_pre* pre = nullptr;
  hf_dec* dec = nullptr;
  // post-processor: the single template, flattened: ids before the sequence, ids after
  bool has_post = false;
  ml_vec<int32_t> post_before, post_after;
  bool post_trim_bytelevel = false;  // a ByteLevel processor with trim_offsets: spans lose their spaces
  bool post_trim_prefix = false;     // ... and its add_prefix_space
  size_t max_piece = 0;
  hf_strv unk_str;                  // unk_token (may be absent from the vocabulary)
  ml_vec<ml_regex*> regexes;        // every compiled regex, freed with the tokenizer
};
// HF_F_SKIP: decode(skip_special) drops the id. The Rust library drops a token whose decode string is
// the content of a special token; a normalized added token decodes to its normalized content
// (AddedVocabulary's normalized cache), so with a normalizer that changes it, it is not dropped.
enum : uint8_t { HF_F_ADDED = 1, HF_F_SPECIAL = 2, HF_F_MODEL = 4, HF_F_SKIP = 8 };

// ---- shared helpers (hf_util.cpp) ----
ml_status hf_nomem(ml_error* err, const char* what);
uint32_t hf_hash(const char* s, size_t n);
bool hf_text_push(hf_text* t, const char* s, size_t n, ml_tok_span span);
// The code point at s[*i] (valid UTF-8), advancing *i.
uint32_t hf_next_cp(const char* s, size_t n, size_t* i);
int hf_put_cp(uint32_t cp, char out[4]);
// Parses a one-character JSON string (Metaspace replacement, Strip content).
bool hf_json_char(const ml_json* v, uint32_t* cp);
// Reads an optional boolean / string member; ML_E_FORMAT naming path.key on a wrong type.
ml_status hf_get_bool(const ml_json* obj, const char* key, bool dflt, bool* out, const char* path, ml_error* err);
ml_status hf_get_str(const ml_json* obj, const char* key, bool required, hf_strv* out, ml_bump* mem, const char* path,
                     ml_error* err);
ml_status hf_get_uint(const ml_json* obj, const char* key, uint32_t dflt, uint32_t max, uint32_t* out, const char* path,
                      ml_error* err);
// A Split/Replace "pattern": {"String": s} or {"Regex": r} (compiled, owned by t).
ml_status hf_get_pattern(ml_hf_tok* t, const ml_json* obj, hf_strv* lit, ml_regex** re, const char* path,
                         ml_error* err);
// Character classes used by pre-tokenizers and added tokens.
bool hf_is_ws(uint32_t cp);      // White_Space (char::is_whitespace, regex \s)
bool hf_is_letter(uint32_t cp);  // \p{L}
bool hf_is_number(uint32_t cp);  // \p{N} (char::is_numeric)
bool hf_is_word(uint32_t cp);    // regex \w
bool hf_is_punct(uint32_t cp);   // ascii punctuation or \p{P}
// All non-overlapping matches of a literal or regex in s[0, n), as byte ranges in *out (pairs).
ml_status hf_find_all(const hf_strv* lit, const ml_regex* re, const char* s, size_t n, ml_vec<uint32_t>* out,
                      ml_error* err);

// ---- model (hf_bpe.cpp) ----
ml_status hf_bpe_load(ml_hf_tok* t, const ml_json* model, ml_error* err);
int32_t hf_vocab_find(const ml_hf_tok* t, const char* s, size_t n);
// Tokenizes one pre-tokenized word s[0,n): ids and each token's byte range within the word.
// Appends to ids the tokens of s[0,n) and to ends each one's end byte within the word; cache may be null.
ml_status hf_bpe_word(const ml_hf_tok* t, const char* s, size_t n, hf_wcache* cache, ml_vec<int32_t>* ids,
                      ml_vec<uint32_t>* ends, ml_error* err);

// ---- added tokens (hf_added.cpp) ----
ml_status hf_added_load(ml_hf_tok* t, const ml_json* arr, ml_error* err);
ml_status hf_added_build(ml_hf_tok* t, ml_error* err);  // the two tries (after the normalizer is loaded)
// Cuts text into (range, added-token index or -1) pieces covering it, as find_matches does.
struct hf_cut {
  uint32_t begin, end;
  int32_t added;
};
ml_status hf_added_cut(const ml_hf_tok* t, const hf_trie* trie, const char* s, size_t n, ml_vec<hf_cut>* out,
                       ml_error* err);

// ---- normalizers (hf_normalize.cpp) ----
ml_status hf_norm_load(ml_hf_tok* t, const ml_json* v, hf_norm** out, const char* path, int depth, ml_error* err);
ml_status hf_norm_apply(const hf_norm* n, hf_text* x, hf_text* tmp, ml_error* err);

// ---- pre-tokenizers (hf_pretok.cpp) ----
ml_status hf_pre_load(ml_hf_tok* t, const ml_json* v, hf_pre** out, const char* path, int depth, ml_error* err);
ml_status hf_prepend_scheme(const ml_json* v, hf_prepend* out, const char* path, ml_error* err);
ml_status hf_pre_apply(const hf_pre* p, hf_pts* x, hf_pts* tmp, ml_error* err);

// ---- post-processors (hf_post.cpp) ----
ml_status hf_post_load(ml_hf_tok* t, const ml_json* v, ml_error* err);

// ---- decoders (hf_decode.cpp) ----
ml_status hf_dec_load(ml_hf_tok* t, const ml_json* v, hf_dec** out, const char* path, int depth, ml_error* err);
// The GPT-2 byte <-> char maps.
uint32_t hf_byte_to_cp(uint8_t b);
// Runs the decoder chain (or the null decoder's join) over tokens; piece mode: one token, raw bytes.
ml_status hf_decode_tokens(const ml_hf_tok* t, const hf_strv* toks, size_t n, bool piece, bool first, ml_vec<char>* out,
                           ml_error* err);
int hf_cp_to_byte(uint32_t cp);  // -1 when cp is not one of the 256
