// core/out_file.h and the input side of core/file.h, the POSIX-only cases: permissions kept,
// FIFOs, devices and symbolic links as targets or inputs, a write past RLIMIT_FSIZE, SIGTERM.
// Special files are made in the test's own folder (mkfifo, mknod), never /dev. The cases that run
// on every OS (Windows too) are in test_out_file_portable.cpp.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/file.h"
#include "core/out_file.h"
#include "out_file_test_util.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace ml_test_files;

TEST_CASE("an output that replaces a file keeps its permissions", "[out_file]") {
  ml_test_dir d;
  ml_error err;
  const fs::path a = d.p / "a.bin";
  REQUIRE(write_file(a, "first", &err) == ML_OK);
  ::chmod(a.c_str(), 0640);
  REQUIRE(write_file(a, "second", &err) == ML_OK);
  CHECK(ml_test_read<std::string>(a) == "second");
  struct stat st;
  REQUIRE(::stat(a.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);
  CHECK(d.count() == 1);
}

TEST_CASE("an output that is a FIFO, a device or a dangling link is refused before anything is created",
          "[out_file]") {
  ml_test_dir d;
  ml_error err;
  SECTION("a FIFO") {
    const fs::path p = d.p / "fifo";
    REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
    CHECK(write_file(p, "x", &err) == ML_E_ARG);
    CHECK(contains(err.msg, "a FIFO"));
    CHECK(fs::is_fifo(p));
  }
  SECTION("a character device node (made here, like /dev/full)") {
    const fs::path p = d.p / "full";
    if (::mknod(p.c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0) {
      WARN("SKIP: mknod needs root");
      return;
    }
    CHECK(write_file(p, "x", &err) == ML_E_ARG);
    CHECK(contains(err.msg, "a character device"));
    CHECK(fs::is_character_file(p));
  }
  SECTION("a dangling symbolic link") {
    const fs::path p = d.p / "link";
    fs::create_symlink(d.p / "nowhere", p);
    CHECK(write_file(p, "x", &err) == ML_E_ARG);
    CHECK(contains(err.msg, "symbolic link"));
  }
  CHECK(d.count() == 1);
}

TEST_CASE("an output through a symbolic link replaces the file it names and keeps the link", "[out_file]") {
  ml_test_dir d;
  ml_error err;
  ml_test_write(d.p / "real.bin", "old");
  fs::create_symlink("real.bin", d.p / "link.bin");
  REQUIRE(write_file(d.p / "link.bin", "new", &err) == ML_OK);
  CHECK(fs::is_symlink(d.p / "link.bin"));
  CHECK(ml_test_read<std::string>(d.p / "real.bin") == "new");
  CHECK(d.count() == 2);
}

TEST_CASE("a write past RLIMIT_FSIZE (a full disk) fails with the OS error and leaves no temporary file", "[out_file]") {
  ml_test_dir d;
  const fs::path a = d.p / "a.bin";
  ml_test_write(a, "old");
  // In a child: RLIMIT_FSIZE makes writes past 1000 bytes fail with EFBIG, like a full disk.
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {1000, 1000};
    ::setrlimit(RLIMIT_FSIZE, &rl);
    ml_error err;
    ml_out_file o;
    if (ml_out_open(&o, a.c_str(), nullptr, 0, &err) != ML_OK) ::_exit(10);
    const std::string big(1 << 20, 'y');
    if (ml_out_write(&o, big.data(), big.size(), &err) != ML_E_IO) ::_exit(11);
    if (!contains(err.msg, "File too large") || !contains(err.msg, a.string())) ::_exit(12);
    if (fs::exists(d.p / (a.filename().string() + ".tmp." + std::to_string(getpid())))) ::_exit(13);
    if (ml_out_commit(&o, &err) != ML_E_IO) ::_exit(14);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(ml_test_read<std::string>(a) == "old");
  CHECK(d.count() == 1);
}

TEST_CASE("SIGTERM while an output is open removes its temporary file and kills the process", "[out_file]") {
  ml_test_dir d;
  const fs::path a = d.p / "a.bin";
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ml_cleanup_install();
    ml_error err;
    ml_out_file o;
    if (ml_out_open(&o, a.c_str(), nullptr, 0, &err) != ML_OK) ::_exit(10);
    ml_out_write(&o, "partial", 7, &err);
    (void)!::write(ready[1], "r", 1);
    for (;;) ::pause();
  }
  char c;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  CHECK(d.count() == 1);  // the temporary file
  ::kill(pid, SIGTERM);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  CHECK(d.count() == 0);
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST_CASE("an input that is a FIFO is refused at once, naming it", "[file]") {
  ml_test_dir d;
  ml_error err;
  ml_file f;
  SECTION("a FIFO with no writer: open must not wait for one") {
    const fs::path p = d.p / "fifo";
    REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
    CHECK(ml_file_open(&f, p.c_str(), &err) == ML_E_ARG);
    CHECK(contains(err.msg, p.string()));
    CHECK(contains(err.msg, "a FIFO"));
  }
  SECTION("a regular file still opens and reads") {
    ml_test_write(d.p / "r.bin", "abc");
    REQUIRE(ml_file_open(&f, (d.p / "r.bin").c_str(), &err) == ML_OK);
    CHECK(f.size == 3);
    CHECK(std::memcmp(f.data, "abc", 3) == 0);
    ml_file_close(&f);
  }
}
