// The Unicode layer (src/model/tokenizer/unicode.h) against independent oracles:
// - Python's unicodedata (run at test time through the script below when python3 exists; SKIPped
//   otherwise): general categories (compared where Python's Unicode version and ours both assign
//   the code point), simple lowercase, str.isspace() (which differs from White_Space only at
//   U+001C..U+001F), and NFC/NFD/NFKC/NFKD of a corpus (every decomposing or combining character
//   alone and between a base and a mark, seeded random sequences of bases, Hangul jamo and
//   syllables, marks of every class, singletons, exclusions), with the NFD/NFKD alignment the script
//   derives from per-character decompositions;
// - the UCD's own conformance file NormalizationTest.txt (15.0, read by the same script);
// - hand-written UTF-8 cases from RFC 3629 / Unicode table 3-7;
// - the generator: rerunning tools/gen_unicode.py reproduces the committed unicode_data.cpp.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "model/script_oracle.h"
#include <fstream>
#include "model/tokenizer/unicode.h"

namespace {

const char* kOracle = R"PY(
# Oracle for tests/model/test_unicode.cpp: Python's unicodedata (its own Unicode version) and the
# UCD's NormalizationTest.txt. Prints lines of hex code points:
#   V <python unicodedata version>
#   C lo hi cat          general category runs of the code points Python knows (not Cn)
#   L cp lower           simple lowercase where Python's str.lower() gives one other character
#   N src;nfc;nfd;nfkc;nfkd;nfc_align;nfd_align;nfkc_align;nfkd_align   a corpus (align: Hugging Face's
#                        input character index per output code point)
#   W cps...             the code points of str.isspace()
#   T c1;c2;c3;c4;c5     NormalizationTest.txt lines (when the file exists)
import bz2, os, random, sys, unicodedata as ud
print("V", ud.unidata_version)
prev = None
for cp in range(0x110000):
    c = ud.category(chr(cp))
    c = None if c == "Cn" else c
    if c != prev:
        if prev:
            print("C %X %X %s" % (start, cp - 1, prev))
        start, prev = cp, c
if prev:
    print("C %X %X %s" % (start, 0x10FFFF, prev))
for cp in range(0x110000):
    if ud.category(chr(cp)) in ("Cn", "Cs"):
        continue
    l = chr(cp).lower()
    if len(l) == 1 and ord(l) != cp:
        print("L %X %X" % (cp, ord(l)))

print("W " + " ".join("%X" % cp for cp in range(0x110000) if chr(cp).isspace()))

def hexs(s):
    return " ".join("%X" % ord(c) for c in s)

def compose_pair(a, b):
    # The primary composite of a + b, if any (NFC of the pair is one character then).
    c = ud.normalize("NFC", a + b)
    return c if len(c) == 1 else None

def align_hf(s, form):
    # Hugging Face's alignment (the Rust tokenizers replay unicode-normalization-alignments'
    # change tags): decompose each character alone, tag 0 for its first code point and +1 for the
    # others; order each run of marks stably by ccc, tags moving along; for NFC/NFKC compose
    # (a composite's tag is starter + mark - 1); then replay the tags in output order against the
    # input characters: tag <= 0 takes the next input character (and skips -tag more), tag > 0
    # points at the character before.
    base = "NFD" if form in ("NFC", "NFD") else "NFKD"
    items = []
    for ch in s:
        for k, d in enumerate(ud.normalize(base, ch)):
            items.append([d, 0 if k == 0 else 1])
    k = 0
    while k < len(items):
        if ud.combining(items[k][0]) == 0:
            k += 1; continue
        j = k
        while j < len(items) and ud.combining(items[j][0]) != 0:
            j += 1
        items[k:j] = sorted(items[k:j], key=lambda t: ud.combining(t[0]))
        k = j
    if form in ("NFC", "NFKC"):
        out, starter, last = [], None, None
        for c, t in items:
            cc = ud.combining(c)
            if starter is not None and (last is None or last < cc):
                comp = compose_pair(out[starter][0], c)
                if comp:
                    out[starter] = [comp, out[starter][1] + t - 1]
                    continue
            if cc == 0:
                starter, last = len(out), None
            else:
                last = cc
            out.append([c, t])
        items = out
    assert "".join(c for c, _ in items) == ud.normalize(form, s)
    idx, cur = [], 0
    for _, t in items:
        if t > 0:
            idx.append(max(cur - 1, 0))
        else:
            idx.append(min(cur, len(s) - 1)); cur += 1 - t
    return " ".join("%X" % i for i in idx)

def emit(s):
    forms = ("NFC", "NFD", "NFKC", "NFKD")
    print("N " + ";".join([hexs(s)] + [hexs(ud.normalize(f, s)) for f in forms] + [align_hf(s, f) for f in forms]))

assigned = [cp for cp in range(0x110000) if ud.category(chr(cp)) not in ("Cn", "Cs")]
special = [cp for cp in assigned if ud.decomposition(chr(cp)) or ud.combining(chr(cp))]
marks = [cp for cp in assigned if ud.combining(chr(cp))]
for cp in special:
    emit(chr(cp))
    emit("a" + chr(cp) + "\u0301")
bases = [ord(c) for c in "aAeEoOuUiInNcCsSzZ"] + [0x391, 0x3B1, 0x3C9, 0x415, 0x435, 0x1100, 0x1161, 0x11A8, 0xAC00, 0xAC01, 0xD7A3,
         0x4E00, 0x0915, 0x093C, 0x0B47, 0x0B3E, 0x0CC6, 0x0CD5, 0x0FB2, 0x0F80, 0x212B, 0x2126, 0x0344, 0x0F73, 0x1E9B, 0xFB1D, 0x0958]
pool = bases + marks + special[:500]
rng = random.Random(1234)
for _ in range(20000):
    n = rng.randint(1, 8)
    emit("".join(chr(rng.choice(pool if rng.random() < 0.7 else bases)) for _ in range(n)))
for _ in range(3000):
    emit("".join(chr(rng.choice(assigned)) for _ in range(rng.randint(1, 6))))
path = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/unicode/NormalizationTest.txt.bz2"
if os.path.exists(path):
    with bz2.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            line = line.split("#")[0].strip()
            if line and not line.startswith("@"):
                print("T " + ";".join(line.split(";")[:5]))
)PY";

