// A GGUF file's tokenizer into the .mlb (cv_gguf_tokenizer, gguf_internal.h).
//
// tokenizer.ggml.model "llama" (SentencePiece BPE: tokens, scores, token_type) becomes llama2.c's
// tokenizer.bin, written as llama2.c's export does (U+2581 as a space, BOS as "\n<s>\n", EOS as
// "\n</s>\n"). Its encoder (model/tokenizer/llama2c.h) is SentencePiece's: a dummy-prefix space,
// characters, byte fallback to <0xNN>, highest-score merges. SentencePiece never produces a
// control, unknown, unused or byte token by merging, so those get the score -1e10, which the
// encoder never merges. A vocabulary that encoder does not reproduce (add_space_prefix false,
// USER_DEFINED tokens: Gemma's), or one with a chat template to carry, becomes a tokenizer.json
// instead (spm_json below).
//
// "gpt2" (byte-level BPE: tokens, merges, token_type, tokenizer.ggml.pre) becomes a tokenizer.json
// (BPE model with the vocabulary and merges, the pre-tokenizer of llama.cpp's pre name, ByteLevel
// decoder, CONTROL and USER_DEFINED tokens as added_tokens, special for CONTROL, BOS prepended when
// tokenizer.ggml.add_bos_token) in a kind-2 section with tokenizer.chat_template. Pre names:
// llama-bpe/llama3 (Llama 3), qwen2, qwen35 (llama.cpp's regex for Qwen3.5, NFC as qwen2: assumed
// from Qwen2.5's tokenizer.json, Qwen3.5's was not at hand), smollm, gpt2; others are refused naming them.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "convert/gguf_internal.h"
#include "core/vec.h"
#include "model/limits.h"

