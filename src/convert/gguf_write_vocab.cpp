// The GGUF writer's vocabulary (gguf_write.h): a "llama" (SentencePiece) vocabulary of exactly
// vocab_size tokens, from the model's llama2.c tokenizer.bin or a placeholder laid out like Llama 2's.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "convert/gguf_write_internal.h"
#include "core/checked.h"

namespace {

// llama.cpp's token types (llama.h, llama_token_type).
enum : int32_t { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_BYTE = 6 };

constexpr size_t PIECE_MAX = 64;  // a placeholder or renamed piece

ml_status vocab_alloc(gguf_vocab* v, uint32_t n, size_t bytes, ml_error* err) {
  ML_TRY(cv_alloc(&v->bytes, bytes, 1, err, "--gguf: the vocabulary's pieces"));
  ML_TRY(cv_alloc(&v->off, n, sizeof(uint64_t), err, "--gguf: the vocabulary"));
  ML_TRY(cv_alloc(&v->len, n, sizeof(uint32_t), err, "--gguf: the vocabulary"));
  ML_TRY(cv_alloc(&v->score, n, sizeof(float), err, "--gguf: the vocabulary's scores"));
  ML_TRY(cv_alloc(&v->type, n, sizeof(int32_t), err, "--gguf: the vocabulary's types"));
  return ML_OK;
}

// Appends token i's piece (the caller sized bytes for it).
void vocab_put(gguf_vocab* v, uint32_t i, const uint8_t* p, size_t n) {
  v->off.as<uint64_t>()[i] = v->fill;
  v->len.as<uint32_t>()[i] = (uint32_t)n;
  std::memcpy(v->bytes.data + v->fill, p, n);
  v->fill += n;
}

bool is_byte_piece(const uint8_t* p, uint32_t n) {
  auto hex = [](uint8_t c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return n == 6 && p[0] == '<' && p[1] == '0' && p[2] == 'x' && hex(p[3]) && hex(p[4]) && p[5] == '>';
}

uint32_t get_u32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// From a llama2.c tokenizer.bin (already checked against vocab_size by cv_attach_tokenizer): each
// space becomes U+2581 (3 bytes), "\n<s>\n"-style specials lose their newlines.
ml_status vocab_from_llama2c(const cv_model* m, gguf_vocab* v, ml_error* err) {
  const uint8_t* p = m->tokenizer.data;
  const uint32_t n = m->h.vocab_size;
  size_t at = 4, bytes = 0;
  for (uint32_t i = 0; i < n; ++i) {  // pass 1: the size (at most 3 bytes per byte, plus renames)
    const uint32_t len = get_u32(p + at + 4);
    bytes += (size_t)len * 3 + PIECE_MAX;
    at += 8 + len;
  }
  ML_TRY(vocab_alloc(v, n, bytes, err));
  at = 4;
  uint8_t tmp[PIECE_MAX];
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t bits = get_u32(p + at);
    std::memcpy(&v->score.as<float>()[i], &bits, 4);
    uint32_t len = get_u32(p + at + 4);
    const uint8_t* s = p + at + 8;
    at += 8 + len;
    while (len > 0 && s[0] == '\n' && len >= 3 && s[len - 1] == '\n' && s[1] == '<') ++s, len -= 2;
    int32_t type = TT_NORMAL;
    if (i == 0 && len == 5 && std::memcmp(s, "<unk>", 5) == 0) type = TT_UNKNOWN;
    else if ((i == m->h.bos_id || i == m->h.eos_id) && len >= 2 && s[0] == '<' && s[len - 1] == '>') type = TT_CONTROL;
    else if (is_byte_piece(s, len)) type = TT_BYTE;
    v->type.as<int32_t>()[i] = type;
    if (len == 0) {  // llama.cpp would rename it "[EMPTY_i]" itself; done here so uniqueness holds
      const int k = std::snprintf((char*)tmp, sizeof tmp, "[EMPTY_%u]", i);
      vocab_put(v, i, tmp, (size_t)k);
      continue;
    }
    v->off.as<uint64_t>()[i] = v->fill;
    size_t out = 0;
    for (uint32_t j = 0; j < len; ++j) {
      if (s[j] == ' ' && type == TT_NORMAL) {
        v->bytes.data[v->fill + out++] = 0xE2, v->bytes.data[v->fill + out++] = 0x96, v->bytes.data[v->fill + out++] = 0x81;
      } else {
        v->bytes.data[v->fill + out++] = s[j];
      }
    }
    v->len.as<uint32_t>()[i] = (uint32_t)out;
    v->fill += out;
  }
  return ML_OK;
}

// Placeholder pieces for a model without a llama2.c tokenizer, laid out like Llama 2's: <unk> at
// 0, <s> and </s> at the header's BOS/EOS ids, the 256 byte tokens "<0xHH>" from 3 on (after BOS
// or EOS when either falls in that range: Qwen's are above 150000), "<tok_N>" elsewhere. llama.cpp's
// SPM tokenizer falls back to the byte tokens for any byte, and node-llama-cpp tokenizes text at
// load: without them llama.cpp throws.
ml_status vocab_placeholder(const cv_model* m, gguf_vocab* v, ml_error* err) {
  const uint32_t n = m->h.vocab_size, bos = m->h.bos_id, eos = m->h.eos_id;
  uint64_t b0 = 3;  // the byte block [b0, b0 + 256) holds neither BOS nor EOS
  for (int pass = 0; pass < 2; ++pass)
    for (uint32_t id : {bos, eos})
      if (id >= b0 && id < b0 + 256) b0 = (uint64_t)id + 1;
  if (b0 + 256 > n)
    return ml_fail(err, ML_E_ARG,
                   "--gguf: without a llama2.c tokenizer the GGUF gets a placeholder vocabulary with 256 byte tokens, "
                   "which do not fit --vocab %u beside BOS %u and EOS %u; give a larger --vocab or --tokenizer",
                   n, bos, eos);
  size_t bytes;
  if (!ml_mul(n, PIECE_MAX, &bytes)) return ml_fail(err, ML_E_NOMEM, "--gguf: the vocabulary of %u tokens overflows", n);
  ML_TRY(vocab_alloc(v, n, bytes, err));
  char tmp[PIECE_MAX];
  for (uint32_t i = 0; i < n; ++i) {
    int k;
    int32_t type = TT_CONTROL;
    if (i == bos) k = std::snprintf(tmp, sizeof tmp, "<s>");
    else if (i == eos) k = std::snprintf(tmp, sizeof tmp, "</s>");
    else if (i == 0) type = TT_UNKNOWN, k = std::snprintf(tmp, sizeof tmp, "<unk>");
    else if (i >= b0 && i < b0 + 256) type = TT_BYTE, k = std::snprintf(tmp, sizeof tmp, "<0x%02X>", (unsigned)(i - b0));
    else type = TT_NORMAL, k = std::snprintf(tmp, sizeof tmp, "<tok_%u>", i);
    v->type.as<int32_t>()[i] = type;
    v->score.as<float>()[i] = 0.0f;
    vocab_put(v, i, (const uint8_t*)tmp, (size_t)k);
  }
  return ML_OK;
}

// A piece equal to an earlier token's becomes "[DUP_i]" (llama.cpp asserts unique pieces).
ml_status vocab_unique(gguf_vocab* v, uint32_t n, ml_error* err) {
  cv_buf idx;
  ML_TRY(cv_alloc(&idx, n, sizeof(uint32_t), err, "--gguf: the vocabulary's order"));
  uint32_t* ix = idx.as<uint32_t>();
  for (uint32_t i = 0; i < n; ++i) ix[i] = i;
  const uint8_t* b = v->bytes.data;
  const uint64_t* off = v->off.as<uint64_t>();
  const uint32_t* len = v->len.as<uint32_t>();
  auto cmp = [&](uint32_t x, uint32_t y) {
    const uint32_t k = len[x] < len[y] ? len[x] : len[y];
    const int c = std::memcmp(b + off[x], b + off[y], k);
    if (c != 0) return c < 0;
    if (len[x] != len[y]) return len[x] < len[y];
    return x < y;  // equal pieces in id order: the first keeps its piece
  };
  std::sort(ix, ix + n, cmp);
  for (uint32_t j = 1; j < n; ++j) {
    const uint32_t a = ix[j - 1], c = ix[j];
    if (len[a] == len[c] && std::memcmp(b + off[a], b + off[c], len[a]) == 0) {
      // Renamed in place: every piece has room for PIECE_MAX bytes (vocab_from_llama2c's pass 1)
      // only in total, so the new piece goes at the end of the buffer.
      char tmp[PIECE_MAX];
      const int k = std::snprintf(tmp, sizeof tmp, "[DUP_%u]", c);
      if (v->fill + (size_t)k > v->bytes.size) return ml_fail(err, ML_E_NOMEM, "--gguf: vocabulary renames overflow");
      vocab_put(v, c, (const uint8_t*)tmp, (size_t)k);
    }
  }
  return ML_OK;
}

}  // namespace

ml_status gguf_vocab_make(const cv_model* m, gguf_vocab* v, ml_error* err) {
  if (m->has_tokenizer && m->tokenizer_kind == 1) ML_TRY(vocab_from_llama2c(m, v, err));
  else ML_TRY(vocab_placeholder(m, v, err));
  return vocab_unique(v, m->h.vocab_size, err);
}