const char* kCats[30] = {"Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps",
                         "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"};

std::vector<uint32_t> parse_hex(const std::string& s) {
  std::vector<uint32_t> v;
  std::istringstream in(s);
  std::string w;
  while (in >> w) v.push_back((uint32_t)std::stoul(w, nullptr, 16));
  return v;
}

std::string utf8(const std::vector<uint32_t>& cps) {
  std::string s;
  for (uint32_t c : cps) {
    char b[4];
    s.append(b, (size_t)ml_utf8_put(c, b));
  }
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> r;
  size_t a = 0;
  for (;;) {
    size_t b = s.find(sep, a);
    r.push_back(s.substr(a, b == std::string::npos ? std::string::npos : b - a));
    if (b == std::string::npos) return r;
    a = b + 1;
  }
}

std::string norm(ml_unorm f, const std::string& s, std::vector<uint32_t>* align = nullptr) {
  ml_vec<char> out;
  ml_vec<uint32_t> al;
  ml_error err;
  REQUIRE(ml_unicode_normalize(f, s.data(), s.size(), &out, &al, &err) == ML_OK);
  REQUIRE(al.size() == out.size());
  if (align) align->assign(al.begin(), al.end());
  return std::string(out.data(), out.size());
}

// The oracle's output, computed once per test run.
const std::string& oracle() {
  static std::string out;
  static bool done = false;
  if (!done) {
    done = true;
    if (ml_test_have("python3")) {
      std::string path = ml_test_tmp("unicode_oracle.py");
      ml_test_write(path, kOracle);
      int rc = 0;
      out = ml_test_run("python3 " + path, &rc);
      std::remove(path.c_str());
      if (rc != 0) out.clear();
    }
  }
  return out;
}

std::vector<std::string> oracle_lines(char kind) {
  std::vector<std::string> r;
  std::istringstream in(oracle());
  std::string line;
  while (std::getline(in, line))
    if (line.size() > 2 && line[0] == kind && line[1] == ' ') r.push_back(line.substr(2));
  return r;
}

}  // namespace

