// The engine's tokenizer: either kind a model can carry, behind one set of calls --
//   llama2.c's tokenizer.bin (model/tokenizer/llama2c.h), tokenizer section kind 1;
//   a Hugging Face tokenizer.json BPE with its tokenizer_config.json and generation_config.json
//   (model/tokenizer/hf.h, bundle.h), kind 2, which also brings the chat template
//   (model/chat/template.h) and the special tokens that end a turn.
//
// Contract: loading validates everything (ML_E_FORMAT naming the file and field); after loading
// the tokenizer is read-only and may be shared by any number of threads. Encoding allocates
// scratch (ML_E_NOMEM on failure); nothing aborts, throws or exits.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "core/vec.h"
#include "model/tokenizer/bundle.h"

struct ml_tokenizer;
struct ml_template;

enum ml_tok_kind : uint32_t { ML_TOK_LLAMA2C = 1, ML_TOK_HF = 2 };

// llama2.c tokenizer.bin (see llama2c.h for vocab_size and the checks). bos = 1, eos = 2.
ml_status ml_tokenizer_load_llama2c(ml_tokenizer** out, const uint8_t* data, size_t size, uint32_t vocab_size,
                                    ml_error* err);
ml_status ml_tokenizer_check_llama2c(const uint8_t* data, size_t size, uint32_t vocab_size, ml_error* err);

// A Hugging Face tokenizer from its files (tokenizer_json required). BOS/EOS come from
// tokenizer_config.json's bos_token/eos_token, else from the post-processor's template. The chat
// template is chat_template (when given) or tokenizer_config.json's chat_template (a string, or a
// list of {name, template} from which "default" is taken); a template that does not parse fails
// the load. The tokens that end a turn: EOS, generation_config.json's eos_token_id(s), and the
// added tokens named <|eot_id|>, <|eom_id|>, <|im_end|>, <end_of_turn>, <|end|>, <|endoftext|>
// (as llama.cpp does for models whose generation_config is missing).
ml_status ml_tokenizer_load_hf(ml_tokenizer** out, const ml_hf_files* files, ml_error* err);

void ml_tokenizer_free(ml_tokenizer* t);

ml_tok_kind ml_tokenizer_kind(const ml_tokenizer* t);
// Sets BOS and EOS (a .mlb header's bos_id/eos_id); ML_E_ARG when out of range.
ml_status ml_tokenizer_set_special(ml_tokenizer* t, int32_t bos, int32_t eos, ml_error* err);
int32_t ml_tokenizer_vocab(const ml_tokenizer* t);
int32_t ml_tokenizer_bos(const ml_tokenizer* t);  // -1 when the tokenizer has none
int32_t ml_tokenizer_eos(const ml_tokenizer* t);
// Whether sampling id ends a turn (EOS and the end-of-turn tokens above).
bool ml_tokenizer_is_eog(const ml_tokenizer* t, int32_t id);
// Whether id is a special token (HF: an added token marked special; llama2.c: BOS and EOS).
bool ml_tokenizer_is_special(const ml_tokenizer* t, int32_t id);
// No piece (ml_tokenizer_piece) is longer than this many bytes.
int32_t ml_tokenizer_max_token_length(const ml_tokenizer* t);

// text[0, len) to ids; add_special: BOS (llama2.c) or the post-processor's tokens (HF). When the
// result needs more than cap ids: ML_E_ARG, no id written, *n = the count needed. HF: invalid
// UTF-8 is ML_E_ARG naming the byte offset.
ml_status ml_tokenizer_encode(const ml_tokenizer* t, const char* text, size_t len, bool add_special, int32_t* ids,
                              size_t cap, size_t* n, ml_error* err);
// Like ml_tokenizer_encode, into a growing vector, with byte spans when spans is not null (HF
// only; llama2.c gives none).
ml_status ml_tokenizer_encode_vec(const ml_tokenizer* t, const char* text, size_t len, bool add_special,
                                  ml_vec<int32_t>* ids, ml_vec<uint32_t>* spans, ml_error* err);

// The bytes id adds to the text after prev (-1: id starts the text), for streaming: llama2.c as
// run.c's decode; HF the decoder's piece (the start of the text is where decoders such as Strip
// and Metaspace drop a leading space). Special tokens give "" (they are not text). Not
// NUL-terminated; null with *len = 0 when id is out of range.
const char* ml_tokenizer_piece(const ml_tokenizer* t, int32_t prev, int32_t id, size_t* len);

// The whole text of ids: HF exactly tokenizer.decode(ids, skip_special_tokens); llama2.c the
// pieces as if after BOS (BOS and EOS give nothing). ML_E_ARG naming an id out of range.
ml_status ml_tokenizer_decode(const ml_tokenizer* t, const int32_t* ids, size_t n, bool skip_special,
                              ml_vec<char>* out, ml_error* err);

// The stored string of id ("▁the", "Ġhello", "<0x0A>"); null when out of range.
const char* ml_tokenizer_token(const ml_tokenizer* t, int32_t id, size_t* len);
float ml_tokenizer_score(const ml_tokenizer* t, int32_t id);  // llama2.c scores; 0 for HF
// The id whose stored string is s[0, len), or -1.
int32_t ml_tokenizer_find(const ml_tokenizer* t, const char* s, size_t len);

// The chat template (null when the tokenizer has none) and the BOS/EOS strings a template sees as
// bos_token / eos_token ("" when none).
const ml_template* ml_tokenizer_chat_template(const ml_tokenizer* t);
const char* ml_tokenizer_bos_text(const ml_tokenizer* t);
const char* ml_tokenizer_eos_text(const ml_tokenizer* t);