namespace {

constexpr float kNoMerge = -1e10f;  // llama2c.h: scores at or below never merge

struct out_buf {
  ml_vec<char> v;
  bool ok = true;
  void put(const char* s, size_t n) { ok = ok && v.append(s, n); }
  void put(const char* s) { put(s, std::strlen(s)); }
  // A JSON string literal of s[0, n) (UTF-8 passed through; control characters escaped).
  void str(const char* s, uint64_t n) {
    put("\"", 1);
    for (uint64_t i = 0; i < n; ++i) {
      const unsigned char c = (unsigned char)s[i];
      if (c == '"' || c == '\\') {
        const char e[2] = {'\\', (char)c};
        put(e, 2);
      } else if (c < 0x20) {
        char e[8];
        std::snprintf(e, sizeof e, "\\u%04x", c);
        put(e);
      } else {
        put(s + i, 1);
      }
    }
    put("\"", 1);
  }
  void num(uint64_t x) {
    char b[24];
    std::snprintf(b, sizeof b, "%" PRIu64, x);
    put(b);
  }
};

ml_status get_special(const gguf_file* g, const char* key, uint32_t vocab, int64_t* out, ml_error* err) {
  uint32_t v = UINT32_MAX;
  ML_TRY(gguf_get_u32(g, key, false, &v, err));
  *out = v < vocab ? (int64_t)v : -1;  // absent, or -1 written as u32 (llama.cpp's "none")
  return ML_OK;
}

ml_status spm_json(cv_model* m, const gguf_file* g, const gguf_str* tok, uint64_t n, const gguf_kv* scores,
                   const gguf_kv* types, bool prefix, const char* chat_template_path, ml_error* err);

ml_status spm(cv_model* m, const gguf_file* g, const gguf_str* tok, uint64_t n, const gguf_kv* scores,
              const gguf_kv* types, const char* chat_template_path, ml_error* err) {
  bool prefix = true;
  if (const gguf_kv* kv = gguf_find(g, "tokenizer.ggml.add_space_prefix")) {
    if (kv->type != GGUF_V_BOOL)
      return ml_fail(err, ML_E_FORMAT, "%s: key tokenizer.ggml.add_space_prefix has type %s, not bool", g->path,
                     gguf_vtype_name(kv->type));
    prefix = kv->data[0] != 0;
  }
  bool user_defined = false;
  for (uint64_t i = 0; types && i < n; ++i) user_defined = user_defined || gguf_arr_i32(types, i) == GGUF_TOK_USER_DEFINED;
  if (!prefix || user_defined || chat_template_path || gguf_find(g, "tokenizer.chat_template"))
    return spm_json(m, g, tok, n, scores, types, prefix, chat_template_path, err);
  int64_t bos, eos;
  ML_TRY(get_special(g, "tokenizer.ggml.bos_token_id", (uint32_t)n, &bos, err));
  ML_TRY(get_special(g, "tokenizer.ggml.eos_token_id", (uint32_t)n, &eos, err));
  // Size: u32 max_len, then per token f32 score, i32 len, bytes (each U+2581, 3 bytes, becomes 1).
  uint64_t bytes = 4, max_len = 1;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t len = (int64_t)i == bos || (int64_t)i == eos ? 6 : tok[i].len;
    if (len > ML_LIMIT_TOKEN_BYTES)
      return ml_fail(err, ML_E_FORMAT, "%s: key tokenizer.ggml.tokens: token %" PRIu64 " is %" PRIu64
                     " bytes, above %u", g->path, i, len, ML_LIMIT_TOKEN_BYTES);
    max_len = len > max_len ? len : max_len;
    bytes += 8 + len;
  }
  cv_buf bin;
  ML_TRY(cv_alloc(&bin, (size_t)bytes, 1, err, "%s: the tokenizer", g->path));
  uint8_t* p = bin.data;
  const uint32_t ml = (uint32_t)max_len;
  std::memcpy(p, &ml, 4);
  p += 4;
  for (uint64_t i = 0; i < n; ++i) {
    const int32_t type = types ? gguf_arr_i32(types, i) : GGUF_TOK_NORMAL;
    float score = scores ? gguf_arr_f32(scores, i) : 0.0f;
    if (type == GGUF_TOK_CONTROL || type == GGUF_TOK_UNKNOWN || type == GGUF_TOK_UNUSED || type == GGUF_TOK_BYTE ||
        score != score)
      score = kNoMerge;
    std::memcpy(p, &score, 4);
    uint8_t* lenp = p + 4;
    p += 8;
    int32_t len = 0;
    if ((int64_t)i == bos || (int64_t)i == eos) {
      const char* s = (int64_t)i == bos ? "\n<s>\n" : "\n</s>\n";
      len = (int32_t)std::strlen(s);
      std::memcpy(p, s, (size_t)len);
    } else {
      const char* s = tok[i].p;
      for (uint64_t j = 0; j < tok[i].len; ++j) {
        if (j + 2 < tok[i].len && (uint8_t)s[j] == 0xE2 && (uint8_t)s[j + 1] == 0x96 && (uint8_t)s[j + 2] == 0x81) {
          p[len++] = ' ';
          j += 2;
        } else {
          p[len++] = (uint8_t)s[j];
        }
      }
    }
    std::memcpy(lenp, &len, 4);
    p += len;
  }
  bin.size = (size_t)(p - bin.data);
  ML_TRY(cv_attach_llama2c_bytes(m, &bin, g->path, err));
  m->h.bos_id = bos >= 0 ? (uint32_t)bos : 1;
  m->h.eos_id = eos >= 0 ? (uint32_t)eos : 2;
  return ML_OK;
}

// The pre-tokenizer JSON of llama.cpp's pre name (llama-vocab.cpp's regexes, written as the
// models' own tokenizer.json files write them), and whether it normalizes to NFC (Qwen2).
const char* pre_tokenizer(const gguf_str& pre, bool* nfc) {
  auto is = [&](const char* s) { return pre.len == std::strlen(s) && std::memcmp(pre.p, s, pre.len) == 0; };
  *nfc = false;
  if (is("llama-bpe") || is("llama3") || is("llama-v3"))
    return R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]})";
  if (is("qwen2")) {
    *nfc = true;
    return R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false}]})";
  }
  if (is("qwen35")) {  // Qwen3.5: qwen2's with combining marks (\p{M}) kept in letter runs
    *nfc = true;
    return R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false}]})";
  }
  if (is("smollm"))
    return R"({"type":"Sequence","pretokenizers":[{"type":"Digits","individual_digits":true},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}]})";
  if (is("gpt2") || is("default"))
    return R"({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true})";
  return nullptr;
}