TEST_CASE("UTF-8: strict checking, decoding and encoding", "[unicode]") {
  struct Bad {
    const char* s;
    size_t n, at;
  } bad[] = {
      {"\x80", 1, 0},                  // stray continuation
      {"a\xC0\x80", 3, 1},             // overlong NUL
      {"\xC1\xBF", 2, 0},              // overlong
      {"\xE0\x80\x80", 3, 0},          // overlong 3-byte
      {"\xE0\x9F\xBF", 3, 0},          // overlong U+07FF
      {"\xF0\x80\x80\x80", 4, 0},      // overlong 4-byte
      {"\xF0\x8F\xBF\xBF", 4, 0},      // overlong U+FFFF
      {"ab\xED\xA0\x80", 5, 2},        // surrogate U+D800
      {"\xED\xBF\xBF", 3, 0},          // surrogate U+DFFF
      {"\xF4\x90\x80\x80", 4, 0},      // U+110000
      {"\xF5\x80\x80\x80", 4, 0},      // lead byte F5
      {"\xFF", 1, 0},
      {"\xE2\x82", 2, 0},              // truncated
      {"x\xE2\x82y", 4, 1},            // bad continuation
      {"\xF0\x9F\x98", 3, 0},
  };
  for (const Bad& b : bad) {
    size_t at = 99;
    CHECK_FALSE(ml_utf8_check(b.s, b.n, &at));
    CHECK(at == b.at);
  }
  const char* good = "a\xC2\x80\xDF\xBF\xE0\xA0\x80\xED\x9F\xBF\xEE\x80\x80\xEF\xBF\xBF\xF0\x90\x80\x80\xF4\x8F\xBF\xBF";
  CHECK(ml_utf8_check(good, strlen(good), nullptr));
  std::vector<uint32_t> want = {'a', 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF};
  std::vector<uint32_t> got;
  for (size_t i = 0, n = strlen(good); i < n;) got.push_back(ml_utf8_next(good, n, &i));
  CHECK(got == want);
  // Every scalar value round-trips, with the byte count of its range.
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp == 0xD800) cp = 0xE000;
    char b[4];
    int k = ml_utf8_put(cp, b);
    int expect = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    size_t i = 0;
    if (k != expect || !ml_utf8_check(b, (size_t)k, nullptr) || ml_utf8_next(b, (size_t)k, &i) != cp || i != (size_t)k) {
      FAIL("round trip of U+" << std::hex << cp);
    }
  }
}

TEST_CASE("Unicode: categories, White_Space and lowercase against Python's unicodedata", "[unicode]") {
  if (oracle().empty()) {
    WARN("SKIP: python3 not available");
    return;
  }
  std::map<std::string, int> idx;
  for (int c = 0; c < 30; ++c) idx[kCats[c]] = c;
  size_t compared = 0, newer = 0;
  std::vector<bool> known(0x110000, false);
  for (const std::string& l : oracle_lines('C')) {
    std::istringstream in(l);
    std::string lo, hi, cat;
    in >> lo >> hi >> cat;
    for (uint32_t cp = (uint32_t)std::stoul(lo, nullptr, 16); cp <= (uint32_t)std::stoul(hi, nullptr, 16); ++cp) {
      known[cp] = true;
      ml_ucat ours = ml_unicode_category(cp);
      if (ours == ML_UCAT_Cn) continue;  // only assigned in Python's version: impossible (15.0 >= 14.0), counted below
      ++compared;
      if (ours != idx[cat]) FAIL("U+" << std::hex << cp << ": " << kCats[ours] << " != Python's " << cat);
    }
  }
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp)
    if (!known[cp] && ml_unicode_category(cp) != ML_UCAT_Cn) ++newer;
  INFO("compared " << compared << ", assigned only in ours " << newer);
  CHECK(compared > 280000);  // planes 15-16 private use included
  CHECK(newer < 5000);       // Unicode 15.0 added 4,489 characters
  // Lowercase: Python's single-character str.lower() is the simple mapping.
  std::vector<uint32_t> lower(0x110000, 0);
  for (const std::string& l : oracle_lines('L')) {
    auto v = parse_hex(l);
    lower[v[0]] = v[1];
  }
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (!known[cp] || (cp >= 0xD800 && cp <= 0xDFFF)) continue;
    uint32_t want = lower[cp] ? lower[cp] : cp;
    if (cp == 0x130) want = 0x69;  // İ: Python's full lowering is i + U+0307; the simple mapping is i
    if (ml_unicode_simple_lower(cp) != want) FAIL("lower U+" << std::hex << cp << " = " << ml_unicode_simple_lower(cp));
  }
  // White_Space = str.isspace() except U+001C..U+001F (Python: bidi class B/S, not White_Space).
  std::vector<uint32_t> ws = parse_hex(oracle_lines('W').at(0));
  std::vector<uint32_t> ours;
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp)
    if (ml_unicode_is_white_space(cp) || (cp >= 0x1C && cp <= 0x1F)) ours.push_back(cp);
  CHECK(ours == ws);
  CHECK(ml_unicode_category(0x110000) == ML_UCAT_Cn);
}

