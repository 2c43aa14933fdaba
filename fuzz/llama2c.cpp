// Fuzzes the llama2.c checkpoint converter (convert/convert.h, cv_llama2c), which reads paths:
// the input is split into a checkpoint and a tokenizer.bin, each written to a file in a private
// temporary folder, and converted to an .mlb there (removed after each run).
// Input: byte 0 picks the output (bit 0: Q4 instead of Q8, bit 1: f16 scales); bytes 1..4 are the
// checkpoint's length n (little-endian, clamped to what follows); then n checkpoint bytes; the
// rest is the tokenizer. Seeds: fuzz/corpus/llama2c (tiny legacy and version-1 checkpoints with
// a matching tokenizer, made by fuzz/make_seeds.py).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include <unistd.h>

#include "convert/convert.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fz::remove_tmp_at_exit();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  const uint8_t mode = data[0];
  uint32_t n = (uint32_t)data[1] | (uint32_t)data[2] << 8 | (uint32_t)data[3] << 16 | (uint32_t)data[4] << 24;
  data += 5, size -= 5;
  if (n > size) n = (uint32_t)size;
  static const std::string ckpt = fz::tmp_path("model.bin"), tok = fz::tmp_path("tokenizer.bin"),
                           out = fz::tmp_path("out.mlb");
  if (!fz::write_file(ckpt, data, n) || !fz::write_file(tok, data + n, size - n)) std::abort();
  cv_llama2c_opts o = cv_llama2c_defaults();
  o.checkpoint = ckpt.c_str();
  o.tokenizer = tok.c_str();
  o.out = out.c_str();
  o.wtype = mode & 1 ? ML_DT_Q4 : ML_DT_Q8;
  o.scale_type = mode & 2 ? ML_SCALE_F16 : ML_SCALE_F32;
  ml_error err{};
  cv_llama2c(&o, &err);
  fz::clean_dir(fz::tmp_dir(), nullptr);
  return 0;
}