// added_tokens: CONTROL and UNKNOWN tokens as special, USER_DEFINED as normalized plain ones.
void added_tokens(out_buf* j, const gguf_str* tok, uint64_t n, const gguf_kv* types) {
  j->put(R"({"version":"1.0","truncation":null,"padding":null,"added_tokens":[)");
  bool first = true;
  for (uint64_t i = 0; i < n; ++i) {
    const int32_t type = types ? gguf_arr_i32(types, i) : GGUF_TOK_NORMAL;
    if (type != GGUF_TOK_CONTROL && type != GGUF_TOK_USER_DEFINED && type != GGUF_TOK_UNKNOWN) continue;
    j->put(first ? "{\"id\":" : ",{\"id\":");
    first = false;
    j->num(i);
    j->put(",\"content\":");
    j->str(tok[i].p, tok[i].len);
    j->put(",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":");
    j->put(type != GGUF_TOK_USER_DEFINED ? "false,\"special\":true}" : "true,\"special\":false}");
  }
  j->put("]");
}

// The members of the model's "vocab" object: every piece mapped to its id.
void vocab_members(out_buf* j, const gguf_str* tok, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    if (i) j->put(",");
    j->str(tok[i].p, tok[i].len);
    j->put(":");
    j->num(i);
  }
}

