// The JSON reader (src/core/json.h). Oracles: the JSONTestSuite verdicts (y_ must parse, n_ must
// fail with ML_E_FORMAT, i_ as listed below), values written by hand, the C library's strtod and
// printf("%.17g") for numbers, Python's json.dumps(ensure_ascii=False) output for ml_json_quote
// (recorded below), and facts about two real tokenizer.json files read with Python's json.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/vec.h"
#include "../test_util.h"

namespace {

struct doc {
  ml_bump b;
  ml_json* v = nullptr;
  ml_error err{};
  ml_status s = ML_OK;
  explicit doc(const std::string& text) { s = ml_json_parse(text.data(), text.size(), &b, &v, &err); }
};

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

std::string str_of(const ml_json* v) { return std::string(v->str, v->len); }

std::string quote(const std::string& s) {
  ml_vec<char> out;
  REQUIRE(ml_json_quote(&out, s.data(), s.size()));
  return std::string(out.data(), out.size());
}

// The i_ (implementation-defined) files of JSONTestSuite that this reader accepts; every other i_
// file is refused. Accepted: numbers out of double or int64 range (num becomes +-inf, 0 or the
// nearest double; is_int is false past int64) and 500 nested arrays (under ML_JSON_MAX_DEPTH).
// Refused: every invalid UTF-8 string (overlong, truncated, lone continuation, Latin-1, UTF-16,
// encoded surrogates, past U+10FFFF), lone or inverted surrogate escapes, and a leading BOM.
const std::set<std::string> kAcceptedI = {
    "i_number_double_huge_neg_exp.json", "i_number_huge_exp.json",          "i_number_neg_int_huge_exp.json",
    "i_number_pos_double_huge_exp.json", "i_number_real_neg_overflow.json", "i_number_real_pos_overflow.json",
    "i_number_real_underflow.json",      "i_number_too_big_neg_int.json",   "i_number_too_big_pos_int.json",
    "i_number_very_big_negative_int.json", "i_structure_500_nested_arrays.json",
};

std::string nested(int depth, char open, char close) { return std::string(depth, open) + std::string(depth, close); }

}  // namespace

TEST_CASE("json: every JSONTestSuite file gets its verdict", "[json]") {
  const std::string dir = ml_test_shared("data/JSONTestSuite/test_parsing");
  if (!std::filesystem::is_directory(dir)) {
    WARN("no JSONTestSuite at " << dir);
    return;
  }
  int y = 0, n = 0, i = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".json") continue;
    const doc d(read_all(e.path().string()));
    INFO(name << ": " << d.err.msg);
    if (name[0] == 'y') {
      CHECK(d.s == ML_OK);
      CHECK(d.v != nullptr);
      ++y;
    } else if (name[0] == 'n') {
      CHECK(d.s == ML_E_FORMAT);
      CHECK(d.v == nullptr);
      CHECK(std::string(d.err.msg).rfind("json: byte ", 0) == 0);
      ++n;
    } else if (name[0] == 'i') {
      CHECK((d.s == ML_OK) == (kAcceptedI.count(name) == 1));
      if (d.s != ML_OK) CHECK(d.s == ML_E_FORMAT);
      ++i;
    }
  }
  CHECK(y == 95);
  CHECK(n == 188);
  CHECK(i == 35);
}

