// Glue shared by the command-line apps: exit codes, error printing, CLI11 parsing with the
// project's exit-code rules, and strict parsing of token-id lists.
//
// Exit codes (docs/user-guide.md): 0 ok; 2 bad usage or bad input (an option, a value, a
// malformed or unsupported model file); 3 the CPU lacks the build's ISA (main_guard.cpp);
// 1 anything else (I/O failure, out of memory).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "krafla.h"

namespace ml::cli {

inline constexpr int EXIT_OK = 0, EXIT_FAILURE_ = 1, EXIT_USAGE = 2, EXIT_ISA = 3;

// The exit code for a failed status.
int exit_code(ml_status s);

// Prints "prog: message" to stderr and returns exit_code(err.status).
int report(const char* prog, const ml_error& err);

// Prints "prog: message" to stderr and returns EXIT_USAGE.
int usage_error(const char* prog, const std::string& message);

// Parses argv. Returns -1 when the program should continue, else the exit code to return now
// (0 after --help, EXIT_USAGE after a parse error, whose message names the option). Every named
// option's value must be non-empty, and an integer option's plain decimal within its type.
int parse(CLI::App& app, const char* prog, int argc, char** argv);

// Marks a string option whose empty value means something (ml_run -p '': BOS alone).
CLI::Option* allow_empty(CLI::Option* opt);

// --kv NAME: the KV cache type (f32, the default, q8 or f16), its value checked by CLI11; help
// starts with `help_prefix` (ml_bench: "--model: ").
CLI::Option* add_kv_option(CLI::App& app, std::string* kv, const char* help_prefix = "");

// The ml_kv_type of a name add_kv_option accepted.
ml_kv_type kv_type(const std::string& name);

// Parses "1 2 3" (spaces, tabs, newlines or commas between decimal ids) strictly: every item must
// be a whole int32. On failure returns false and sets *bad to the offending item.
bool parse_ids(const std::string& text, std::vector<int32_t>* ids, std::string* bad);

// Appends the whole of path ("-": stdin) to *out; false when it cannot be opened or read.
bool read_file(const std::string& path, std::string* out);

// The engine objects of one run (model, executor, sessions), freed sessions first on every exit
// path.
struct handles {
  ml_model* model = nullptr;
  ml_exec* exec = nullptr;
  std::vector<ml_session*> sessions;
  handles() = default;
  handles(const handles&) = delete;
  handles& operator=(const handles&) = delete;
  ~handles() {
    for (ml_session* s : sessions) ml_session_free(s);
    ml_exec_free(exec);
    ml_model_close(model);
  }
};

// s[0, n) as a JSON string literal: quotes, backslashes and control characters escaped, other
// bytes as they are.
std::string json_string(const char* s, size_t n);

}  // namespace ml::cli
