// core/out_file.h and core/file.h on every OS: the cases that need no POSIX-only call, so that they
// run in the Windows build too (under wine: tests/CMakeLists.txt adds this file to win_scalar's
// ml_tests) as well as in the Linux ones. test_out_file.cpp has the POSIX-only cases (modes, FIFOs,
// devices, symbolic links, RLIMIT_FSIZE, signals). Paths given to krafla are UTF-8 on every OS.
#include <fcntl.h>
#ifdef _WIN32
#include <io.h>
#else
#include <unistd.h>
#endif

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/file.h"
#include "core/out_file.h"
#include "out_file_test_util.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;

using namespace ml_test_files;

#ifdef _WIN32
int open_read_only(const fs::path& p) { return ::_wopen(p.c_str(), _O_RDONLY | _O_BINARY); }
int dup_onto(int from, int to) { return ::_dup2(from, to) == 0 ? to : -1; }  // _dup2 gives 0
int close_fd(int fd) { return ::_close(fd); }
#else
int open_read_only(const fs::path& p) { return ::open(p.c_str(), O_RDONLY | O_CLOEXEC); }
int dup_onto(int from, int to) { return ::dup2(from, to); }
int close_fd(int fd) { return ::close(fd); }
#endif

// A target holding "old" and an output open over it: its temporary file is the folder's second entry.
struct open_over_old {
  ml_test_dir d;
  ml_error err;
  fs::path a = d.p / "a.bin";
  ml_out_file o;
  open_over_old() {
    ml_test_write(a, "old");
    REQUIRE(ml_out_open(&o, u8(a).c_str(), nullptr, 0, &err) == ML_OK);
    CHECK(d.count() == 2);
  }
  ~open_over_old() { ml_out_discard(&o); }
};

}  // namespace

TEST_CASE("an output creates a new file or replaces a regular one, leaving no temporary file", "[out_file]") {
  ml_test_dir d;
  ml_error err;
  const fs::path a = d.p / "a.bin";
  REQUIRE(write_file(a, "first", &err) == ML_OK);
  CHECK(ml_test_read<std::string>(a) == "first");
  const std::string big(3 << 20, 'x');  // larger than the write buffer
  REQUIRE(write_file(a, big, &err) == ML_OK);
  CHECK(ml_test_read<std::string>(a) == big);
  CHECK(d.count() == 1);
}

TEST_CASE("a discarded output leaves the target as it was and no temporary file", "[out_file]") {
  open_over_old t;
  CHECK(fs::exists(fs::path(std::u8string(t.o.tmp, t.o.tmp + std::strlen(t.o.tmp)))));
  CHECK(ml_out_write(&t.o, "new", 3, &t.err) == ML_OK);
  ml_out_discard(&t.o);
  ml_out_discard(&t.o);  // twice is harmless
  CHECK(ml_test_read<std::string>(t.a) == "old");
  CHECK(t.d.count() == 1);
}

TEST_CASE("an output that is a directory is refused before anything is created", "[out_file]") {
  ml_test_dir d;
  ml_error err;
  const fs::path p = d.p / "dir";
  fs::create_directory(p);
  CHECK(write_file(p, "x", &err) == ML_E_ARG);
  CHECK(contains(err.msg, u8(p)));
  CHECK(contains(err.msg, "is a directory; an output must be a regular file or a new path"));
  CHECK(fs::is_directory(p));
  CHECK(fs::is_empty(p));
  CHECK(d.count() == 1);
}

TEST_CASE("an output in a folder that does not exist fails naming it, creating nothing", "[out_file]") {
  ml_test_dir d;
  ml_error err;
  const fs::path p = d.p / "missing" / "out.bin";
  CHECK(write_file(p, "x", &err) == ML_E_IO);
  CHECK(contains(err.msg, "cannot create a temporary file next to " + u8(p) + ": "));
  CHECK(d.count() == 0);
}

