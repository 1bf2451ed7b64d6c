// An LD_PRELOAD library that lists the regular files a trial reads, so that
// minrepro can bundle them into the reproducer archive. A trial script often
// reads files of its own besides the batch -- a model.pt beside the script
// loaded by torch.jit.load (in C++), a vocabulary read with Python's open() --
// and a reproducer that lacks them fails with a missing file rather than with
// the bug. Asking the user to list them is error-prone; watching the opens
// finds them, in Python and in C++ alike, and in child processes, which
// inherit LD_PRELOAD and the environment.
//
// Build (C, libc and libdl only):
//   gcc -shared -fPIC -O2 -Wall -Wextra -o libminrepro_filetrace.so harness/file_trace.c -ldl
//
// Active only while the environment variable MINREPRO_FILE_TRACE names an
// output file (an absolute path: a relative one would follow each process's
// working directory); otherwise every wrapper only forwards to the real
// function. The variable is read at every open, not once at load: a fork
// server whose children set their own environment after fork gets each
// trial's trace in that trial's file.
//
// After a successful open for reading only (O_RDONLY without O_PATH or
// O_TRUNC; for the fopen family a mode starting with 'r' and without '+')
// of a regular file, it appends one line, the file's absolute path as the
// kernel names it (/proc/self/fd/<fd>, so symbolic links and relative paths
// are resolved), to the trace file. A path is listed once per open: readers
// remove duplicates. Each line is written by a single write() to the trace
// file opened O_APPEND for that one record, so lines from several threads
// and processes do not interleave, and no descriptor of ours is left for the
// program to close under us (subprocess's close_fds, daemons closing all
// descriptors) or to find open in a child. Not listed: the trace file itself,
// anything under /proc, /sys and /dev, files deleted before the record is
// made, and paths with a newline (which the format cannot hold).
//
// The bookkeeping leaves errno as the caller's own call set it, allocates no
// memory (stack buffers of PATH_MAX) and uses only async-signal-safe calls
// besides getenv, so an open from a signal handler stays as safe as it was.
// The real functions are found with dlsym(RTLD_NEXT) in a constructor and,
// for opens that happen before it runs (other libraries' constructors),
// lazily with atomics; an open that reaches us from inside that dlsym (a
// malloc replacement reading its settings) goes straight to the system call.
//
// What it cannot see, so an archive may still lack a file:
//   - statically linked programs, and programs that ignore LD_PRELOAD
//     (set-user-ID programs);
//   - opens made by raw system calls (syscall(SYS_openat), openat2, inline
//     assembly), by io_uring, or inside libc itself (dlopen of shared
//     libraries, which is as well: they belong to the environment);
//   - files opened before this library is loaded, and descriptors inherited
//     from the parent that started the trial;
//   - files read through a descriptor opened elsewhere (passed over a
//     socket, or by a process without this library);
//   - opens with O_RDWR or O_WRONLY, even if the program then only reads:
//     such files are the trial's output, or are read and written alike.
//
// Looks, for the self-check only: while MINREPRO_FILE_TRACE_WATCH names
// places (absolute paths separated by ':'), a successful stat, lstat,
// fstatat, access, faccessat or opendir of a path at or under one of them,
// and an open of a directory there, is listed too, with the path as the
// program named it (made absolute from the working directory or the
// directory descriptor). A step that only asks whether the user's file
// exists, or lists the user's directory, depends on it as much as one that
// reads it, and a maintainer has neither. Not seen: the __xstat family of
// binaries built against a glibc before 2.33, statx, and a path that
// reaches a place through a symbolic link or "..".
#undef _FORTIFY_SOURCE  // its inline open() wrappers would clash with ours
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TRACE_ENV "MINREPRO_FILE_TRACE"
#define WATCH_ENV "MINREPRO_FILE_TRACE_WATCH"

// The fortified entry points the compiler calls for open() under
// _FORTIFY_SOURCE; glibc declares them only in that mode.
int __open_2(const char* path, int flags);
int __open64_2(const char* path, int flags);
int __openat_2(int dirfd, const char* path, int flags);
int __openat64_2(int dirfd, const char* path, int flags);

