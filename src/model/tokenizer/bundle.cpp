#include "model/tokenizer/bundle.h"

#include <cstring>

namespace {

constexpr uint32_t MAX_ENTRIES = 4, MAX_NAME = 64;
constexpr size_t ENTRY_HEAD = 16;

uint32_t rd32(const uint8_t* p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
uint64_t rd64(const uint8_t* p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }
void wr32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = (uint8_t)(v >> (8 * i));
}
void wr64(uint8_t* p, uint64_t v) {
  wr32(p, (uint32_t)v);
  wr32(p + 4, (uint32_t)(v >> 32));
}

struct slot {
  const char* name;
  const char* ml_hf_files::*data;
  size_t ml_hf_files::*len;
};
constexpr slot SLOTS[] = {
    {"tokenizer.json", &ml_hf_files::tokenizer_json, &ml_hf_files::tokenizer_json_len},
    {"tokenizer_config.json", &ml_hf_files::config_json, &ml_hf_files::config_json_len},
    {"generation_config.json", &ml_hf_files::generation_json, &ml_hf_files::generation_json_len},
    {"chat_template.jinja", &ml_hf_files::chat_template, &ml_hf_files::chat_template_len},
};

}  // namespace

ml_status ml_hf_bundle_parse(const uint8_t* p, size_t n, ml_hf_files* f, ml_error* err) {
  *f = ml_hf_files{};
  if (n < 8) return ml_fail(err, ML_E_FORMAT, "tokenizer section: %zu bytes, too short for its head", n);
  const uint32_t count = rd32(p);
  if (count < 1 || count > MAX_ENTRIES)
    return ml_fail(err, ML_E_FORMAT, "tokenizer section: n_entries %u is outside 1..%u", count, MAX_ENTRIES);
  if (rd32(p + 4) != 0) return ml_fail(err, ML_E_FORMAT, "tokenizer section: reserved field is not 0");
  size_t at = 8;
  for (uint32_t i = 0; i < count; ++i) {
    if (n - at < ENTRY_HEAD) return ml_fail(err, ML_E_FORMAT, "tokenizer section: entry %u is truncated", i);
    const uint32_t name_len = rd32(p + at);
    const uint64_t size = rd64(p + at + 8);
    if (rd32(p + at + 4) != 0) return ml_fail(err, ML_E_FORMAT, "tokenizer section: entry %u: reserved field is not 0", i);
    if (name_len < 1 || name_len > MAX_NAME)
      return ml_fail(err, ML_E_FORMAT, "tokenizer section: entry %u: name_len %u is outside 1..%u", i, name_len, MAX_NAME);
    at += ENTRY_HEAD;
    if (n - at < name_len || n - at - name_len < size)
      return ml_fail(err, ML_E_FORMAT, "tokenizer section: entry %u (%u-byte name, %llu bytes) runs past the section", i,
                     name_len, (unsigned long long)size);
    const char* name = reinterpret_cast<const char*>(p + at);
    const slot* s = nullptr;
    for (const slot& c : SLOTS)
      if (std::strlen(c.name) == name_len && std::memcmp(c.name, name, name_len) == 0) s = &c;
    if (!s) return ml_fail(err, ML_E_FORMAT, "tokenizer section: entry %u has an unknown name", i);
    if (f->*(s->data)) return ml_fail(err, ML_E_FORMAT, "tokenizer section: entry %s appears twice", s->name);
    f->*(s->data) = reinterpret_cast<const char*>(p + at + name_len);
    f->*(s->len) = (size_t)size;
    at += name_len + (size_t)size;
  }
  if (at != n) return ml_fail(err, ML_E_FORMAT, "tokenizer section: %zu bytes after the last entry", n - at);
  if (!f->tokenizer_json) return ml_fail(err, ML_E_FORMAT, "tokenizer section: no tokenizer.json entry");
  return ML_OK;
}

size_t ml_hf_bundle_size(const ml_hf_files* f) {
  size_t total = 8;
  for (const slot& s : SLOTS) {
    if (!(f->*(s.data))) continue;
    const size_t add = ENTRY_HEAD + std::strlen(s.name);
    if (total > (size_t)-1 - add || total + add > (size_t)-1 - f->*(s.len)) return 0;
    total += add + f->*(s.len);
  }
  return total;
}

void ml_hf_bundle_write(const ml_hf_files* f, uint8_t* out) {
  uint32_t count = 0;
  size_t at = 8;
  for (const slot& s : SLOTS) {
    if (!(f->*(s.data))) continue;
    const size_t name_len = std::strlen(s.name), len = f->*(s.len);
    wr32(out + at, (uint32_t)name_len);
    wr32(out + at + 4, 0);
    wr64(out + at + 8, len);
    std::memcpy(out + at + ENTRY_HEAD, s.name, name_len);
    if (len) std::memcpy(out + at + ENTRY_HEAD + name_len, f->*(s.data), len);
    at += ENTRY_HEAD + name_len + len;
    ++count;
  }
  wr32(out, count);
  wr32(out + 4, 0);
}
