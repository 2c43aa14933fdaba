// Fuzzes ml_mlb_parse alone on header-sized inputs (the 256-byte header and a few directory
// entries: run.py gives it -max_len=1024): the validator that web/src/header.js's checks stand in
// for in the browser, before a model is downloaded. Besides memory safety it checks the parser's
// promise (model/format.h) that what it accepts lies inside the buffer.
// With ML_FUZZ_HEADER_DUMP set, each input also prints one line "accept|reject <file_size> <dim>
// <n_layers> <vocab> <input bytes> <FNV-1a 64 of the input, hex>" to stdout for fuzz/header_js.mjs,
// which compares header.js's verdicts: the last two fields name the input, because libFuzzer may
// run an input more than once (its leak check re-runs the first input, whose printf allocates
// stdout's buffer), so the lines cannot be paired with the files by their order.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "model/format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint8_t* buf = static_cast<uint8_t*>(std::malloc(size ? size : 1));
  std::memcpy(buf, data, size);
  ml_mlb m;
  ml_error err{};
  const ml_status s = ml_mlb_parse(&m, buf, size, &err);
  if (s == ML_OK) {
    if (m.h.file_size > size) std::abort();  // accepted a file that claims more bytes than it has
    for (uint32_t i = 0; i < m.n_tensors; ++i) {
      const ml_mlb_tensor t = ml_mlb_tensor_at(&m, i);
      if (t.data_offset > size || t.data_size > size - t.data_offset) std::abort();
      if (t.scale_size && (t.scale_offset > size || t.scale_size > size - t.scale_offset)) std::abort();
      if (std::memchr(t.name, 0, sizeof t.name) == nullptr) std::abort();  // names are NUL-terminated
    }
    if (m.tokenizer && (m.tokenizer < buf || m.tokenizer + m.tokenizer_size > buf + size)) std::abort();
  }
  if (std::getenv("ML_FUZZ_HEADER_DUMP")) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 0x100000001b3ull;
    const bool ok = s == ML_OK;
    std::printf("%s %llu %u %u %u %zu %016llx\n", ok ? "accept" : "reject", ok ? (unsigned long long)m.h.file_size : 0ull,
                ok ? m.h.dim : 0u, ok ? m.h.n_layers : 0u, ok ? m.h.vocab_size : 0u, size, (unsigned long long)h);
    std::fflush(stdout);
  }
  std::free(buf);
  return 0;
}