TEST_CASE("Unicode: NFC/NFD/NFKC/NFKD and alignment against Python's unicodedata", "[unicode]") {
  if (oracle().empty()) {
    WARN("SKIP: python3 not available");
    return;
  }
  const ml_unorm forms[4] = {ML_NFC, ML_NFD, ML_NFKC, ML_NFKD};
  const char* names[4] = {"NFC", "NFD", "NFKC", "NFKD"};
  size_t cases = 0;
  for (const std::string& l : oracle_lines('N')) {
    auto f = split(l, ';');
    REQUIRE(f.size() == 9);
    auto src_cps = parse_hex(f[0]);
    std::string src = utf8(src_cps);
    std::vector<uint32_t> char_off;  // byte offset of each input character
    for (size_t i = 0, k = 0; k < src_cps.size(); ++k) {
      char_off.push_back((uint32_t)i);
      ml_utf8_next(src.data(), src.size(), &i);
    }
    for (int k = 0; k < 4; ++k) {
      std::vector<uint32_t> al;
      std::string got = norm(forms[k], src, &al);
      std::string want = utf8(parse_hex(f[1 + k]));
      if (got != want) FAIL(names[k] << " of " << f[0] << ": got " << got << " want " << want);
      // Hugging Face's alignment (the script's), per output code point.
      auto idx = parse_hex(f[5 + k]);
      std::vector<uint32_t> want_al;
      auto out_cps = parse_hex(f[1 + k]);
      REQUIRE(idx.size() == out_cps.size());
      for (size_t j = 0; j < out_cps.size(); ++j) {
        char b[4];
        int nb = ml_utf8_put(out_cps[j], b);
        for (int q = 0; q < nb; ++q) want_al.push_back(char_off[idx[j]]);
      }
      if (al != want_al) FAIL(names[k] << " alignment of " << f[0]);
    }
    ++cases;
  }
  CHECK(cases > 20000);
}

TEST_CASE("Unicode: NormalizationTest.txt conformance", "[unicode]") {
  if (oracle().empty()) {
    WARN("SKIP: python3 not available");
    return;
  }
  auto lines = oracle_lines('T');
  if (lines.empty()) {
    WARN("SKIP: NormalizationTest.txt.bz2 not found");
    return;
  }
  for (const std::string& l : lines) {
    auto f = split(l, ';');
    REQUIRE(f.size() == 5);
    std::string c[5];
    for (int k = 0; k < 5; ++k) c[k] = utf8(parse_hex(f[k]));
    for (int k = 0; k < 3; ++k) {
      CHECK(norm(ML_NFC, c[k]) == c[1]);
      CHECK(norm(ML_NFD, c[k]) == c[2]);
    }
    for (int k = 3; k < 5; ++k) {
      CHECK(norm(ML_NFC, c[k]) == c[3]);
      CHECK(norm(ML_NFD, c[k]) == c[4]);
    }
    for (int k = 0; k < 5; ++k) {
      CHECK(norm(ML_NFKC, c[k]) == c[3]);
      CHECK(norm(ML_NFKD, c[k]) == c[4]);
    }
  }
  CHECK(lines.size() > 18000);
}

