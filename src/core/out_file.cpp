// POSIX output files (core/out_file.h): a temporary file next to the target, fsync, rename, and the
// signal handler that removes the temporary files of a process killed while writing them. The
// writes, the table and the discard are out_file_common.cpp's; Windows has out_file_win.cpp.
#include "core/out_file.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/file.h"
#include "core/out_file_common.h"

namespace {

// ---- The signal handler ------------------------------------------------------------------------
std::atomic<bool> g_installed{false};
const int CLEANUP_SIGNALS[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};

extern "C" void ml_cleanup_on_signal(int sig) {
  const int saved = errno;
  ml_cleanup_remove_listed();  // unlink only: async-signal-safe
  // SA_RESETHAND restored the default action; the signal is blocked inside the handler, so it is
  // delivered (and ends the process) as soon as the handler returns.
  ::raise(sig);
  errno = saved;
}

// Blocks the cleanup signals for the scope, so that a temporary file is never created without
// its table entry nor listed while it is not there.
struct signals_blocked {
  sigset_t old;
  signals_blocked() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : CLEANUP_SIGNALS) sigaddset(&set, s);
    sigprocmask(SIG_BLOCK, &set, &old);
  }
  ~signals_blocked() { sigprocmask(SIG_SETMASK, &old, nullptr); }
};

// Refuses a target that is one of the inputs or a file open through ml_file_open.
ml_status check_not_an_input(const char* path, const struct stat& st, const char* const* inputs, size_t n_inputs,
                             ml_error* err) {
  for (size_t i = 0; i < n_inputs; ++i) {
    struct stat in;
    if (inputs[i] && ::stat(inputs[i], &in) == 0 && in.st_dev == st.st_dev && in.st_ino == st.st_ino)
      return ml_fail(err, ML_E_ARG, "%s is the same file as the input %s; refusing to overwrite it", path,
                     inputs[i]);
  }
  char open_path[512];
  if (ml_file_find_input((unsigned long long)st.st_dev, (unsigned long long)st.st_ino, open_path, sizeof open_path))
    return ml_fail(err, ML_E_ARG, "%s is the same file as the input %s; refusing to overwrite it", path, open_path);
  return ML_OK;
}

// fsync of the directory that holds path, so that the rename itself is durable. Best effort.
void sync_dir(const char* path) {
  char dir[ML_OUT_PATH_MAX];
  const char* slash = std::strrchr(path, '/');
  if (!slash) {
    std::strcpy(dir, ".");
  } else {
    const size_t n = slash == path ? 1 : (size_t)(slash - path);
    std::memcpy(dir, path, n);
    dir[n] = 0;
  }
  const int fd = ::open(dir, O_RDONLY | O_CLOEXEC | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

int ml_out_os_sync(int fd) { return ::fsync(fd); }
int ml_out_os_close(int fd) { return ::close(fd); }
void ml_out_os_remove(const char* path) { ::unlink(path); }

void ml_cleanup_install() {
  if (g_installed.exchange(true)) return;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = ml_cleanup_on_signal;
  sigemptyset(&sa.sa_mask);
  for (int s : CLEANUP_SIGNALS) sigaddset(&sa.sa_mask, s);  // one cleanup at a time
  sa.sa_flags = SA_RESETHAND;
  for (int s : CLEANUP_SIGNALS) {
    struct sigaction old;
    if (sigaction(s, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;  // nohup, `cmd &`
    sigaction(s, &sa, nullptr);
  }
}

ml_status ml_out_open(ml_out_file* o, const char* path, const char* const* inputs, size_t n_inputs, ml_error* err) {
  *o = ml_out_file{};
  if (!path || !*path) return ml_fail(err, ML_E_ARG, "no output path given");
  if (!ml_out_copy_path(o->path, path)) return ml_fail(err, ML_E_ARG, "%.200s...: output path too long", path);

  struct stat st;
  bool exists = false;
  if (::lstat(path, &st) == 0) {
    exists = true;
    if (S_ISLNK(st.st_mode)) {  // write to the file the link names; the link stays
      char* real = ::realpath(path, nullptr);
      if (!real) {
        const int e = errno;
        if (e == ENOENT) return ml_fail(err, ML_E_ARG, "%s: is a symbolic link to a missing file", path);
        return ml_fail(err, ML_E_IO, "%s: cannot resolve the symbolic link: %s", path, std::strerror(e));
      }
      const bool fits = ml_out_copy_path(o->path, real);
      std::free(real);
      if (!fits) return ml_fail(err, ML_E_ARG, "%s: the file it links to has too long a path", path);
      if (::stat(o->path, &st) != 0)
        return ml_fail(err, ML_E_IO, "%s: cannot stat: %s", o->path, std::strerror(errno));
    }
  } else if (errno != ENOENT) {
    return ml_fail(err, ML_E_IO, "%s: cannot stat: %s", path, std::strerror(errno));
  }
  if (exists) {
    if (!S_ISREG(st.st_mode))
      return ml_fail(err, ML_E_ARG, "%s: is %s; an output must be a regular file or a new path", path,
                     ml_file_kind(st.st_mode));
    ML_TRY(check_not_an_input(path, st, inputs, n_inputs, err));
    o->mode = st.st_mode & 07777;
  }

  o->buf = static_cast<uint8_t*>(std::malloc(ML_OUT_BUF_SIZE));
  if (!o->buf) return ml_fail(err, ML_E_NOMEM, "%s: cannot allocate the write buffer", o->path);
  for (int k = 0; o->fd < 0; ++k) {
    ml_out_tmp_name(o, (unsigned long)::getpid(), k);  // fits: ml_out_copy_path left room
    signals_blocked guard;
    o->fd = ::open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
    if (o->fd < 0) {
      const int e = errno;
      if (e == EEXIST && k < 100) continue;  // a stale file of an earlier process with this pid
      o->tmp[0] = 0;
      ml_out_discard(o);
      return ml_fail(err, ML_E_IO, "cannot create a temporary file next to %s: %s", o->path, std::strerror(e));
    }
    o->cleanup_slot = ml_cleanup_add(o->tmp);
    if (o->cleanup_slot < 0) {
      ml_out_discard(o);
      return ml_fail(err, ML_E_NOMEM, "%s: too many output files open at once", o->path);
    }
  }
  if (o->mode) ::fchmod(o->fd, o->mode);  // the replacement keeps the old file's permissions
  return ML_OK;
}

ml_status ml_out_commit(ml_out_file* o, ml_error* err) {
  ML_TRY(ml_out_flush_close(o, err));
  // The target may have changed since ml_out_open: never rename over anything but a regular file.
  struct stat st;
  if (::lstat(o->path, &st) == 0 && !S_ISREG(st.st_mode)) {
    ml_out_discard(o);
    return ml_fail(err, ML_E_ARG, "%s: is now %s; an output must be a regular file or a new path", o->path,
                   ml_file_kind(st.st_mode));
  }
  if (::rename(o->tmp, o->path) != 0) {
    const int e = errno;
    ml_out_discard(o);
    return ml_fail(err, ML_E_IO, "cannot write %s: rename failed: %s", o->path, std::strerror(e));
  }
  ml_out_committed(o);
  sync_dir(o->path);
  return ML_OK;
}
