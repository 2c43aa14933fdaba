// Fuzzes the GGUF reader and importer (convert/gguf.h, cv_gguf) and the tensor decoders.
// Input: byte 0 picks what runs -- mode % 4 == 0: gguf_parse of the rest, then every typed getter
// and tensor lookup on what it accepted; 1: the same, then the rest written to a file in a
// private temporary folder and converted to an .mlb there (removed after each run), Q8 or Q4
// (bit 2); 2: cv_gguf_dequant of the rest's whole blocks as tensor type byte 1 (the K-quant and
// 32-value decoders); 3: as 1 with the default wtype (from the file).
// Seeds: fuzz/corpus/gguf (tiny llama/qwen2/gemma3 files with SPM and BPE vocabularies, F32,
// F16, Q8_0, Q4_0 and K-quant tensors, made by fuzz/make_gguf_seeds.py).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "convert/gguf.h"
#include "convert/gguf_internal.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fz::remove_tmp_at_exit();
  return 0;
}

namespace {

void poke(const gguf_file& g) {
  ml_error err{};
  uint32_t u = 0;
  float f = 0;
  gguf_str s{nullptr, 0};
  const gguf_kv* a = nullptr;
  for (uint64_t i = 0; i < g.n_kv; ++i) {
    const std::string key(g.kv[i].key, g.kv[i].key_len);
    gguf_get_u32(&g, key.c_str(), true, &u, &err);
    gguf_get_f32(&g, key.c_str(), true, &f, &err);
    gguf_get_str(&g, key.c_str(), true, &s, &err);
    if (gguf_get_array(&g, key.c_str(), GGUF_V_STRING, true, &a, &err) == ML_OK) {
      cv_buf b;
      gguf_arr_strings(&g, a, &b, &err);
    }
    if (gguf_get_array(&g, key.c_str(), GGUF_V_F32, true, &a, &err) == ML_OK && a->n) (void)gguf_arr_f32(a, a->n - 1);
  }
  for (uint64_t i = 0; i < g.n_tensors; ++i) {
    const gguf_tensor* t = gguf_find_tensor(&g, g.tensors[i].name);
    if (t != &g.tensors[i]) std::abort();  // names are unique after a successful parse
    volatile uint8_t sink = t->size ? t->data[t->size - 1] : 0;
    (void)sink;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t mode = data[0];
  if (mode % 4 == 2) {
    const gguf_block* b = gguf_block_of(data[1]);
    if (!b) return 0;
    const size_t nb = (size - 2) / b->bytes;
    std::vector<float> out((size_t)nb * b->values + 1);
    cv_gguf_dequant(b->type, data + 2, (uint64_t)nb * b->values, out.data());
    return 0;
  }
  // A copy of exactly the input, so reads past its end are caught.
  std::vector<uint8_t> bytes(data + 1, data + size);
  gguf_file g;
  ml_error err{};
  if (gguf_parse(&g, bytes.data(), bytes.size(), "fuzz.gguf", &err) != ML_OK) return 0;
  poke(g);
  if (mode % 4 == 0) return 0;
  static const std::string in = fz::tmp_path("in.gguf"), out = fz::tmp_path("out.mlb");
  if (!fz::write_file(in, bytes.data(), bytes.size())) std::abort();
  cv_gguf_opts o = cv_gguf_defaults();
  o.path = in.c_str();
  o.out = out.c_str();
  o.wtype = mode % 4 == 3 ? 0 : (mode & 4 ? ML_DT_Q4 : ML_DT_Q8);
  cv_gguf(&o, &err);
  fz::clean_dir(fz::tmp_dir(), nullptr);
  return 0;
}