TEST_CASE("Unicode: ASCII fast path, long mark runs, lowercase, invalid input", "[unicode]") {
  std::string ascii = "Hello, world!\n\tThe 42 quick brown foxes.";
  std::vector<uint32_t> al;
  for (ml_unorm f : {ML_NFC, ML_NFD, ML_NFKC, ML_NFKD}) {
    CHECK(norm(f, ascii, &al) == ascii);
    for (size_t i = 0; i < al.size(); ++i) CHECK(al[i] == i);
  }
  // 5,000 marks of two classes on one base: canonical order puts the 220s (below) before the 230s.
  std::string s = "a";
  std::string want = "a";
  for (int i = 0; i < 2500; ++i) s += "\xCC\x81\xCC\xA3";  // U+0301 (230), U+0323 (220)
  for (int i = 0; i < 2500; ++i) want += "\xCC\xA3";
  for (int i = 0; i < 2500; ++i) want += "\xCC\x81";
  CHECK(norm(ML_NFD, s) == want);
  CHECK(norm(ML_NFC, s) == "\xE1\xBA\xA1" + want.substr(1 + 2));  // ạ then the rest
  // Lowercase with alignment.
  ml_vec<char> out;
  ml_vec<uint32_t> la;
  ml_error err;
  std::string mixed = "AÉΣİx";
  REQUIRE(ml_unicode_lowercase(mixed.data(), mixed.size(), &out, &la, &err) == ML_OK);
  CHECK(std::string(out.data(), out.size()) == "aéσix");
  std::vector<uint32_t> want_la = {0, 1, 1, 3, 3, 5, 7};
  CHECK(std::vector<uint32_t>(la.begin(), la.end()) == want_la);
  // Invalid UTF-8 is refused with its offset.
  std::string badu = "ok\xC3\xA9\xFFz";
  CHECK(ml_unicode_normalize(ML_NFC, badu.data(), badu.size(), &out, &la, &err) == ML_E_FORMAT);
  CHECK(std::string(err.msg).find("offset 4") != std::string::npos);
  CHECK(ml_unicode_lowercase(badu.data(), badu.size(), &out, nullptr, &err) == ML_E_FORMAT);
}

TEST_CASE("Unicode: tools/gen_unicode.py reproduces unicode_data.cpp", "[unicode]") {
  std::string root = ml_test_source_root();
  std::ifstream ucd("/usr/share/unicode/UnicodeData.txt");
  if (root.empty() || !ucd.good() || !ml_test_have("python3")) {
    WARN("SKIP: needs python3, /usr/share/unicode and the source tree");
    return;
  }
  std::string out = ml_test_tmp("unicode_data.cpp");
  int rc = 0;
  ml_test_run("python3 " + root + "tools/gen_unicode.py /usr/share/unicode " + out, &rc);
  REQUIRE(rc == 0);
  std::ifstream a(out, std::ios::binary), b(root + "src/model/tokenizer/unicode_data.cpp", std::ios::binary);
  std::stringstream sa, sb;
  sa << a.rdbuf();
  sb << b.rdbuf();
  std::remove(out.c_str());
  CHECK(sa.str() == sb.str());
}

TEST_CASE("Unicode: NFC speed", "[.][unicode-bench]") {
  std::string en, mixed;
  const char* words[] = {"The ", "quick ", "brown ", "fox ", "jumps ", "over ", "the ", "lazy ", "dog. ", "It's ", "2024\n"};
  const char* mx[] = {"Café ", "naïve ", "日本語のテキスト ", "한국어 문장 ", "हिन्दी ", "العربية ", "👩‍👩‍👧 ", "Ωμέγα ", "e\xCC\x81 ", "plain "};
  for (size_t i = 0; en.size() < (1 << 20); ++i) en += words[i % 11];
  for (size_t i = 0; mixed.size() < (1 << 20); ++i) mixed += mx[(i * 7) % 10];
  for (auto* t : {&en, &mixed}) {
    ml_vec<char> out;
    ml_vec<uint32_t> al;
    ml_error err;
    auto t0 = std::chrono::steady_clock::now();
    int reps = 5;
    for (int r = 0; r < reps; ++r) REQUIRE(ml_unicode_normalize(ML_NFC, t->data(), t->size(), &out, &al, &err) == ML_OK);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    WARN((t == &en ? "English" : "mixed") << " NFC with alignment: " << (reps * t->size() / s / 1e6) << " MB/s");
  }
}