// A TemplateProcessing post-processor that prepends token bos.
void post_bos(out_buf* j, const gguf_str* tok, int64_t bos) {
  j->put(R"({"type":"TemplateProcessing","single":[{"SpecialToken":{"id":)");
  j->str(tok[bos].p, tok[bos].len);
  j->put(R"(,"type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"pair":[{"SpecialToken":{"id":)");
  j->str(tok[bos].p, tok[bos].len);
  j->put(R"(,"type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"Sequence":{"id":"B","type_id":1}}],"special_tokens":{)");
  j->str(tok[bos].p, tok[bos].len);
  j->put(":{\"id\":");
  j->str(tok[bos].p, tok[bos].len);
  j->put(",\"ids\":[");
  j->num((uint64_t)bos);
  j->put("],\"tokens\":[");
  j->str(tok[bos].p, tok[bos].len);
  j->put("]}}}");
}

// Bundles tokenizer.json j with a tokenizer_config.json (chat template, BOS/EOS strings) into m.
ml_status attach_json(cv_model* m, const gguf_file* g, out_buf* j, const gguf_str* tok, int64_t bos, int64_t eos,
                      const char* chat_template_path, ml_error* err) {
  if (!j->ok) return ml_fail(err, ML_E_NOMEM, "%s: cannot allocate the synthesized tokenizer.json", g->path);

  // tokenizer_config.json: the chat template and the BOS/EOS strings the template sees.
  out_buf c;
  c.put("{");
  gguf_str tmpl{nullptr, 0};
  ML_TRY(gguf_get_str(g, "tokenizer.chat_template", false, &tmpl, err));
  bool comma = false;
  if (tmpl.p) {
    c.put("\"chat_template\":");
    c.str(tmpl.p, tmpl.len);
    comma = true;
  }
  if (bos >= 0) {
    c.put(comma ? ",\"bos_token\":" : "\"bos_token\":");
    c.str(tok[bos].p, tok[bos].len);
    comma = true;
  }
  if (eos >= 0) {
    c.put(comma ? ",\"eos_token\":" : "\"eos_token\":");
    c.str(tok[eos].p, tok[eos].len);
  }
  c.put("}");
  if (!c.ok) return ml_fail(err, ML_E_NOMEM, "%s: cannot allocate the synthesized tokenizer_config.json", g->path);

  ml_hf_files f;
  f.tokenizer_json = j->v.data();
  f.tokenizer_json_len = j->v.size();
  f.config_json = c.v.data();
  f.config_json_len = c.v.size();
  ml_file tf;
  if (chat_template_path) {
    ML_TRY(ml_file_open(&tf, chat_template_path, err));
    f.chat_template = tf.data ? reinterpret_cast<const char*>(tf.data) : "";
    f.chat_template_len = tf.size;
  }
  const ml_status s = cv_attach_hf_files(m, &f, g->path, err);
  ml_file_close(&tf);
  return s;
}

// SentencePiece as a Hugging Face BPE tokenizer.json, as transformers' LlamaConverter /
// GemmaConverter write it: byte_fallback, merges derived from the scores (every split of a normal
// piece into two normal pieces, ranked by the merged piece's score, then its id, then the halves'
// ids: SentencePieceExtractor's order), a " " -> U+2581 normalizer (with a Prepend when
// add_space_prefix), the decoder undoing both, control/unknown tokens special, user-defined ones
// matched whole. Used when llama2.c's tokenizer cannot reproduce the vocabulary (no dummy prefix,
// user-defined tokens) or a chat template is to be carried.
struct merge {
  float score;
  int32_t merged, left, right;
};

ml_status spm_json(cv_model* m, const gguf_file* g, const gguf_str* tok, uint64_t n, const gguf_kv* scores,
                   const gguf_kv* types, bool prefix, const char* chat_template_path, ml_error* err) {
  auto type_of = [&](uint64_t i) { return types ? gguf_arr_i32(types, i) : (int32_t)GGUF_TOK_NORMAL; };
  // An open-addressing index of the normal pieces (piece -> id).
  size_t cap = 16;
  while (cap < 2 * n) cap <<= 1;
  cv_buf tbuf;
  ML_TRY(cv_alloc(&tbuf, cap, sizeof(int32_t), err, "%s: the vocabulary index", g->path));
  int32_t* table = tbuf.as<int32_t>();
  for (size_t i = 0; i < cap; ++i) table[i] = -1;
  auto hash = [](const char* p, uint64_t len) {
    uint32_t h = 2166136261u;
    for (uint64_t i = 0; i < len; ++i) h = (h ^ (uint8_t)p[i]) * 16777619u;
    return h;
  };
  for (uint64_t i = 0; i < n; ++i) {
    if (type_of(i) != GGUF_TOK_NORMAL) continue;
    size_t slot = hash(tok[i].p, tok[i].len) & (cap - 1);
    bool dup = false;
    while (table[slot] >= 0 && !dup) {
      const gguf_str& o = tok[table[slot]];
      dup = o.len == tok[i].len && std::memcmp(o.p, tok[i].p, o.len) == 0;
      if (!dup) slot = (slot + 1) & (cap - 1);
    }
    if (!dup) table[slot] = (int32_t)i;  // the first of duplicate pieces, as a dict would keep the last: rare
  }
  auto find = [&](const char* p, uint64_t len) -> int32_t {
    for (size_t slot = hash(p, len) & (cap - 1);; slot = (slot + 1) & (cap - 1)) {
      const int32_t id = table[slot];
      if (id < 0 || (tok[id].len == len && std::memcmp(tok[id].p, p, len) == 0)) return id;
    }
  };
  ml_vec<merge> merges;
  for (uint64_t i = 0; i < n; ++i) {
    if (type_of(i) != GGUF_TOK_NORMAL) continue;
    const char* p = tok[i].p;
    for (uint64_t k = 1; k < tok[i].len; ++k) {
      if (((uint8_t)p[k] & 0xC0) == 0x80) continue;  // split between characters only
      const int32_t l = find(p, k), r = find(p + k, tok[i].len - k);
      if (l < 0 || r < 0) continue;
      if (!merges.push(merge{scores ? gguf_arr_f32(scores, i) : 0.0f, (int32_t)i, l, r}))
        return ml_fail(err, ML_E_NOMEM, "%s: cannot allocate the merges", g->path);
    }
  }
  std::sort(merges.begin(), merges.end(), [](const merge& a, const merge& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.merged != b.merged) return a.merged < b.merged;
    return a.left != b.left ? a.left < b.left : a.right < b.right;
  });
  int64_t bos, eos, unk;
  ML_TRY(get_special(g, "tokenizer.ggml.bos_token_id", (uint32_t)n, &bos, err));
  ML_TRY(get_special(g, "tokenizer.ggml.eos_token_id", (uint32_t)n, &eos, err));
  ML_TRY(get_special(g, "tokenizer.ggml.unknown_token_id", (uint32_t)n, &unk, err));
  bool add_bos = true;  // llama.cpp's default for SentencePiece vocabularies
  if (const gguf_kv* kv = gguf_find(g, "tokenizer.ggml.add_bos_token")) add_bos = kv->type == GGUF_V_BOOL && kv->data[0];

  out_buf j;
  added_tokens(&j, tok, n, types);
  j.put(",\"normalizer\":");
  j.put(prefix ? R"({"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"\u2581"},{"type":"Replace","pattern":{"String":" "},"content":"\u2581"}]})"
               : R"({"type":"Replace","pattern":{"String":" "},"content":"\u2581"})");
  j.put(",\"pre_tokenizer\":null,\"post_processor\":");
  if (add_bos && bos >= 0) post_bos(&j, tok, bos);
  else j.put("null");
  j.put(R"(,"decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"\u2581"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"})");
  j.put(prefix ? R"(,{"type":"Strip","content":" ","start":1,"stop":0}]})" : "]}");
  j.put(R"(,"model":{"type":"BPE","dropout":null,"unk_token":)");
  if (unk >= 0) j.str(tok[unk].p, tok[unk].len);
  else j.put("null");
  j.put(R"(,"continuing_subword_prefix":null,"end_of_word_suffix":null,"fuse_unk":true,"byte_fallback":true,"ignore_merges":false,"vocab":{)");
  vocab_members(&j, tok, n);
  j.put("},\"merges\":[");
  for (size_t i = 0; i < merges.size(); ++i) {
    j.put(i ? ",[" : "[");
    j.str(tok[merges[i].left].p, tok[merges[i].left].len);
    j.put(",");
    j.str(tok[merges[i].right].p, tok[merges[i].right].len);
    j.put("]");
  }
  j.put("]}}");
  return attach_json(m, g, &j, tok, bos, eos, chat_template_path, err);
}

