// chat_template_driver TEMPLATE_FILE CONTEXT.json: renders the template (model/chat/template.h)
// with the JSON object as its context and prints the rendering exactly (no newline added).
// Exit 0 on success; 2 with the error message on stderr when parsing or rendering fails; 1 on
// usage or I/O errors. A test tool (e2e/hf/templates.test.mjs compares it with @huggingface/jinja).
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "core/bump.h"
#include "core/json.h"
#include "model/chat/template.h"

static bool slurp(const char* path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: chat_template_driver TEMPLATE_FILE CONTEXT.json\n");
    return 1;
  }
  std::string tmpl, ctx;
  if (!slurp(argv[1], &tmpl) || !slurp(argv[2], &ctx)) {
    fprintf(stderr, "chat_template_driver: cannot read %s\n", slurp(argv[1], &tmpl) ? argv[2] : argv[1]);
    return 1;
  }
  ml_error err{};
  ml_bump b;
  ml_json* j = nullptr;
  if (ml_json_parse(ctx.data(), ctx.size(), &b, &j, &err) != ML_OK) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  ml_template* t = nullptr;
  if (ml_template_parse(tmpl.data(), tmpl.size(), &t, &err) != ML_OK) {
    fprintf(stderr, "%s\n", err.msg);
    return 2;
  }
  ml_vec<char> out;
  ml_status s = ml_template_render(t, j, &out, &err);
  ml_template_free(t);
  if (s != ML_OK) {
    fprintf(stderr, "%s\n", err.msg);
    return 2;
  }
  if (out.size() && fwrite(out.data(), 1, out.size(), stdout) != out.size()) return 1;
  return 0;
}
