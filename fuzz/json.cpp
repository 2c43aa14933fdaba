// Fuzzes the JSON reader (core/json.h): ml_json_parse over the whole input, then the reader's
// promises on what it accepts and refuses:
// - a refusal is ML_E_FORMAT with "json: byte N: ..." and N <= the input's size;
// - an accepted tree nests at most ML_JSON_MAX_DEPTH deep, its strings and keys are valid UTF-8
//   with a NUL after len bytes, its numbers' text is a JSON number whose int64 (when is_int)
//   and double agree with strtoll/strtod, and its offsets lie inside the input;
// - writing the tree back (ml_json_quote for strings, the literal text for numbers) gives JSON
//   that parses to a tree writing back the same bytes (the round trip);
// - parsing again under a bump limit below what the first parse used fails with ML_E_NOMEM.
// Input: the document's bytes. Seeds: JSONTestSuite's test_parsing files and a tokenizer.json
// (run.py copies them from shared/).
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/json.h"
#include "core/vec.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// Valid UTF-8 per RFC 3629 (no overlongs, surrogates or code points past U+10FFFF).
bool valid_utf8(const unsigned char* s, size_t n) {
  for (size_t i = 0; i < n;) {
    const unsigned c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
    else return false;
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = cp << 6 | (s[i + k] & 0x3F);
    }
    const uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

void check_string(const char* s, size_t n) {
  check(s != nullptr && s[n] == 0);
  check(valid_utf8(reinterpret_cast<const unsigned char*>(s), n));
}

void check_number(const ml_json* v) {
  check(v->str && v->len && v->str[v->len] == 0 && std::strlen(v->str) == v->len);
  const bool integer = !std::strpbrk(v->str, ".eE");
  errno = 0;
  char* end = nullptr;
  const long long ll = std::strtoll(v->str, &end, 10);
  const bool fits = integer && errno == 0 && end == v->str + v->len;
  check(v->is_int == fits);
  if (fits) check(v->i64 == ll);
  const double d = std::strtod(v->str, &end);  // the C locale: libFuzzer never sets another
  check(end == v->str + v->len);
  check(std::memcmp(&d, &v->num, sizeof d) == 0);  // the same bits (-0 and inf included)
}

// Writes v as JSON to out, checking it on the way; false when out cannot grow.
bool write(const ml_json* v, int depth, size_t size, std::string* out) {
  check(v && depth <= ML_JSON_MAX_DEPTH && v->offset < size);
  ml_vec<char> q;
  switch (v->type) {
    case ML_JSON_NULL: *out += "null"; return true;
    case ML_JSON_TRUE: *out += "true"; return true;
    case ML_JSON_FALSE: *out += "false"; return true;
    case ML_JSON_NUMBER:
      check_number(v);
      out->append(v->str, v->len);
      return true;
    case ML_JSON_STRING:
      check_string(v->str, v->len);
      if (!ml_json_quote(&q, v->str, v->len)) return false;
      out->append(q.data(), q.size());
      return true;
    case ML_JSON_ARRAY:
      check(depth < ML_JSON_MAX_DEPTH);
      check(v->n == 0 || v->items);
      *out += '[';
      for (size_t i = 0; i < v->n; ++i) {
        if (i) *out += ',';
        if (!write(v->items[i], depth + 1, size, out)) return false;
      }
      *out += ']';
      return true;
    case ML_JSON_OBJECT:
      check(depth < ML_JSON_MAX_DEPTH);
      check(v->n == 0 || v->members);
      *out += '{';
      for (size_t i = 0; i < v->n; ++i) {
        const ml_json_member& m = v->members[i];
        if (i) *out += ',';
        check_string(m.key, m.key_len);
        q.clear();
        if (!ml_json_quote(&q, m.key, m.key_len)) return false;
        out->append(q.data(), q.size());
        *out += ':';
        if (!write(m.value, depth + 1, size, out)) return false;
      }
      // The last duplicate wins, and a key without a NUL inside is found.
      if (v->n) {
        const ml_json_member& m = v->members[v->n - 1];
        if (std::strlen(m.key) == m.key_len) check(ml_json_get(v, m.key) == m.value);
      }
      *out += '}';
      return true;
  }
  std::abort();  // an unknown type
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A heap copy of exactly size bytes, so that ASan catches a read past the end.
  char* buf = static_cast<char*>(std::malloc(size ? size : 1));
  std::memcpy(buf, data, size);
  ml_bump b;
  ml_json* v = nullptr;
  ml_error err{};
  const ml_status s = ml_json_parse(buf, size, &b, &v, &err);
  if (s != ML_OK) {
    check(s == ML_E_FORMAT && v == nullptr);
    char* end = nullptr;
    check(std::strncmp(err.msg, "json: byte ", 11) == 0);
    const unsigned long long at = std::strtoull(err.msg + 11, &end, 10);
    check(end != err.msg + 11 && *end == ':' && at <= size);
    std::free(buf);
    return 0;
  }
  std::string once;
  check(write(v, 0, size, &once));
  const size_t used = b.used_total;
  ml_bump_free(&b);
  std::free(buf);

  // The round trip: what was written parses and writes back the same bytes.
  ml_bump b2;
  ml_json* v2 = nullptr;
  check(ml_json_parse(once.data(), once.size(), &b2, &v2, &err) == ML_OK);
  std::string twice;
  check(write(v2, 0, once.size() ? once.size() : 1, &twice));
  check(once == twice);

  // Too little memory: ML_E_NOMEM, no tree.
  ml_bump small;
  small.limit = used / 2 ? used / 2 : 1;
  ml_json* v3 = nullptr;
  check(ml_json_parse(reinterpret_cast<const char*>(data), size, &small, &v3, &err) == ML_E_NOMEM && v3 == nullptr);
  return 0;
}