ml_status bpe(cv_model* m, const gguf_file* g, const gguf_str* tok, uint64_t n, const gguf_kv* types,
              const char* chat_template_path, ml_error* err) {
  gguf_str pre{"default", 7};
  ML_TRY(gguf_get_str(g, "tokenizer.ggml.pre", false, &pre, err));
  bool nfc;
  const char* pt = pre_tokenizer(pre, &nfc);
  if (!pt)
    return ml_fail(err, ML_E_FORMAT, "%s: key tokenizer.ggml.pre: pre-tokenizer \"%.*s\" is not supported (llama-bpe, "
                   "qwen2, qwen35, smollm, gpt2)", g->path, (int)(pre.len > 64 ? 64 : pre.len), pre.p);
  const gguf_kv* merges;
  ML_TRY(gguf_get_array(g, "tokenizer.ggml.merges", GGUF_V_STRING, true, &merges, err));
  cv_buf mbuf;
  ML_TRY(gguf_arr_strings(g, merges, &mbuf, err));
  const gguf_str* mg = mbuf.as<gguf_str>();
  int64_t bos, eos;
  ML_TRY(get_special(g, "tokenizer.ggml.bos_token_id", (uint32_t)n, &bos, err));
  ML_TRY(get_special(g, "tokenizer.ggml.eos_token_id", (uint32_t)n, &eos, err));
  bool add_bos = false;
  if (const gguf_kv* kv = gguf_find(g, "tokenizer.ggml.add_bos_token"))
    add_bos = kv->type == GGUF_V_BOOL && kv->data[0] != 0;

  out_buf j;
  added_tokens(&j, tok, n, types);
  j.put(",\"normalizer\":");
  j.put(nfc ? R"({"type":"NFC"})" : "null");
  j.put(",\"pre_tokenizer\":");
  j.put(pt);
  j.put(",\"post_processor\":");
  if (add_bos && bos >= 0) post_bos(&j, tok, bos);
  else j.put(R"({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false})");
  j.put(R"(,"decoder":{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true},)");
  j.put(R"("model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":null,)");
  j.put(R"("end_of_word_suffix":null,"fuse_unk":false,"byte_fallback":false,"ignore_merges":)");
  j.put(pre.len == 9 && std::memcmp(pre.p, "llama-bpe", 9) == 0 ? "true" : "false");
  j.put(",\"vocab\":{");
  vocab_members(&j, tok, n);
  j.put("},\"merges\":[");
  for (uint64_t i = 0; i < merges->n; ++i) {
    if (i) j.put(",");
    j.str(mg[i].p, mg[i].len);
  }
  j.put("]}}");
  return attach_json(m, g, &j, tok, bos, eos, chat_template_path, err);
}

}  // namespace

