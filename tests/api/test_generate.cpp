// The one generation loop (ml_gen_* / ml_generate) and the incremental detokenizer on real files:
// stories260K (converted here from the llama2.c checkpoint) and the llama2 32000-token tokenizer,
// whose byte-fallback tokens split characters. The oracle for a stopped generation is the same
// generation without stops, cut at the first match.
#include <cstring>
#include <string>
#include <vector>

#include "api/api_fixture.h"

namespace {

using api::encode;
using api::stories_model;

struct result {
  std::string text;
  std::vector<size_t> piece_ends;  // text length after each released piece
  ml_gen_stats st{};
};

// Generates from the session's current position (fresh: truncate it to 0 first).
result generate(ml_exec* e, ml_session* s, const std::vector<int32_t>& prompt, int max_tokens,
                const std::vector<const char*>& stops = {}, bool fresh = true) {
  ml_error err;
  if (fresh) REQUIRE(ml_session_truncate(s, 0, &err) == ML_OK);
  ml_gen_params p{};
  p.max_tokens = max_tokens;
  p.top_p = 1.0f;
  p.stop_at_eos = 1;
  p.stop = stops.data();
  p.n_stop = stops.size();
  ml_gen* g = nullptr;
  REQUIRE(ml_gen_start(&g, e, s, prompt.data(), prompt.size(), &p, &err) == ML_OK);
  result r;
  for (int done = 0; !done;) {
    const char* text;
    size_t len;
    int32_t id;
    REQUIRE(ml_gen_next(g, &text, &len, &id, &done, &err) == ML_OK);
    r.text.append(text, len);
    r.piece_ends.push_back(r.text.size());
  }
  r.st = ml_gen_get_stats(g);
  ml_gen_free(g);
  return r;
}

// Whether s is a sequence of whole, valid UTF-8 characters.
bool whole_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = (unsigned char)s[i];
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if (((unsigned char)s[i + k] & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

}  // namespace

TEST_CASE("generate: a stop string spanning tokens cuts the text exactly before it", "[api][generate]") {
  api::model m(stories_model());
  api::exec ex(m.m, 1, 32);
  api::session s(m.m);
  const auto prompt = encode(ml_model_tokenizer(m.m), "Once upon a time", 1);
  const result full = generate(ex.e, s.s, prompt, 120);
  REQUIRE(full.text.size() > 100);
  CHECK(full.st.stop_reason == ML_STOP_LENGTH);
  CHECK(full.st.n_generated == 120);
  CHECK(full.st.n_prompt == (int)prompt.size());
  // A stop string that starts inside one released piece and ends in a later one.
  size_t at = 0;
  for (size_t i = 1; i + 1 < full.piece_ends.size() && !at; ++i)
    if (full.piece_ends[i] > 60 && full.piece_ends[i + 1] - full.piece_ends[i] >= 2) at = full.piece_ends[i] - 1;
  REQUIRE(at > 0);
  const std::string stop = full.text.substr(at, 6);
  const size_t first = full.text.find(stop);
  const result cut = generate(ex.e, s.s, prompt, 120, {stop.c_str(), "never-in-a-story"});
  CHECK(cut.st.stop_reason == ML_STOP_STRING);
  CHECK(cut.text == full.text.substr(0, first));
  CHECK(cut.st.n_generated < 120);
  // A stop string whose start matches the end of the text but which never completes: held while
  // it might, released at the end.
  const std::string tail = full.text.substr(full.text.size() - 2) + "\x01";
  const result held = generate(ex.e, s.s, prompt, 120, {tail.c_str()});
  CHECK(held.text == full.text);
  CHECK(held.st.stop_reason == ML_STOP_LENGTH);
}

TEST_CASE("generate: continues the session, stops at its context, and ml_generate reports every piece",
          "[api][generate]") {
  api::model m(stories_model());
  api::exec ex(m.m, 2, 8);
  const auto prompt = encode(ml_model_tokenizer(m.m), "Once upon a time", 1);
  api::session small(m.m, ML_KV_F32, (int)prompt.size() + 10);
  const result r = generate(ex.e, small.s, prompt, 100);
  CHECK(r.st.stop_reason == ML_STOP_CONTEXT);
  CHECK(r.st.n_generated == 11);  // 10 fed after the prompt fills the context, the 11th sampled
  CHECK(ml_session_pos(small.s) == ml_session_ctx(small.s));

  // Two calls in a row equal one call: the second continues where the first stopped.
  api::session a(m.m), b(m.m);
  const result whole = generate(ex.e, a.s, prompt, 40);
  const result first = generate(ex.e, b.s, prompt, 20);
  // The 20th token was sampled but not fed: feed it as the next prompt, then 20 more.
  const int32_t last = [&] {
    api::session c(m.m);
    ml_gen_params p{};
    p.max_tokens = 20;
    p.top_p = 1.0f;
    ml_gen* g = nullptr;
    ml_error err;
    REQUIRE(ml_gen_start(&g, ex.e, c.s, prompt.data(), prompt.size(), &p, &err) == ML_OK);
    int32_t id = -1;
    for (int done = 0; !done;) {
      const char* t;
      size_t len;
      int32_t x;
      REQUIRE(ml_gen_next(g, &t, &len, &x, &done, &err) == ML_OK);
      if (x >= 0) id = x;
    }
    ml_gen_free(g);
    return id;
  }();
  const result second = generate(ex.e, b.s, {last}, 20, {}, false);
  CHECK(first.text + second.text == whole.text);

  // ml_generate: prompt pieces (generated = 0) then generated text (1), all of it whole UTF-8.
  api::session d(m.m);
  struct log_t {
    std::string prompt, gen;
  } log;
  auto cb = [](void* user, int32_t, const char* text, size_t len, int generated) {
    auto* l = static_cast<log_t*>(user);
    (generated ? l->gen : l->prompt).append(text, len);
    return 0;
  };
  ml_gen_params p{};
  p.max_tokens = 40;
  p.top_p = 1.0f;
  p.stop_at_eos = 1;
  ml_gen_stats st{};
  ml_error err;
  REQUIRE(ml_generate(ex.e, d.s, prompt.data(), prompt.size(), &p, cb, &log, &st, &err) == ML_OK);
  CHECK(log.prompt == "Once upon a time");
  CHECK(log.gen == whole.text);
  CHECK(st.n_generated == 40);
}

TEST_CASE("detok: byte-fallback pieces are joined into whole UTF-8 characters", "[api][generate]") {
  ml_tokenizer* t = nullptr;
  ml_error err;
  const std::string path = api::shared_dir() + "/models/tokenizer.bin";
  REQUIRE(ml_tokenizer_open(&t, path.c_str(), &err) == ML_OK);
  const std::string text = "A\xc3\xb1o \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80\xf0\x9f\x90\x8d \xe2\x9c\x93!";
  const auto ids = encode(t, text, 0);
  // The 4-byte emoji need byte tokens: the test only means something if some piece is partial.
  size_t partial = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    size_t len = 0;
    const char* p = ml_token_piece(t, i ? ids[i - 1] : 1, ids[i], &len);
    REQUIRE(p);
    if (!whole_utf8(std::string(p, len))) ++partial;
  }
  CHECK(partial >= 4);
  std::vector<char> buf(ml_detok_max_bytes(t));
  ml_detok d;
  ml_detok_reset(&d, ml_tokenizer_bos_id(t));  // as after BOS: the dummy-prefix space is dropped
  std::string out;
  for (int32_t id : ids) {
    const size_t n = ml_detok_push(t, &d, id, buf.data(), buf.size());
    const std::string piece(buf.data(), n);
    CHECK(whole_utf8(piece));
    out += piece;
  }
  out.append(buf.data(), ml_detok_flush(&d, buf.data(), buf.size()));
  CHECK(out == text);
  // An incomplete character at the end comes out as it is on flush.
  ml_detok_reset(&d, ml_tokenizer_bos_id(t));
  const auto emoji = encode(t, "\xf0\x9f\x98\x80", 0);
  REQUIRE(emoji.size() >= 3);
  std::string part;
  for (size_t i = 0; i + 1 < emoji.size(); ++i) part.append(buf.data(), ml_detok_push(t, &d, emoji[i], buf.data(), buf.size()));
  part.append(buf.data(), ml_detok_flush(&d, buf.data(), buf.size()));
  CHECK(part.size() >= 2);
  CHECK(!whole_utf8(part));
  ml_tokenizer_close(t);
}