TEST_CASE("json: values, types and offsets", "[json]") {
  const doc d(R"( {"a": [1, true, false, null, "x", {"b": -2.5}], "c": {}, "d": []} )");
  REQUIRE(d.s == ML_OK);
  const ml_json* v = d.v;
  REQUIRE(ml_json_is(v, ML_JSON_OBJECT));
  CHECK(v->offset == 1);
  REQUIRE(v->n == 3);
  const ml_json* a = ml_json_get(v, "a");
  REQUIRE(ml_json_is(a, ML_JSON_ARRAY));
  REQUIRE(a->n == 6);
  CHECK(a->offset == 7);
  CHECK(a->items[0]->type == ML_JSON_NUMBER);
  CHECK(a->items[0]->i64 == 1);
  CHECK(a->items[0]->offset == 8);
  CHECK(a->items[1]->type == ML_JSON_TRUE);
  CHECK(a->items[2]->type == ML_JSON_FALSE);
  CHECK(a->items[3]->type == ML_JSON_NULL);
  CHECK(ml_json_is_bool(a->items[1]));
  CHECK(ml_json_is_bool(a->items[2]));
  CHECK(!ml_json_is_bool(a->items[3]));
  CHECK(str_of(a->items[4]) == "x");
  const ml_json* b = ml_json_get(a->items[5], "b");
  REQUIRE(ml_json_is(b, ML_JSON_NUMBER));
  CHECK(!b->is_int);
  CHECK(b->num == -2.5);
  CHECK(str_of(b) == "-2.5");
  CHECK(ml_json_is(ml_json_get(v, "c"), ML_JSON_OBJECT));
  CHECK(ml_json_get(v, "c")->n == 0);
  CHECK(ml_json_is(ml_json_get(v, "d"), ML_JSON_ARRAY));
  CHECK(ml_json_get(v, "d")->n == 0);
  CHECK(ml_json_get(v, "zz") == nullptr);
  CHECK(ml_json_get(a, "a") == nullptr);  // not an object
  CHECK(ml_json_get(nullptr, "a") == nullptr);
  CHECK(!ml_json_is(nullptr, ML_JSON_NULL));
  CHECK(!ml_json_is_bool(nullptr));
  CHECK(std::string(ml_json_type_name(ML_JSON_NULL)) == "null");
  CHECK(std::string(ml_json_type_name(ML_JSON_TRUE)) == "boolean");
  CHECK(std::string(ml_json_type_name(ML_JSON_FALSE)) == "boolean");
  CHECK(std::string(ml_json_type_name(ML_JSON_NUMBER)) == "number");
  CHECK(std::string(ml_json_type_name(ML_JSON_STRING)) == "string");
  CHECK(std::string(ml_json_type_name(ML_JSON_ARRAY)) == "array");
  CHECK(std::string(ml_json_type_name(ML_JSON_OBJECT)) == "object");

  // Scalars at the top level (RFC 8259), with the four whitespace bytes around them.
  for (const char* t : {"0", " \t\r\n\"s\"\n", "null", "true", "false", "[]", "{}"}) {
    const doc s(t);
    INFO(t << ": " << s.err.msg);
    CHECK(s.s == ML_OK);
  }
}

