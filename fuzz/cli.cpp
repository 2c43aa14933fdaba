// Fuzzes one program's command line: its ml_main (native/<app>/, compiled into this harness with
// ml_main renamed to ml_app_main; fuzz/CMakeLists.txt builds one harness per program) called with
// an argv built from the input, inside a private temporary folder that is the working directory.
//
// Input: the arguments, one per line ('\n' separates them; at most 32). argv[0] is the program's
// name. The folder holds fixtures the seeds name by relative path: m.mlb (stories260K, Q8, with
// its tokenizer), r.mlb (a tiny random model without one), tok.bin (tok512.bin) and ck.bin (the
// stories260K checkpoint); without shared/ only r.mlb.
//
// ml_perplexity's TEXT is one of the fixtures (or "-", stdin: /dev/null); its harness always gets
// --chunks=2 first (fuzz/CMakeLists.txt).
//
// What the programs may write, and how it stays in the folder: ml_run --dump-logits FILE and
// --pack-cache (MODEL.pk<G> next to the model), ml_convert -o FILE (through FILE.tmp.<pid>).
// An argument holding '/' is refused (the input is skipped), so every path is relative to the
// folder; after each run every file but the fixtures is deleted and a fixture that was changed
// (ml_convert -o m.mlb) is written back. stdin is /dev/null (ml_tok reads it when TEXT is
// absent) and stdout too; run.py closes stderr (-close_fd_mask=2), keeping the sanitizers' reports.
//
// Work: options the programs honour with work in proportion (a model's width, tokens to
// generate, repetitions, threads) are capped: an input with a number above ML_FUZZ_NUM_CAP (128;
// 16 for ml_bench, which multiplies several) and below 2^31 is skipped. Numbers from 2^31 up are
// kept, since the programs must refuse them. ml_bench always gets --no-kernels first (the kernel
// table times fixed shapes: it parses nothing).
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "krafla.h"

int ml_app_main(int argc, char** argv);

namespace {

struct fixture {
  const char* name;
  std::string bytes;
  struct stat st;
};
std::vector<fixture> g_fixtures;
std::vector<const char*> g_keep;

#ifndef ML_FUZZ_NUM_CAP
#define ML_FUZZ_NUM_CAP 128
#endif

void add_fixture(const char* name, std::string bytes) {
  if (!fz::write_file(fz::tmp_path(name), bytes.data(), bytes.size())) std::exit(1);
  fixture f{name, std::move(bytes), {}};
  stat(fz::tmp_path(name).c_str(), &f.st);
  g_fixtures.push_back(std::move(f));
}

bool copy_fixture(const char* name, const std::string& from) {
  std::string b;
  if (!fz::read_file(from, &b)) return false;
  add_fixture(name, std::move(b));
  return true;
}

bool too_much_work(const char* a) {
  const char* p = a;
  if (*p == '+' || *p == '-') ++p;
  if (!(std::isdigit((unsigned char)*p) || *p == '.')) return false;
  if (p[0] == '0' && std::strchr("bBoO", p[1]) && p[1]) return true;  // CLI11's 0b / 0o: not worth decoding
  const double v = std::fabs(std::strtod(a, nullptr));            // decimal, exponent or 0x hex
  return v > ML_FUZZ_NUM_CAP && v < 2147483648.0;
}

void restore_fixtures() {
  fz::clean_dir(fz::tmp_dir(), g_keep.data());
  for (fixture& f : g_fixtures) {
    struct stat st;
    const std::string p = fz::tmp_path(f.name);
    if (stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == f.st.st_size &&
        st.st_mtim.tv_sec == f.st.st_mtim.tv_sec && st.st_mtim.tv_nsec == f.st.st_mtim.tv_nsec)
      continue;
    fz::clean_dir(p, nullptr);  // a folder made in its place
    rmdir(p.c_str());
    if (!fz::write_file(p, f.bytes.data(), f.bytes.size())) std::abort();
    stat(p.c_str(), &f.st);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fz::remove_tmp_at_exit();
  const std::string shared = fz::shared_dir();
  ml_error err{};
  ml_convert_random_params r = ml_convert_random_defaults();
  r.dim = 32, r.hidden = 64, r.layers = 1, r.heads = 2, r.kv_heads = 1, r.vocab = 16, r.max_seq = 16;
  const std::string rpath = fz::tmp_path("r.mlb");
  r.out = rpath.c_str();
  if (ml_convert_random(&r, &err) != ML_OK || !copy_fixture("r.mlb", rpath)) {
    std::fprintf(stderr, "cli fuzz: r.mlb: %s\n", err.msg);
    std::exit(1);
  }
  if (copy_fixture("tok.bin", shared + "/models/tok512.bin") &&
      copy_fixture("ck.bin", shared + "/models/stories260K.bin")) {
    ml_convert_llama2c_params c = ml_convert_llama2c_defaults();
    const std::string ck = fz::tmp_path("ck.bin"), tok = fz::tmp_path("tok.bin"), m = fz::tmp_path("m.mlb");
    c.checkpoint = ck.c_str(), c.tokenizer = tok.c_str(), c.out = m.c_str();
    if (ml_convert_llama2c(&c, &err) != ML_OK || !copy_fixture("m.mlb", m)) {
      std::fprintf(stderr, "cli fuzz: m.mlb: %s\n", err.msg);
      std::exit(1);
    }
  } else {
    std::fprintf(stderr, "cli fuzz: %s/models lacks tok512.bin or stories260K.bin: fixtures r.mlb only\n",
                 shared.c_str());
  }
  for (const fixture& f : g_fixtures) g_keep.push_back(f.name);
  g_keep.push_back(nullptr);
  if (chdir(fz::tmp_dir().c_str()) != 0) std::exit(1);
  const int null = open("/dev/null", O_RDWR);
  if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0) std::exit(1);
  close(null);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args{ML_FUZZ_APP};
#ifdef ML_FUZZ_FIRST_ARG
  args.push_back(ML_FUZZ_FIRST_ARG);
#endif
  std::string cur;
  for (size_t i = 0; i <= size; ++i) {
    if (i == size || data[i] == '\n') {
      if (i == size && cur.empty() && size > 0 && data[size - 1] == '\n') break;
      args.push_back(cur);
      cur.clear();
      if (args.size() > 33) return -1;
    } else {
      if (data[i] == '/' || data[i] == 0) return -1;  // no paths outside the folder; no truncated arguments
      cur.push_back((char)data[i]);
    }
  }
  if (size == 0) args.pop_back();  // no input: the program alone
  for (const std::string& a : args)
    if (too_much_work(a.c_str())) return -1;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = ml_app_main((int)args.size(), argv.data());
  if (rc < 0 || rc > 3) {
    std::fprintf(stderr, "%s: exit code %d is none of 0..3 (native/cli/cli.h)\n", ML_FUZZ_APP, rc);
    std::abort();
  }
  std::fflush(stdout);
  restore_fixtures();
  return 0;
}