typedef int (*open_fn)(const char*, int, ...);
typedef int (*openat_fn)(int, const char*, int, ...);
typedef int (*open2_fn)(const char*, int);
typedef int (*openat2_fn)(int, const char*, int);
typedef FILE* (*fopen_fn)(const char*, const char*);
typedef FILE* (*freopen_fn)(const char*, const char*, FILE*);
typedef int (*stat_fn)(const char*, struct stat*);
typedef int (*fstatat_fn)(int, const char*, struct stat*, int);
typedef int (*stat64_fn)(const char*, struct stat64*);
typedef int (*fstatat64_fn)(int, const char*, struct stat64*, int);
typedef int (*access_fn)(const char*, int);
typedef int (*faccessat_fn)(int, const char*, int, int);
typedef DIR* (*opendir_fn)(const char*);

// ------------------------------------------------------------ real functions

// Set while this thread is inside dlsym: an open reaching us from there must
// not ask dlsym again. Initial-exec TLS needs no allocation to reach.
static __thread int resolving __attribute__((tls_model("initial-exec")));

static void* resolve(void** slot, const char* name) {
  void* f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (f || resolving) return f;
  resolving = 1;
  f = dlsym(RTLD_NEXT, name);  // racing threads find the same address
  resolving = 0;
  if (f) __atomic_store_n(slot, f, __ATOMIC_RELEASE);
  return f;
}

#define REAL(type, name)    \
  static void* name##_slot; \
  static type real_##name(void) { return (type)resolve(&name##_slot, #name); }

REAL(open_fn, open)
REAL(open_fn, open64)
REAL(openat_fn, openat)
REAL(openat_fn, openat64)
REAL(open2_fn, __open_2)
REAL(open2_fn, __open64_2)
REAL(openat2_fn, __openat_2)
REAL(openat2_fn, __openat64_2)
REAL(fopen_fn, fopen)
REAL(fopen_fn, fopen64)
REAL(freopen_fn, freopen)
REAL(freopen_fn, freopen64)
REAL(stat_fn, stat)
REAL(stat64_fn, stat64)
REAL(stat_fn, lstat)
REAL(stat64_fn, lstat64)
REAL(fstatat_fn, fstatat)
REAL(fstatat64_fn, fstatat64)
REAL(access_fn, access)
REAL(faccessat_fn, faccessat)
REAL(opendir_fn, opendir)

__attribute__((constructor)) static void resolveAll(void) {
  real_open(), real_open64(), real_openat(), real_openat64();
  real___open_2(), real___open64_2(), real___openat_2(), real___openat64_2();
  real_fopen(), real_fopen64(), real_freopen(), real_freopen64();
  real_stat(), real_stat64(), real_lstat(), real_lstat64(), real_fstatat(), real_fstatat64();
  real_access(), real_faccessat(), real_opendir();
}

// The open family when the real function is not known (yet): the system call.
static int sysOpenat(int dirfd, const char* path, int flags, mode_t mode) {
  return (int)syscall(SYS_openat, dirfd, path, flags | O_LARGEFILE, mode);
}

// --------------------------------------------------------------- the record

static int opensForReading(int flags) { return (flags & O_ACCMODE) == O_RDONLY && !(flags & (O_PATH | O_TRUNC)); }

static int modeReads(const char* mode) { return mode && mode[0] == 'r' && !strchr(mode, '+'); }

