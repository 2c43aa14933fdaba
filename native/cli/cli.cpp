#include "cli/cli.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ml::cli {

int exit_code(ml_status s) {
  switch (s) {
    case ML_OK: return EXIT_OK;
    case ML_E_ARG:
    case ML_E_FORMAT:
    case ML_E_SHAPE: return EXIT_USAGE;
    case ML_E_ISA: return EXIT_ISA;
    case ML_E_IO:
    case ML_E_NOMEM: return EXIT_FAILURE_;
  }
  return EXIT_FAILURE_;
}

int report(const char* prog, const ml_error& err) {
  std::fprintf(stderr, "%s: %s\n", prog, err.msg[0] ? err.msg : ml_status_name(err.status));
  return exit_code(err.status);
}

int usage_error(const char* prog, const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", prog, message.c_str());
  return EXIT_USAGE;
}

namespace {

// Strict values for every named option: none may be empty (CLI11 silently keeps the default for
// --temp '' or --ctx ''), and integers are plain decimal within their type (CLI11 also takes
// " 5", "0x10", and turns "-1" or 2^64 into 2^64-1 for an unsigned option).
std::string check_decimal(const std::string& v, bool is_unsigned) {
  size_t i = 0;
  if (!is_unsigned && !v.empty() && v[0] == '-') i = 1;
  if (i == v.size()) return "'" + v + "' is not a decimal integer";
  for (size_t j = i; j < v.size(); ++j)
    if (v[j] < '0' || v[j] > '9')
      return "'" + v + "' is not a " + std::string(is_unsigned ? "non-negative " : "") + "decimal integer";
  errno = 0;
  if (is_unsigned) (void)std::strtoull(v.c_str(), nullptr, 10);
  else (void)std::strtoll(v.c_str(), nullptr, 10);
  if (errno == ERANGE) return "'" + v + "' is out of range";
  return std::string();
}

std::vector<const CLI::Option*>& may_be_empty() {
  static std::vector<const CLI::Option*> v;
  return v;
}

void make_strict(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (!opt->nonpositional() || opt->get_type_size_max() == 0) continue;  // positionals, flags
    const std::string type = opt->get_type_name();
    bool empty_ok = false;
    for (const CLI::Option* e : may_be_empty()) empty_ok = empty_ok || e == opt;
    if (empty_ok && type != "UINT" && type != "INT") continue;
    opt->check(CLI::Validator(
        [type](std::string& v) -> std::string {
          if (v.empty()) return "the value is empty";
          if (type == "UINT" || type == "INT") return check_decimal(v, type == "UINT");
          return std::string();
        },
        "", "strict"));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) make_strict(*sub);
}

}  // namespace

CLI::Option* allow_empty(CLI::Option* opt) {
  may_be_empty().push_back(opt);
  return opt;
}

int parse(CLI::App& app, const char* prog, int argc, char** argv) {
  make_strict(app);
  // CLI11 takes "/x" for an option /x on Windows by default; "/" starts a path here (C:/m.mlb
  // and /models/m.mlb alike), and options are "-x" or "--x" on every system.
  app.allow_windows_style_options(false);
  for (CLI::App* sub : app.get_subcommands({})) sub->allow_windows_style_options(false);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return EXIT_OK;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return EXIT_OK;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s\nRun with --help for usage.\n", prog, e.what());
    return EXIT_USAGE;
  }
  return -1;
}

bool parse_ids(const std::string& text, std::vector<int32_t>* ids, std::string* bad) {
  ids->clear();
  size_t i = 0;
  const auto is_sep = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ','; };
  while (i < text.size()) {
    while (i < text.size() && is_sep(text[i])) ++i;
    if (i == text.size()) break;
    size_t j = i;
    while (j < text.size() && !is_sep(text[j])) ++j;
    const std::string item = text.substr(i, j - i);
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (errno != 0 || end != item.c_str() + item.size() || v < INT32_MIN || v > INT32_MAX) {
      *bad = item;
      return false;
    }
    ids->push_back(static_cast<int32_t>(v));
    i = j;
  }
  return true;
}

bool read_file(const std::string& path, std::string* out) {
  FILE* f = path == "-" ? stdin : std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out->append(buf, n);
  const bool ok = !std::ferror(f);
  if (f != stdin) std::fclose(f);
  return ok;
}

std::string json_string(const char* s, size_t n) {
  std::string out = "\"";
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = (unsigned char)s[i];
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7F) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += (char)c;
        }
    }
  }
  return out + "\"";
}

CLI::Option* add_kv_option(CLI::App& app, std::string* kv, const char* help_prefix) {
  return app.add_option("--kv", *kv, std::string(help_prefix) + "KV cache type: f32 (default), q8 or f16")
      ->check(CLI::IsMember({"f32", "q8", "f16"}));
}

ml_kv_type kv_type(const std::string& name) {
  return name == "q8" ? ML_KV_Q8 : name == "f16" ? ML_KV_F16 : ML_KV_F32;
}

}  // namespace ml::cli