TEST_CASE("json: numbers", "[json]") {
  struct Case {
    const char* text;
    bool is_int;
    int64_t i64;
    double num;
  };
  const Case cases[] = {
      {"0", true, 0, 0.0},
      {"-1", true, -1, -1.0},
      {"42", true, 42, 42.0},
      {"9223372036854775807", true, INT64_MAX, 9223372036854775807.0},
      {"-9223372036854775808", true, INT64_MIN, -9223372036854775808.0},
      {"9223372036854775808", false, 0, 9223372036854775808.0},
      {"-9223372036854775809", false, 0, -9223372036854775808.0},
      {"18446744073709551616", false, 0, 18446744073709551616.0},
      {"100000000000000000000000", false, 0, 1e23},
      {"9007199254740993", true, 9007199254740993, 9007199254740992.0},  // 2^53 + 1: ties to even
      {"1.0", false, 0, 1.0},
      {"1e2", false, 0, 100.0},
      {"1E+2", false, 0, 100.0},
      {"0.1", false, 0, 0.1},
      {"123.456e-7", false, 0, 123.456e-7},
      {"1e22", false, 0, 1e22},
      {"1e23", false, 0, 1e23},
      {"0.000001e-300", false, 0, 1e-306},
      {"2.2250738585072011e-308", false, 0, 2.2250738585072011e-308},
      {"1.7976931348623157e308", false, 0, 1.7976931348623157e308},
      {"4.9e-324", false, 0, 4.9e-324},
      {"0.1e1", false, 0, 1.0},
      {"-0.0", false, 0, -0.0},
      // Past double's range: accepted, as Python's json does (serde_json refuses).
      {"1e400", false, 0, INFINITY},
      {"-1e400", false, 0, -INFINITY},
      {"1e-400", false, 0, 0.0},
      {"1e99999999999", false, 0, INFINITY},
      {"0.00000000000000000000000000000000000001e40", false, 0, 100.0},
  };
  for (const Case& c : cases) {
    const doc d(c.text);
    INFO(c.text << ": " << d.err.msg);
    REQUIRE(d.s == ML_OK);
    REQUIRE(d.v->type == ML_JSON_NUMBER);
    CHECK(d.v->is_int == c.is_int);
    if (c.is_int) CHECK(d.v->i64 == c.i64);
    CHECK(d.v->num == c.num);
    CHECK(std::signbit(d.v->num) == std::signbit(c.num));
    CHECK(str_of(d.v) == c.text);
  }
  // -0 is the integer 0, and its double keeps the sign (as strtod gives it).
  const doc z("-0");
  REQUIRE(z.s == ML_OK);
  CHECK(z.v->is_int);
  CHECK(z.v->i64 == 0);
  CHECK(z.v->num == 0.0);
  CHECK(std::signbit(z.v->num));

  for (const char* bad : {"01", "-01", "1.", ".1", "+1", "1e", "1e+", "-", "0x1", "Infinity", "-Infinity", "NaN",
                          "1.e2", "1 2", "- 1", "00", "1ee2", "1e2.5"}) {
    const doc d(bad);
    INFO(bad);
    CHECK(d.s == ML_E_FORMAT);
  }
}

TEST_CASE("json: numbers agree with strtod and round-trip %.17g", "[json]") {
  std::mt19937_64 rng(12345);
  char buf[64];
  for (int k = 0; k < 20000; ++k) {
    // Short decimals (the fast path) and full 17-digit ones (strtod), exponents near and far.
    const int digits = 1 + (int)(rng() % 19);
    char digs[24];
    for (int j = 0; j < digits; ++j) digs[j] = (char)('0' + rng() % 10);
    int first = 0;
    while (first < digits - 1 && digs[first] == '0') ++first;  // no leading zero
    const int nd = digits - first;
    const int point = (int)(rng() % (nd + 1));
    std::string lit = (rng() & 1) ? "-" : "";
    for (int j = 0; j < nd; ++j) {
      if (j == point && j > 0) lit += '.';
      lit += digs[first + j];
    }
    if (rng() & 1) {
      std::snprintf(buf, sizeof buf, "e%d", (int)(rng() % 80) - 40);
      lit += buf;
    }
    const doc d(lit);
    INFO(lit);
    REQUIRE(d.s == ML_OK);
    CHECK(d.v->num == std::strtod(lit.c_str(), nullptr));

    double x;
    const uint64_t bits = rng();
    std::memcpy(&x, &bits, 8);
    if (!std::isfinite(x)) continue;
    std::snprintf(buf, sizeof buf, "%.17g", x);
    const doc r(buf);
    INFO(buf);
    REQUIRE(r.s == ML_OK);
    CHECK(r.v->num == x);
  }
}