TEST_CASE("an output that is the same file as an input is refused, naming both", "[out_file]") {
  ml_test_dir d;
  ml_error err;
  const fs::path in = d.p / "in.bin", alias = d.p / "alias.bin";
  ml_test_write(in, "input");
  fs::create_hard_link(in, alias);
  SECTION("an input named by the caller, under another name") {
    CHECK(write_file(alias, "x", &err, u8(in).c_str()) == ML_E_ARG);
    CHECK(contains(err.msg, u8(alias) + " is the same file as the input " + u8(in) + "; refusing to overwrite it"));
  }
  SECTION("a file open through ml_file_open, until it is closed") {
    ml_file f;
    REQUIRE(ml_file_open(&f, u8(in).c_str(), &err) == ML_OK);
    CHECK(write_file(alias, "x", &err) == ML_E_ARG);
    CHECK(contains(err.msg, u8(alias) + " is the same file as the input " + u8(in)));
    ml_file_close(&f);
    CHECK(ml_test_read<std::string>(in) == "input");
    CHECK(write_file(alias, "x", &err) == ML_OK);
    CHECK(ml_test_read<std::string>(alias) == "x");
  }
  CHECK(ml_test_read<std::string>(in).size() > 0);
  CHECK(d.count() == 2);
}

TEST_CASE("a failed write removes the temporary file at once, the error sticks, the target stays", "[out_file]") {
  open_over_old t;
  // The temporary file's descriptor becomes one open for reading only: the next write fails as a
  // full disk would (EBADF instead of ENOSPC).
  const int ro = open_read_only(t.a);
  REQUIRE(ro >= 0);
  REQUIRE(dup_onto(ro, t.o.fd) == t.o.fd);
  close_fd(ro);
  const std::string big(1 << 20, 'y');  // past the buffer: written at once
  CHECK(ml_out_write(&t.o, big.data(), big.size(), &t.err) == ML_E_IO);
  CHECK(contains(t.err.msg, "cannot write " + u8(t.a) + ": "));
  CHECK(t.d.count() == 1);
  CHECK(ml_out_write(&t.o, "z", 1, &t.err) == ML_E_IO);
  CHECK(ml_out_commit(&t.o, &t.err) == ML_E_IO);
  CHECK(contains(t.err.msg, "cannot write " + u8(t.a) + ": "));
  ml_out_discard(&t.o);
  CHECK(ml_test_read<std::string>(t.a) == "old");
  CHECK(t.d.count() == 1);
}

TEST_CASE("a non-ASCII path is written, replaced and read back as UTF-8", "[out_file][file]") {
  ml_test_dir d;
  ml_error err;
  const std::string name = "\xc3\xb1" "and\xc3\xba-\xe2\x82\xac-\xe6\x97\xa5\xe6\x9c\xac.bin";  // ñandú-€-日本.bin
  const fs::path p = d.p / fs::path(std::u8string(name.begin(), name.end()));
  REQUIRE(write_file(p, "one", &err) == ML_OK);
  REQUIRE(write_file(p, "two", &err) == ML_OK);
  CHECK(ml_test_read<std::string>(p) == "two");
  CHECK(d.count() == 1);
  CHECK(u8(fs::directory_iterator(d.p)->path().filename()) == name);
  ml_file f;
  REQUIRE(ml_file_open(&f, u8(p).c_str(), &err) == ML_OK);
  CHECK(f.size == 3);
  CHECK(std::memcmp(f.data, "two", 3) == 0);
  CHECK(write_file(p, "x", &err) == ML_E_ARG);  // it is open: an input now
  CHECK(contains(err.msg, u8(p)));
  ml_file_close(&f);
}

TEST_CASE("an input that is a directory is refused at once, naming it", "[file]") {
  ml_test_dir d;
  ml_error err;
  ml_file f;
  CHECK(ml_file_open(&f, u8(d.p).c_str(), &err) == ML_E_ARG);
  CHECK(contains(err.msg, u8(d.p) + ": is a directory, not a regular file"));
  ml_test_write(d.p / "r.bin", "abc");
  REQUIRE(ml_file_open(&f, u8(d.p / "r.bin").c_str(), &err) == ML_OK);
  CHECK(f.size == 3);
  CHECK(std::memcmp(f.data, "abc", 3) == 0);
  ml_file_close(&f);
}
