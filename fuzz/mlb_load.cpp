// Fuzzes the .mlb loader through the model layer: ml_model_load_memory (ml_mlb_parse, the
// supported-feature checks, binding every tensor of the tensor table, the Q8 range check), then
// ml_model_prepare at a small context (RoPE tables, packing when the build has packed kernels,
// the embedded tokenizer) and, for a model that loads, one forward step of token 0 with logits.
// The loader's contract (model/model.h) is that a model it accepts needs no further checks, so
// the forward step must not read out of bounds whatever the file said.
// Input: the file's bytes. Seeds: fuzz/corpus/mlb_load (tiny random models) and, at run time,
// stories260K converted by ml_convert (fuzz/run.py).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "model/exec.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/session.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Loaded in place, as from a mapping: a 64-byte aligned copy (the file format aligns arrays
  // to 64 bytes relative to the start), sized exactly so that ASan sees any read past the end.
  uint8_t* buf = static_cast<uint8_t*>(std::aligned_alloc(64, (size + 63) / 64 * 64 + 64));
  std::memcpy(buf, data, size);
  ml_model m;
  ml_error err{};
  if (ml_model_load_memory(&m, buf, size, &err) == ML_OK) {
    ml_model_options o;
    o.ctx = std::min(m.cfg.max_seq, 8);
    o.pack = size % 2 == 0;  // both layouts: packed (when the build packs) and row-major
    if (ml_model_prepare(&m, &o, &err) == ML_OK) {
      ml_exec e;
      ml_exec_opts eo;
      eo.max_batch = 1;
      ml_session s;
      ml_session_opts so;
      so.ctx = 1;
      if (ml_exec_init(&e, &m, &eo, &err) == ML_OK) {
        if (ml_session_init(&s, &m, &so, &err) == ML_OK) {
          const int32_t tok = 0;
          ml_session* sp = &s;
          const int pos = 0;
          const uint8_t want = 1;
          ml_batch b;
          b.n = 1, b.tokens = &tok, b.sessions = &sp, b.pos = &pos, b.logits = &want;
          ml_forward(&m, &e, &b);
          ml_session_release(&s);
        }
        ml_exec_release(&e);
      }
    }
    ml_model_free(&m);
  }
  std::free(buf);
  return 0;
}
