// Hugging Face tokenizer.json tokenizers (model type "BPE"): SentencePiece-style (Llama 2,
// TinyLlama, Mistral, Gemma) and byte-level (GPT-2, Llama 3, Qwen2, SmolLM2). Encoding and
// decoding give exactly the ids and text of Hugging Face's `tokenizers` library (Rust) for the
// same tokenizer.json: tokenizer.encode(text, add_special_tokens) and tokenizer.decode(ids,
// skip_special_tokens).
//
// Contract:
// - ml_hf_tok_load parses the whole tokenizer.json (src/core/json.h) and keeps what it needs; the
//   text may be freed afterwards. Refuses, with ML_E_FORMAT and a message naming the JSON field
//   (e.g. "model.merges[12]: 'a' is not in the vocabulary"), unknown model types (WordPiece,
//   Unigram, WordLevel), unknown normalizer/pre-tokenizer/post-processor/decoder types, unsupported
//   regexes, ids out of range, duplicate tokens, merges of unknown tokens, wrong JSON types.
// - Input text must be valid UTF-8 (ML_E_ARG naming the byte offset otherwise).
// - Encode: added tokens are cut out first (lstrip/rstrip/single_word/normalized/special), then
//   normalizer, pre-tokenizer, BPE model (merges by rank with a heap: O(n log n); byte_fallback;
//   unk; ignore_merges), then with add_special the post-processor (TemplateProcessing, ByteLevel,
//   RobertaProcessing, BertProcessing, Sequence).
// - Decode: the decoder chain (ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence).
// - Nothing aborts, throws or exits; allocation failure is ML_E_NOMEM.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "core/vec.h"

struct ml_hf_tok;

// Byte offsets of one token in the original text: [begin, end).
struct ml_tok_span {
  uint32_t begin, end;
};

ml_status ml_hf_tok_load(ml_hf_tok** out, const char* json, size_t len, ml_error* err);
void ml_hf_tok_free(ml_hf_tok* t);

// Ids are 0..vocab-1: the model's vocabulary and the added tokens together (max id + 1).
int32_t ml_hf_tok_vocab(const ml_hf_tok* t);

// Appends the ids of text[0, len) to *ids (and each token's byte span to *spans when not null).
ml_status ml_hf_tok_encode(const ml_hf_tok* t, const char* text, size_t len, bool add_special, ml_vec<int32_t>* ids,
                           ml_vec<ml_tok_span>* spans, ml_error* err);

// Appends tokenizer.decode(ids, skip_special) to *out. ML_E_ARG for an id out of range.
ml_status ml_hf_tok_decode(const ml_hf_tok* t, const int32_t* ids, size_t n, bool skip_special, ml_vec<char>* out,
                           ml_error* err);

// Streaming: appends the text token id adds after the ids before it, where first says whether it
// is the first token of the sequence (decoders such as Metaspace or Strip treat the start
// specially). Concatenating the pieces of ids[0..n) with first = (i == 0) gives exactly
// ml_hf_tok_decode(ids, n, false), except in two cases: pieces carry raw bytes where the whole
// decode would put U+FFFD for invalid UTF-8, and a Strip decoder's cut at the end of the text
// (after Fuse) cannot be known while streaming. Bytes of one character may be split across
// pieces (byte fallback, byte-level): the caller joins them.
ml_status ml_hf_tok_piece(const ml_hf_tok* t, int32_t id, bool first, ml_vec<char>* out, ml_error* err);

// The token's string as the vocabulary stores it ("Ġhello", "▁the", "<0x0A>", "<|im_end|>"); null
// when out of range.
const char* ml_hf_tok_token(const ml_hf_tok* t, int32_t id, size_t* len);
// The id of a token string (vocabulary or added token), or -1.
int32_t ml_hf_tok_find(const ml_hf_tok* t, const char* s, size_t len);
// Whether id is an added token marked special (skipped by decode with skip_special).
bool ml_hf_tok_is_special(const ml_hf_tok* t, int32_t id);
// The longest piece any single token decodes to, in bytes (for streaming buffers).
size_t ml_hf_tok_max_piece(const ml_hf_tok* t);
// The post-processor's first token on add_special (BOS) or -1; its last (EOS) or -1.
int32_t ml_hf_tok_post_bos(const ml_hf_tok* t);
int32_t ml_hf_tok_post_eos(const ml_hf_tok* t);
