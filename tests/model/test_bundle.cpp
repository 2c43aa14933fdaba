// The kind-2 tokenizer section (src/model/tokenizer/bundle.h): the bytes ml_hf_bundle_write lays
// out are the documented layout (docs/format.md, built here by hand), they parse back to the
// same files, and every damaged section is refused with a message naming what is wrong.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "model/tokenizer/bundle.h"

namespace {

void u32(std::string* s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s->push_back((char)(v >> (8 * i)));
}
void u64(std::string* s, uint64_t v) {
  u32(s, (uint32_t)v);
  u32(s, (uint32_t)(v >> 32));
}
// One entry as docs/format.md lays it out.
std::string entry(const std::string& name, const std::string& data) {
  std::string e;
  u32(&e, (uint32_t)name.size());
  u32(&e, 0);
  u64(&e, data.size());
  return e + name + data;
}
std::string section(const std::vector<std::string>& entries) {
  std::string s;
  u32(&s, (uint32_t)entries.size());
  u32(&s, 0);
  for (const auto& e : entries) s += e;
  return s;
}

ml_status parse(const std::string& bytes, ml_hf_files* f, std::string* msg) {
  ml_error err;
  const ml_status s = ml_hf_bundle_parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), f, &err);
  *msg = s == ML_OK ? "" : err.msg;
  return s;
}

}  // namespace

TEST_CASE("bundle: the writer lays out the documented bytes and they parse back", "[bundle]") {
  const std::string tok = "{\"model\":{}}", cfg = "{\"eos_token\":\"</s>\"}", gen = "{}", tmpl = "{{ x }}";
  ml_hf_files f;
  f.tokenizer_json = tok.data(), f.tokenizer_json_len = tok.size();
  f.config_json = cfg.data(), f.config_json_len = cfg.size();
  f.generation_json = gen.data(), f.generation_json_len = gen.size();
  f.chat_template = tmpl.data(), f.chat_template_len = tmpl.size();
  const size_t n = ml_hf_bundle_size(&f);
  std::string out(n, '\0');
  ml_hf_bundle_write(&f, reinterpret_cast<uint8_t*>(out.data()));
  const std::string expect = section({entry("tokenizer.json", tok), entry("tokenizer_config.json", cfg),
                                      entry("generation_config.json", gen), entry("chat_template.jinja", tmpl)});
  REQUIRE(out == expect);
  ml_hf_files back;
  std::string msg;
  REQUIRE(parse(out, &back, &msg) == ML_OK);
  CHECK(std::string(back.tokenizer_json, back.tokenizer_json_len) == tok);
  CHECK(std::string(back.config_json, back.config_json_len) == cfg);
  CHECK(std::string(back.generation_json, back.generation_json_len) == gen);
  CHECK(std::string(back.chat_template, back.chat_template_len) == tmpl);

  // Only tokenizer.json, in any order with others, empty files allowed.
  // (The parsed files point into the section: it must outlive them.)
  const std::string only = section({entry("tokenizer.json", "")});
  REQUIRE(parse(only, &back, &msg) == ML_OK);
  CHECK(back.tokenizer_json_len == 0);
  CHECK(back.config_json == nullptr);
  const std::string reordered = section({entry("chat_template.jinja", "t"), entry("tokenizer.json", "{}")});
  REQUIRE(parse(reordered, &back, &msg) == ML_OK);
  CHECK(std::string(back.chat_template, 1) == "t");
}

TEST_CASE("bundle: damaged sections are refused, naming the problem", "[bundle]") {
  const std::string good = section({entry("tokenizer.json", "{}")});
  struct Case {
    const char* what;
    std::string bytes;
    const char* msg;
  };
  std::string reserved = good;
  reserved[4] = 1;
  std::string entry_reserved = good;
  entry_reserved[12] = 1;
  std::string count0 = good;
  count0[0] = 0;
  std::string count5 = good;
  count5[0] = 5;
  std::string big = section({entry("tokenizer.json", "{}")});
  big[16] = (char)0xFF;  // the size's low byte: runs past the end
  std::string huge = section({entry("tokenizer.json", "{}")});
  huge[23] = (char)0xFF;  // the size's high byte: 2^63 and more
  const std::vector<Case> cases = {
      {"empty", "", "too short"},
      {"truncated head", good.substr(0, 7), "too short"},
      {"reserved", reserved, "reserved"},
      {"no entries", count0, "n_entries 0"},
      {"too many entries", count5, "n_entries 5"},
      {"entry truncated", good.substr(0, 12), "entry 0 is truncated"},
      {"entry reserved", entry_reserved, "entry 0: reserved"},
      {"data past the end", big, "runs past the section"},
      {"size overflows", huge, "runs past the section"},
      {"data truncated", good.substr(0, good.size() - 1), "runs past the section"},
      {"trailing bytes", good + "x", "1 bytes after the last entry"},
      {"unknown name", section({entry("tokenizer.json", "{}"), entry("vocab.txt", "")}), "entry 1 has an unknown name"},
      {"empty name", section({entry("", "")}), "name_len 0"},
      {"duplicate", section({entry("tokenizer.json", "{}"), entry("tokenizer.json", "{}")}), "appears twice"},
      {"no tokenizer.json", section({entry("tokenizer_config.json", "{}")}), "no tokenizer.json"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    ml_hf_files f;
    std::string msg;
    CHECK(parse(c.bytes, &f, &msg) == ML_E_FORMAT);
    CHECK(msg.find(c.msg) != std::string::npos);
  }
}