// Whether `path` is the directory of `n` bytes at `dir`, or lies under it.
static int underPrefix(const char* path, const char* dir, size_t n) {
  return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

static int under(const char* path, const char* dir) { return underPrefix(path, dir, strlen(dir)); }

static int openTrace(const char* trace) {
  const int flags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC;
  open_fn real = real_open();
  return real ? real(trace, flags, 0644) : sysOpenat(AT_FDCWD, trace, flags, 0644);
}

// Appends `line` (n bytes, a path) to the trace file, unless the trace file
// is the file `listed` itself (NULL: a look, nothing to compare).
static void append(const char* trace, char* line, size_t n, const struct stat* listed) {
  int out_fd = openTrace(trace);
  if (out_fd < 0) return;
  struct stat out_stat;
  if (fstat(out_fd, &out_stat) == 0 &&
      !(listed && out_stat.st_dev == listed->st_dev && out_stat.st_ino == listed->st_ino)) {
    line[n] = '\n';
    ssize_t written = write(out_fd, line, n + 1);
    (void)written;  // a lost line costs a file in the archive, not the trial
  }
  close(out_fd);
}

// Whether `path` is at or under one of the watched places.
static int watched(const char* path) {
  const char* places = getenv(WATCH_ENV);
  if (!places || path[0] != '/') return 0;
  while (*places) {
    const char* end = strchr(places, ':');
    size_t n = end ? (size_t)(end - places) : strlen(places);
    if (n > 1 && underPrefix(path, places, n)) return 1;
    if (!end) break;
    places = end + 1;
  }
  return 0;
}

// The path /proc/self/fd/<fd> names (its length, 0 when none).
static size_t fdPath(int fd, char* out) {
  char proc_link[sizeof "/proc/self/fd/" + 3 * sizeof(int)] = "/proc/self/fd/";
  char digits[3 * sizeof(int)];
  size_t nd = 0, at = strlen(proc_link);
  for (unsigned v = (unsigned)fd; nd == 0 || v; v /= 10) digits[nd++] = (char)('0' + v % 10);
  while (nd) proc_link[at++] = digits[--nd];
  proc_link[at] = '\0';
  ssize_t n = readlink(proc_link, out, PATH_MAX);
  if (n <= 0 || n >= PATH_MAX || out[0] != '/') return 0;  // failed, truncated or not a path
  out[n] = '\0';
  return (size_t)n;
}

// Appends fd's path to the trace file when fd is a regular file worth
// listing, or a directory at a watched place.
static void record(int fd) {
  const char* trace = getenv(TRACE_ENV);
  if (!trace || !*trace || fd < 0) return;
  int saved_errno = errno;
  struct stat file;
  char line[PATH_MAX + 1];
  size_t n;
  if (fstat(fd, &file) != 0 || file.st_nlink == 0 || !(S_ISREG(file.st_mode) || S_ISDIR(file.st_mode))) goto out;
  if ((n = fdPath(fd, line)) == 0) goto out;
  if (strchr(line, '\n') || under(line, "/proc") || under(line, "/sys") || under(line, "/dev")) goto out;
  if (S_ISDIR(file.st_mode) && !watched(line)) goto out;
  append(trace, line, n, &file);
out:
  errno = saved_errno;
}

// Appends `path` (relative to dirfd) to the trace file when a look at it
// succeeded (`ok`) and it is at a watched place.
static void recordLook(int ok, int dirfd, const char* path) {
  const char* trace = getenv(TRACE_ENV);
  if (!ok || !path || !*path || !trace || !*trace || !getenv(WATCH_ENV)) return;
  int saved_errno = errno;
  char line[PATH_MAX + 1];
  size_t n = 0;
  if (path[0] != '/') {
    if (dirfd == AT_FDCWD ? !getcwd(line, PATH_MAX) : (n = fdPath(dirfd, line)) == 0) goto out;
    n = strlen(line);
    if (n + 1 >= PATH_MAX) goto out;
    line[n++] = '/';
  }
  size_t len = strlen(path);
  if (n + len >= PATH_MAX || strchr(path, '\n')) goto out;
  memcpy(line + n, path, len + 1);
  n += len;
  if (watched(line)) append(trace, line, n, NULL);
out:
  errno = saved_errno;
}

static int recorded(int fd, int flags) {
  if (fd >= 0 && opensForReading(flags)) record(fd);
  return fd;
}

static FILE* recordedStream(FILE* stream, const char* mode) {
  if (stream && modeReads(mode)) record(fileno(stream));
  return stream;
}

// ------------------------------------------------------------------ wrappers

// open's third argument exists only when the flags create a file.
#define NEEDS_MODE(flags) (((flags)&O_CREAT) || ((flags)&O_TMPFILE) == O_TMPFILE)
#define MODE_ARG(flags, mode)         \
  mode_t mode = 0;                    \
  if (NEEDS_MODE(flags)) {            \
    va_list args;                     \
    va_start(args, flags);            \
    mode = (mode_t)va_arg(args, int); \
    va_end(args);                     \
  }

int open(const char* path, int flags, ...) {
  MODE_ARG(flags, mode)
  open_fn real = real_open();
  return recorded(real ? real(path, flags, mode) : sysOpenat(AT_FDCWD, path, flags, mode), flags);
}

int open64(const char* path, int flags, ...) {
  MODE_ARG(flags, mode)
  open_fn real = real_open64();
  return recorded(real ? real(path, flags, mode) : sysOpenat(AT_FDCWD, path, flags, mode), flags);
}

int openat(int dirfd, const char* path, int flags, ...) {
  MODE_ARG(flags, mode)
  openat_fn real = real_openat();
  return recorded(real ? real(dirfd, path, flags, mode) : sysOpenat(dirfd, path, flags, mode), flags);
}

int openat64(int dirfd, const char* path, int flags, ...) {
  MODE_ARG(flags, mode)
  openat_fn real = real_openat64();
  return recorded(real ? real(dirfd, path, flags, mode) : sysOpenat(dirfd, path, flags, mode), flags);
}

// The fortified forms take no mode (they abort on O_CREAT without one, which
// the real function still does for us).
int __open_2(const char* path, int flags) {
  open2_fn real = real___open_2();
  return recorded(real ? real(path, flags) : sysOpenat(AT_FDCWD, path, flags, 0), flags);
}

int __open64_2(const char* path, int flags) {
  open2_fn real = real___open64_2();
  return recorded(real ? real(path, flags) : sysOpenat(AT_FDCWD, path, flags, 0), flags);
}

int __openat_2(int dirfd, const char* path, int flags) {
  openat2_fn real = real___openat_2();
  return recorded(real ? real(dirfd, path, flags) : sysOpenat(dirfd, path, flags, 0), flags);
}

int __openat64_2(int dirfd, const char* path, int flags) {
  openat2_fn real = real___openat64_2();
  return recorded(real ? real(dirfd, path, flags) : sysOpenat(dirfd, path, flags, 0), flags);
}

// Streams: glibc opens the file with an internal open these wrappers do not
// see, so each stream opener is wrapped itself (and nothing is listed twice).
// std::ifstream in libstdc++ opens through fopen64.
FILE* fopen(const char* path, const char* mode) {
  fopen_fn real = real_fopen();
  if (!real) return errno = ENOSYS, NULL;
  return recordedStream(real(path, mode), mode);
}

FILE* fopen64(const char* path, const char* mode) {
  fopen_fn real = real_fopen64();
  if (!real) return errno = ENOSYS, NULL;
  return recordedStream(real(path, mode), mode);
}

// freopen(NULL, mode, stream) only changes the mode of a file already open:
// nothing new to list.
FILE* freopen(const char* path, const char* mode, FILE* stream) {
  freopen_fn real = real_freopen();
  if (!real) return errno = ENOSYS, NULL;
  FILE* f = real(path, mode, stream);
  return path ? recordedStream(f, mode) : f;
}

FILE* freopen64(const char* path, const char* mode, FILE* stream) {
  freopen_fn real = real_freopen64();
  if (!real) return errno = ENOSYS, NULL;
  FILE* f = real(path, mode, stream);
  return path ? recordedStream(f, mode) : f;
}

// Looks (see the header): the stat family, access, opendir. The four
// path-only stats and the two at-forms differ in nothing but their names
// and their struct.
#define LOOK_STAT(name, fn_type, stat_type)           \
  int name(const char* path, struct stat_type* buf) { \
    fn_type real = real_##name();                     \
    if (!real) return errno = ENOSYS, -1;             \
    int rc = real(path, buf);                         \
    return recordLook(rc == 0, AT_FDCWD, path), rc;   \
  }
#define LOOK_STATAT(name, fn_type, stat_type)                                          \
  int name(int dirfd, const char* path, struct stat_type* buf, int flags) {            \
    fn_type real = real_##name();                                                      \
    if (!real) return errno = ENOSYS, -1;                                              \
    int rc = real(dirfd, path, buf, flags);                                            \
    return recordLook(rc == 0 && !(flags & AT_EMPTY_PATH && !*path), dirfd, path), rc; \
  }
LOOK_STAT(stat, stat_fn, stat)
LOOK_STAT(stat64, stat64_fn, stat64)
LOOK_STAT(lstat, stat_fn, stat)
LOOK_STAT(lstat64, stat64_fn, stat64)
LOOK_STATAT(fstatat, fstatat_fn, stat)
LOOK_STATAT(fstatat64, fstatat64_fn, stat64)

int access(const char* path, int mode) {
  access_fn real = real_access();
  if (!real) return errno = ENOSYS, -1;
  int rc = real(path, mode);
  return recordLook(rc == 0, AT_FDCWD, path), rc;
}

int faccessat(int dirfd, const char* path, int mode, int flags) {
  faccessat_fn real = real_faccessat();
  if (!real) return errno = ENOSYS, -1;
  int rc = real(dirfd, path, mode, flags);
  return recordLook(rc == 0, dirfd, path), rc;
}

DIR* opendir(const char* path) {
  opendir_fn real = real_opendir();
  if (!real) return errno = ENOSYS, NULL;
  DIR* dir = real(path);
  return recordLook(dir != NULL, AT_FDCWD, path), dir;
}