TEST_CASE("json: string escapes, surrogates and UTF-8", "[json]") {
  struct Case {
    std::string text, want;
  };
  const Case ok[] = {
      {R"("\"\\\/\b\f\n\r\t")", "\"\\/\b\f\n\r\t"},
      {R"("\u0041\u00e9\u20AC")", "A\xc3\xa9\xe2\x82\xac"},
      {R"("\ud83d\ude00")", "\xf0\x9f\x98\x80"},
      {R"("\uD834\uDD1E")", "\xf0\x9d\x84\x9e"},
      {R"("\uDBFF\uDFFF")", "\xf4\x8f\xbf\xbf"},
      {R"("\uFFFF")", "\xef\xbf\xbf"},
      {"\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf\"", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf"},
      {"\"\x7f\"", "\x7f"},
      {R"("")", ""},
  };
  for (const Case& c : ok) {
    const doc d(c.text);
    INFO(c.text << ": " << d.err.msg);
    REQUIRE(d.s == ML_OK);
    REQUIRE(d.v->type == ML_JSON_STRING);
    CHECK(str_of(d.v) == c.want);
    CHECK(d.v->str[d.v->len] == 0);
  }
  const char* bad[] = {
      R"("\ud800")",        R"("\udc00")",          R"("\ud800\u0041")", R"("\ud800x")",      R"("\ud800\n")",
      R"("\ude00\ud83d")",  R"("\ud800\ud800")",    R"("\u12")",         R"("\u12G4")",       R"("\x41")",
      R"("\a")",            R"("\)",                R"("abc)",           "\"\x01\"",          "\"\n\"",
      "\"\x1f\"",           "\"\xc0\x80\"",         "\"\xc1\xbf\"",      "\"\xe0\x80\x80\"",  "\"\xed\xa0\x80\"",
      "\"\xf4\x90\x80\x80\"", "\"\xf5\x80\x80\x80\"", "\"\x80\"",        "\"\xe2\x82\"",      "\"\xff\"",
      "\"\xf0\x9f\x98\"",
  };
  for (const char* t : bad) {
    const doc d(t);
    INFO(t);
    CHECK(d.s == ML_E_FORMAT);
  }
  // NUL inside strings and keys is kept; len counts it.
  const doc n(R"({"k\u0000ey": "a\u0000b"})");
  REQUIRE(n.s == ML_OK);
  REQUIRE(n.v->n == 1);
  CHECK(std::string(n.v->members[0].key, n.v->members[0].key_len) == std::string("k\0ey", 4));
  CHECK(n.v->members[0].key[4] == 0);
  CHECK(str_of(n.v->members[0].value) == std::string("a\0b", 3));
  CHECK(n.v->members[0].value->len == 3);
  // A raw NUL byte is a control character: refused.
  CHECK(doc(std::string("\"a\0b\"", 5)).s == ML_E_FORMAT);
}

TEST_CASE("json: the depth limit is exactly ML_JSON_MAX_DEPTH", "[json]") {
  static_assert(ML_JSON_MAX_DEPTH == 512);
  CHECK(doc(nested(512, '[', ']')).s == ML_OK);
  CHECK(doc(nested(513, '[', ']')).s == ML_E_FORMAT);
  std::string objs;
  for (int k = 0; k < 512; ++k) objs += "{\"a\":";
  objs += "1" + std::string(512, '}');
  CHECK(doc(objs).s == ML_OK);
  const doc deep_obj("{\"a\":" + objs + "}");
  CHECK(deep_obj.s == ML_E_FORMAT);
  CHECK(std::string(deep_obj.err.msg).find("nesting") != std::string::npos);
  // Mixed, and far deeper than the limit (no recursion on the C stack): refused at the 513th.
  std::string mixed;
  for (int k = 0; k < 100000; ++k) mixed += (k & 1) ? "{\"k\":" : "[";
  const doc m(mixed);
  CHECK(m.s == ML_E_FORMAT);
  CHECK(std::string(m.err.msg).find("byte ") != std::string::npos);
  // The 512-deep value's innermost item is reachable.
  const doc d("[[[[1]]]]");
  REQUIRE(d.s == ML_OK);
  CHECK(d.v->items[0]->items[0]->items[0]->items[0]->i64 == 1);
}