ml_status cv_gguf_tokenizer(cv_model* m, const gguf_file* g, const char* chat_template, ml_error* err) {
  gguf_str model{nullptr, 0};
  ML_TRY(gguf_get_str(g, "tokenizer.ggml.model", false, &model, err));
  if (!model.p) {
    if (chat_template)
      return ml_fail(err, ML_E_ARG, "--chat-template: %s has no tokenizer (no tokenizer.ggml.model)", g->path);
    return ML_OK;
  }
  const bool is_llama = model.len == 5 && std::memcmp(model.p, "llama", 5) == 0;
  const bool is_gpt2 = model.len == 4 && std::memcmp(model.p, "gpt2", 4) == 0;
  if (!is_llama && !is_gpt2)
    return ml_fail(err, ML_E_FORMAT, "%s: key tokenizer.ggml.model: \"%.*s\" is not supported (llama, gpt2)", g->path,
                   (int)(model.len > 32 ? 32 : model.len), model.p);
  const gguf_kv *tokens, *scores, *types;
  ML_TRY(gguf_get_array(g, "tokenizer.ggml.tokens", GGUF_V_STRING, true, &tokens, err));
  ML_TRY(gguf_get_array(g, "tokenizer.ggml.scores", GGUF_V_F32, false, &scores, err));
  ML_TRY(gguf_get_array(g, "tokenizer.ggml.token_type", GGUF_V_I32, false, &types, err));
  const uint64_t n = tokens->n;
  if (n == 0 || n > m->h.vocab_size)
    return ml_fail(err, ML_E_SHAPE, "%s: key tokenizer.ggml.tokens has %" PRIu64 " tokens, the model's vocabulary %u",
                   g->path, n, m->h.vocab_size);
  if ((scores && scores->n != n) || (types && types->n != n))
    return ml_fail(err, ML_E_FORMAT, "%s: keys tokenizer.ggml.scores (%" PRIu64 ") and token_type (%" PRIu64
                   ") must have one entry per token (%" PRIu64 ")", g->path, scores ? scores->n : n,
                   types ? types->n : n, n);
  cv_buf sbuf;
  ML_TRY(gguf_arr_strings(g, tokens, &sbuf, err));
  const gguf_str* tok = sbuf.as<gguf_str>();
  if (is_llama) {
    if (n != m->h.vocab_size)
      return ml_fail(err, ML_E_SHAPE, "%s: key tokenizer.ggml.tokens has %" PRIu64 " tokens, not the model's %u",
                     g->path, n, m->h.vocab_size);
    return spm(m, g, tok, n, scores, types, chat_template, err);
  }
  return bpe(m, g, tok, n, types, chat_template, err);
}
