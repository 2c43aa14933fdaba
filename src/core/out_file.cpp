// Output files: a temporary file next to the target, fsync, rename (core/out_file.h), and the
// signal handler that removes the temporary files of a process killed while writing them.
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

namespace {

constexpr size_t BUF_SIZE = size_t(1) << 18;

// ---- The signal handler's table ---------------------------------------------------------------
// A slot is free (0), being filled (1) or ready (2). The handler reads only ready slots, whose
// path was completely written before the release store that made them ready.
constexpr int MAX_CLEANUP = 16;
enum { SLOT_FREE = 0, SLOT_FILLING = 1, SLOT_READY = 2 };
struct cleanup_slot {
  std::atomic<int> state;
  char path[ML_OUT_PATH_MAX];
};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs lock-free atomics");
cleanup_slot g_cleanup[MAX_CLEANUP];
std::atomic<bool> g_installed{false};
const int CLEANUP_SIGNALS[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};

extern "C" void ml_cleanup_on_signal(int sig) {
  const int saved = errno;
  for (cleanup_slot& s : g_cleanup)
    if (s.state.load(std::memory_order_acquire) == SLOT_READY) ::unlink(s.path);
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

// ---- Writing -----------------------------------------------------------------------------------

bool write_all(int fd, const uint8_t* p, size_t n, int* e) {
  while (n > 0) {
    const ssize_t r = ::write(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      *e = r < 0 ? errno : EIO;
      return false;
    }
    p += r;
    n -= (size_t)r;
  }
  return true;
}

// A failed write: the temporary file goes at once, and the error sticks.
ml_status fail_write(ml_out_file* o, int e, ml_error* err) {
  ml_out_discard(o);
  o->error = e;
  return ml_fail(err, ML_E_IO, "cannot write %s: %s", o->path, std::strerror(e));
}

bool flush(ml_out_file* o, int* e) {
  const bool ok = write_all(o->fd, o->buf, o->fill, e);
  o->fill = 0;
  return ok;
}

bool copy_path(char* dst, const char* src) {
  const size_t n = std::strlen(src);
  if (n + 32 >= ML_OUT_PATH_MAX) return false;  // room for ".tmp.<pid>.<k>"
  std::memcpy(dst, src, n + 1);
  return true;
}

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

int ml_cleanup_add(const char* path) {
  const size_t n = std::strlen(path);
  if (n >= ML_OUT_PATH_MAX) return -1;
  for (int i = 0; i < MAX_CLEANUP; ++i) {
    int expect = SLOT_FREE;
    if (!g_cleanup[i].state.compare_exchange_strong(expect, SLOT_FILLING, std::memory_order_acquire)) continue;
    std::memcpy(g_cleanup[i].path, path, n + 1);
    g_cleanup[i].state.store(SLOT_READY, std::memory_order_release);
    return i;
  }
  return -1;
}

void ml_cleanup_remove(int slot) {
  if (slot >= 0 && slot < MAX_CLEANUP) g_cleanup[slot].state.store(SLOT_FREE, std::memory_order_release);
}

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
  if (!copy_path(o->path, path)) return ml_fail(err, ML_E_ARG, "%.200s...: output path too long", path);

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
      const bool fits = copy_path(o->path, real);
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

  o->buf = static_cast<uint8_t*>(std::malloc(BUF_SIZE));
  if (!o->buf) return ml_fail(err, ML_E_NOMEM, "%s: cannot allocate the write buffer", o->path);
  for (int k = 0; o->fd < 0; ++k) {
    if (k == 0) std::snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%ld", o->path, (long)::getpid());
    else std::snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%ld.%d", o->path, (long)::getpid(), k);
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

ml_status ml_out_write(ml_out_file* o, const void* data, size_t n, ml_error* err) {
  if (o->error) return ml_fail(err, ML_E_IO, "cannot write %s: %s", o->path, std::strerror(o->error));
  if (o->fd < 0) return ml_fail(err, ML_E_ARG, "%s: the output is not open", o->path);
  const uint8_t* p = static_cast<const uint8_t*>(data);
  int e = 0;
  if (o->fill + n > BUF_SIZE && !flush(o, &e)) return fail_write(o, e, err);
  if (n >= BUF_SIZE) {
    if (!write_all(o->fd, p, n, &e)) return fail_write(o, e, err);
  } else if (n > 0) {
    std::memcpy(o->buf + o->fill, p, n);
    o->fill += n;
  }
  o->written += n;
  return ML_OK;
}

ml_status ml_out_commit(ml_out_file* o, ml_error* err) {
  if (o->error) return ml_fail(err, ML_E_IO, "cannot write %s: %s", o->path, std::strerror(o->error));
  if (o->fd < 0) return ml_fail(err, ML_E_ARG, "%s: the output is not open", o->path);
  int e = 0;
  if (!flush(o, &e)) return fail_write(o, e, err);
  if (::fsync(o->fd) != 0) return fail_write(o, errno, err);
  const int fd = o->fd;
  o->fd = -1;
  if (::close(fd) != 0) return fail_write(o, errno, err);
  // The target may have changed since ml_out_open: never rename over anything but a regular file.
  struct stat st;
  if (::lstat(o->path, &st) == 0 && !S_ISREG(st.st_mode)) {
    ml_out_discard(o);
    return ml_fail(err, ML_E_ARG, "%s: is now %s; an output must be a regular file or a new path", o->path,
                   ml_file_kind(st.st_mode));
  }
  if (::rename(o->tmp, o->path) != 0) {
    e = errno;
    ml_out_discard(o);
    return ml_fail(err, ML_E_IO, "cannot write %s: rename failed: %s", o->path, std::strerror(e));
  }
  o->tmp[0] = 0;
  ml_cleanup_remove(o->cleanup_slot);
  o->cleanup_slot = -1;
  sync_dir(o->path);
  std::free(o->buf);
  o->buf = nullptr;
  return ML_OK;
}

void ml_out_discard(ml_out_file* o) {
  if (o->fd >= 0) ::close(o->fd);
  o->fd = -1;
  if (o->tmp[0]) ::unlink(o->tmp);  // before the table entry goes, so a signal cannot miss it
  o->tmp[0] = 0;
  ml_cleanup_remove(o->cleanup_slot);
  o->cleanup_slot = -1;
  std::free(o->buf);
  o->buf = nullptr;
  o->fill = 0;
}
