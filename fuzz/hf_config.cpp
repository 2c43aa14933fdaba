// Fuzzes the Hugging Face config reader (convert/hf_config.h): cv_hf_config_parse over the input,
// split at its first NUL byte into config.json and generation_config.json (absent without a NUL).
// Promises checked: a refusal is ML_E_FORMAT or ML_E_SHAPE (ML_E_NOMEM only for an allocation)
// with a message naming config.json or generation_config.json; an accepted header passes
// ml_mlb_check_header, has HF's rotate-half RoPE, an FFN width padded to the next multiple of 32,
// and the fields of its architecture only (no linear-attention fields outside Qwen3.5, no Gemma
// fields outside Gemma 3). Seeds: fuzz/corpus/hf_config and the real configs in shared/data/hf
// (run.py copies them).
#include "convert/hf_config.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* text = reinterpret_cast<const char*>(data);
  const void* nul = std::memchr(data, 0, size);
  const size_t n = nul ? (size_t)(static_cast<const uint8_t*>(nul) - data) : size;
  const char* gen = nul ? text + n + 1 : nullptr;
  const size_t gen_len = nul ? size - n - 1 : 0;
  ml_mlb_header h;
  ml_error err{};
  const ml_status s = cv_hf_config_parse(text, n, gen, gen_len, "config.json", &h, &err);
  if (s != ML_OK) {
    check(s == ML_E_FORMAT || s == ML_E_SHAPE || s == ML_E_NOMEM);
    check(s == ML_E_NOMEM || std::strncmp(err.msg, "config.json: ", 13) == 0 ||
          std::strncmp(err.msg, "generation_config.json: ", 24) == 0);
    return 0;
  }
  check(ml_mlb_check_header(&h, &err) == ML_OK);
  check(h.rope_type == ML_ROPE_HALF);
  check(h.hidden_dim % 32 == 0 && h.hidden_dim >= h.hidden_dim_orig && h.hidden_dim - h.hidden_dim_orig < 32);
  if (h.arch != ML_ARCH_QWEN35)
    check(h.linear_period == 0 && h.linear_k_heads == 0 && h.n_rot == 0);
  else
    check(h.linear_period > 0 && h.linear_v_heads % h.linear_k_heads == 0 && h.n_rot > 0);
  if (h.arch != ML_ARCH_GEMMA3) check(h.embed_scale == 1.0f && h.activation == ML_ACT_SILU && h.attn_scale == 0.0f);
  if (h.arch != ML_ARCH_QWEN2) check((h.flags & ML_FLAG_QKV_BIAS) == 0);
  return 0;
}
