// The llama2.c tokenizer (tokenizer.bin): loading, encoding and decoding, exactly as llama2.c's
// run.c does them, with a hash index and a heap instead of run.c's linear scans.
//
// Contract:
// - ml_l2c_load validates the whole buffer (truncation, negative or oversized
//   lengths, NaN scores, vocabulary size) and fails with ML_E_FORMAT naming the token index and
//   field. The tokenizer copies what it needs: the buffer may be freed after loading.
// - Encoding reproduces run.c's encode(): a dummy-prefix space when the text is non-empty, one
//   symbol per UTF-8 character (run.c's grouping: a byte plus up to 3 continuation bytes), byte
//   fallback to the <0xNN> tokens, then repeatedly merging the adjacent pair whose concatenation
//   is a token with the highest score (leftmost on ties; scores <= -1e10 never merge). O(n log n).
// - Encoding allocates scratch proportional to the text (malloc/free, ML_E_NOMEM on failure);
//   nothing else allocates after load. No function aborts, throws or exits.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/status.h"

struct ml_l2c;

// Loads a llama2.c tokenizer.bin held in data[0, size): i32 max_token_length, then per token
// f32 score, i32 len, len bytes. vocab_size > 0: the file must hold exactly that many tokens (a
// model's vocabulary); vocab_size == 0: as many tokens as the buffer holds, ending exactly at its
// end. bos = 1, eos = 2 (llama2.c); see ml_l2c_set_special.
ml_status ml_l2c_load(ml_l2c** out, const uint8_t* data, size_t size, uint32_t vocab_size,
                                    ml_error* err);

// The checks of ml_l2c_load alone, allocating nothing (the converter refuses what
// the loader would refuse with it).
ml_status ml_l2c_check(const uint8_t* data, size_t size, uint32_t vocab_size, ml_error* err);

void ml_l2c_free(ml_l2c* t);

// Sets the BOS and EOS ids (a .mlb header's bos_id/eos_id); ML_E_ARG when out of range.
ml_status ml_l2c_set_special(ml_l2c* t, int32_t bos, int32_t eos, ml_error* err);

int32_t ml_l2c_vocab(const ml_l2c* t);
int32_t ml_l2c_bos(const ml_l2c* t);
int32_t ml_l2c_eos(const ml_l2c* t);
// The file's max_token_length: no stored string, so no piece, is longer.
int32_t ml_l2c_max_token_length(const ml_l2c* t);

// Encodes text[0, len) (any bytes, NUL included) into ids[0, *n), BOS first when add_bos.
// When the result needs more than cap ids, fails with ML_E_ARG, writes no id and sets *n to the
// count needed. Fails with ML_E_ARG when a byte needs a fallback token the vocabulary
// lacks (a vocabulary without <0xNN> tokens).
ml_status ml_l2c_encode(const ml_l2c* t, const char* text, size_t len, bool add_bos, int32_t* ids,
                              size_t cap, size_t* n, ml_error* err);

// The text of token id following token prev, as run.c's decode(): after BOS a leading space is
// dropped; a "<0xNN>" piece becomes the raw byte. Returns a pointer into the tokenizer (not
// NUL-terminated, *len bytes), or null with *len = 0 when id is out of range.
const char* ml_l2c_piece(const ml_l2c* t, int32_t prev, int32_t id, size_t* len);

// The stored string of token id (verbatim from the file) and its score; null when out of range.
const char* ml_l2c_token(const ml_l2c* t, int32_t id, size_t* len);
float ml_l2c_score(const ml_l2c* t, int32_t id);

// The id whose stored string is exactly s[0, len), or -1. With duplicate strings, the lowest id.
int32_t ml_l2c_find(const ml_l2c* t, const char* s, size_t len);
