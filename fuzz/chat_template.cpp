// Fuzzes the chat-template renderer (model/chat/template.h): the input is a template's text; one
// that parses is rendered over a fixed conversation (system, user, assistant, user; with
// add_generation_prompt), so the fuzzer explores the lexer, the parser, the evaluator, filters
// and the limits (loops, recursion, output size). Any status is fine; crashes, hangs, leaks and
// undefined behaviour are not. Seeds: the real templates (tests/data/chat_templates, shared/).
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/bump.h"
#include "core/json.h"
#include "core/vec.h"
#include "model/chat/template.h"

namespace {

const char kContext[] =
    "{\"messages\":[{\"role\":\"system\",\"content\":\"You are terse.\"},{\"role\":\"user\",\"content\":\"Hi \\u00e9\"},"
    "{\"role\":\"assistant\",\"content\":\"Hello!\",\"reasoning_content\":\"think\"},{\"role\":\"user\",\"content\":\"\"}],"
    "\"add_generation_prompt\":true,\"bos_token\":\"<s>\",\"eos_token\":\"</s>\",\"enable_thinking\":false,"
    "\"strftime_now_fixed\":\"26 Jul 2024\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{}}}]}";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ml_bump ctx_mem;
  static ml_json* ctx = [] {
    ml_json* c = nullptr;
    ml_error err{};
    if (ml_json_parse(kContext, sizeof kContext - 1, &ctx_mem, &c, &err) != ML_OK) std::abort();
    return c;
  }();
  char* text = static_cast<char*>(std::malloc(size ? size : 1));
  std::memcpy(text, data, size);
  ml_template* t = nullptr;
  ml_error err{};
  if (ml_template_parse(text, size, &t, &err) == ML_OK) {
    ml_vec<char> out;
    ml_template_render(t, ctx, &out, &err);
    ml_template_free(t);
  }
  std::free(text);
  return 0;
}
