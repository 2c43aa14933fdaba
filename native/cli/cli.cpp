#include "cli/cli.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

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

int parse(CLI::App& app, const char* prog, int argc, char** argv) {
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

}  // namespace ml::cli