TEST_CASE("json: member order and duplicate keys", "[json]") {
  const doc d(R"({"z": 1, "a": 2, "m": {"x": 0}, "a": 3, "": 4})");
  REQUIRE(d.s == ML_OK);
  REQUIRE(d.v->n == 5);
  const char* keys[] = {"z", "a", "m", "a", ""};
  for (size_t k = 0; k < 5; ++k) CHECK(std::string(d.v->members[k].key) == keys[k]);
  CHECK(d.v->members[1].value->i64 == 2);
  CHECK(ml_json_get(d.v, "a")->i64 == 3);  // the last duplicate
  CHECK(ml_json_get(d.v, "")->i64 == 4);
  CHECK(ml_json_get(ml_json_get(d.v, "m"), "x")->i64 == 0);
  // Many members in a nested layout keep their order (the scratch vectors grow past reallocations).
  std::string big = "{";
  char item[64];
  for (int k = 0; k < 3000; ++k) {
    std::snprintf(item, sizeof item, "%s\"k%d\":[%d,{\"i\":%d}]", k ? "," : "", k, k, -k);
    big += item;
  }
  big += "}";
  const doc b(big);
  REQUIRE(b.s == ML_OK);
  REQUIRE(b.v->n == 3000);
  for (int k = 0; k < 3000; ++k) {
    const ml_json_member& m = b.v->members[k];
    std::snprintf(item, sizeof item, "k%d", k);
    REQUIRE(std::string(m.key) == item);
    REQUIRE(m.value->n == 2);
    REQUIRE(m.value->items[0]->i64 == k);
    REQUIRE(ml_json_get(m.value->items[1], "i")->i64 == -k);
  }
}

TEST_CASE("json: errors name the byte offset", "[json]") {
  struct Case {
    const char* text;
    const char* msg;
  };
  const Case cases[] = {
      {"", "json: byte 0: "},
      {"   ", "json: byte 3: "},
      {"[1,]", "json: byte 3: "},
      {R"({"a" 1})", "json: byte 5: expected ':'"},
      {R"({"a":1,})", "json: byte 7: expected a string key"},
      {"[1 2]", "json: byte 3: expected ',' or ']'"},
      {R"({"a":1])", "json: byte 6: expected ',' or '}'"},
      {"[1] x", "json: byte 4: unexpected data"},
      {"tru", "json: byte 0: "},
      {"\"ab\x01\"", "json: byte 3: control character"},
      {R"(["\ud800"])", "json: byte 2: lone high surrogate"},
      {"[\"ok\", \"\xc3\x28\"]", "json: byte 8: invalid UTF-8"},
      {"\xef\xbb\xbf{}", "json: byte 0: "},  // a BOM is not JSON
      {"[01]", "json: byte 2: leading zero"},
      {"\f1", "json: byte 0: "},  // form feed is not JSON whitespace
  };
  for (const Case& c : cases) {
    const doc d(c.text);
    INFO(c.text << " -> " << d.err.msg);
    CHECK(d.s == ML_E_FORMAT);
    CHECK(std::string(d.err.msg).rfind(c.msg, 0) == 0);
  }
}

TEST_CASE("json: out of memory is ML_E_NOMEM", "[json]") {
  const std::string text = R"({"a": [1, 2, 3, "four", {"five": 5}]})";
  ml_bump b;
  b.limit = 64;
  ml_json* v = nullptr;
  ml_error err{};
  CHECK(ml_json_parse(text.data(), text.size(), &b, &v, &err) == ML_E_NOMEM);
  CHECK(v == nullptr);
  ml_bump ok;
  CHECK(ml_json_parse(text.data(), text.size(), &ok, &v, &err) == ML_OK);
}

