// Chat templates: the Jinja subset Hugging Face chat templates use, rendered exactly as
// transformers' apply_chat_template(tokenize=False) renders them (transformers uses jinja2 with
// trim_blocks=True and lstrip_blocks=True; @huggingface/jinja is our test oracle).
//
// Contract:
// - ml_template_parse compiles the template text; a syntax error, or a construct the renderer
//   lacks, fails with ML_E_FORMAT naming the construct and the line ("template line 3: filter
//   'foo' is not supported").
// - ml_template_render renders with the given context, a JSON object whose members are the
//   template's variables (messages, add_generation_prompt, bos_token, eos_token, enable_thinking,
//   tools, ...). raise_exception(msg) fails with ML_E_ARG and the message. Rendering is bounded:
//   loop iterations, call/recursion depth and output size have named limits (ML_E_ARG past them).
// - Undefined variables behave as in jinja2's default Undefined (falsy, empty when printed,
//   `is defined` false); attribute access on them fails only where jinja2's would.
// - strftime_now(fmt) formats the current local time unless the context defines the member
//   "strftime_now_fixed" (a string, returned as is: tests use it for a fixed date).
// - Nothing aborts, throws or exits; allocation failure is ML_E_NOMEM.
#pragma once
#include <cstddef>

#include "core/json.h"
#include "core/status.h"
#include "core/vec.h"

struct ml_template;

ml_status ml_template_parse(const char* text, size_t len, ml_template** out, ml_error* err);
void ml_template_free(ml_template* t);

// Appends the rendering to *out. context must be a JSON object (ML_E_ARG otherwise).
ml_status ml_template_render(const ml_template* t, const ml_json* context, ml_vec<char>* out, ml_error* err);