TEST_CASE("json: ml_json_quote escapes as Python's json.dumps(ensure_ascii=False)", "[json]") {
  // Expected values printed by python3 -c 'import json; print(json.dumps(s, ensure_ascii=False).encode())'.
  CHECK(quote("") == R"("")");
  CHECK(quote("plain") == R"("plain")");
  CHECK(quote("a\"b\\c") == R"("a\"b\\c")");
  CHECK(quote("tab\there\nnl\rcr") == R"("tab\there\nnl\rcr")");
  CHECK(quote("\b\f") == R"("\b\f")");
  CHECK(quote(std::string("\x00\x01\x1f\x7f", 4)) == "\"\\u0000\\u0001\\u001f\x7f\"");
  CHECK(quote("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  CHECK(quote("</script>") == R"("</script>")");
  CHECK(quote("x\xe2\x80\xa8y") == "\"x\xe2\x80\xa8y\"");
  // Appends to what is there; the output parses back to the input.
  ml_vec<char> out;
  REQUIRE(out.append("x=", 2));
  REQUIRE(ml_json_quote(&out, "\x02q\"", 3));
  CHECK(std::string(out.data(), out.size()) == "x=\"\\u0002q\\\"\"");
  std::string all;
  for (int c = 1; c < 128; ++c) all += (char)c;
  const std::string q = quote(all);
  const doc d(q);
  REQUIRE(d.s == ML_OK);
  CHECK(str_of(d.v) == all);
}

TEST_CASE("json: real tokenizer.json files", "[json]") {
  // Counts and entries read with Python's json.load.
  struct Case {
    const char* path;
    size_t vocab, merges, added;
    const char* key;
    int64_t id;
  };
  const Case cases[] = {
      {"models/tinystories-656k-hf/tokenizer.json", 2048, 1967, 0, "dog\xe2\x96\x81named\xe2\x96\x81Max", 2047},
      {"data/hf/smollm2-135m-instruct/tokenizer.json", 49152, 48900, 17, "ectable", 49151},
  };
  for (const Case& c : cases) {
    const std::string path = ml_test_shared(c.path);
    const std::string text = read_all(path);
    if (text.empty()) {
      WARN("missing " << path);
      continue;
    }
    const doc d(text);
    INFO(path << ": " << d.err.msg);
    REQUIRE(d.s == ML_OK);
    const ml_json* model = ml_json_get(d.v, "model");
    CHECK(str_of(ml_json_get(model, "type")) == "BPE");
    const ml_json* vocab = ml_json_get(model, "vocab");
    REQUIRE(ml_json_is(vocab, ML_JSON_OBJECT));
    CHECK(vocab->n == c.vocab);
    CHECK(vocab->members[vocab->n - 1].value->i64 == c.id);
    CHECK(std::string(vocab->members[vocab->n - 1].key) == c.key);
    CHECK(ml_json_get(vocab, c.key)->i64 == c.id);
    CHECK(ml_json_get(model, "merges")->n == c.merges);
    if (c.added) CHECK(ml_json_get(d.v, "added_tokens")->n == c.added);
  }
  const doc t(read_all(ml_test_shared("models/tinystories-656k-hf/tokenizer.json")));
  if (t.s == ML_OK) {
    const ml_json* v = ml_json_get(ml_json_get(t.v, "model"), "vocab");
    CHECK(str_of(ml_json_get(ml_json_get(t.v, "model"), "merges")->items[0]) == "e \xe2\x96\x81");
    CHECK(std::string(v->members[3].key) == "\n");
    CHECK(ml_json_get(v, "<|start_story|>")->i64 == 1);
  }
}

// Hidden (run it by name): parse speed on a real tokenizer.json, in MB/s.
//   build/scalar/bin/ml_tests "[json_bench]"
TEST_CASE("json: parse speed", "[.][json_bench]") {
  const std::string path = ml_test_shared("data/hf/smollm2-135m-instruct/tokenizer.json");
  const std::string text = read_all(path);
  if (text.empty()) return;
  const int reps = 20;
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const doc d(text);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    REQUIRE(d.s == ML_OK);
    if (s < best) best = s;
  }
  WARN(path << ": " << text.size() / 1e6 << " MB, best of " << reps << ": " << best * 1e3 << " ms, "
            << text.size() / 1e6 / best << " MB/s");
}
