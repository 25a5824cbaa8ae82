// The test harness (see mccl_test.h). Built into its own archive, libmccl_test.a, linked only into
// test binaries: no library a program links (final/ included) carries it.
#include <dirent.h>
#include <execinfo.h>
#include <fnmatch.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "mccl_test.h"
#include "mccl_utils.h"

enum { ST_PASS = 0, ST_SKIP = 1, ST_FAIL = 2 };

// Weak: a test linked against libminccl.so or the drop-in, which keep the labs' names inside, has no
// count of stubs to read, and nothing graded to misreport.
#pragma weak mcclExerciseStubsReached

static int curStatus;
static char curMsg[1024];
static const char* curName = "";
static char curFull[512];  // the running test's full name, for the crash report
static uint64_t seed;
static uint64_t rngState;

void mcclTestFailAt(const char* file, int line, const char* fmt, ...) {
  if (curStatus == ST_FAIL) return;  // keep the first failure
  const char* base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
  int n = snprintf(curMsg, sizeof(curMsg), "%s:%d: ", base, line);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(curMsg + n, sizeof(curMsg) - n, fmt, ap);
  va_end(ap);
  curStatus = ST_FAIL;
}

void mcclTestSkipWith(const char* fmt, ...) {
  if (curStatus == ST_FAIL) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(curMsg, sizeof(curMsg), fmt, ap);
  va_end(ap);
  curStatus = ST_SKIP;
}

int mcclTestStopped(void) { return curStatus != ST_PASS; }
uint64_t mcclTestSeed(void) { return seed; }
const char* mcclTestName(void) { return curName; }

int mcclTestSampling(void) {
  if (!(MCCL_TEST_UNDER_ASAN || MCCL_TEST_UNDER_TSAN)) return 0;
  const char* full = getenv("MCCL_TEST_FULL");
  return full == NULL || strcmp(full, "1") != 0;
}

int mcclTestSampled(uint64_t k, unsigned every) {
  if (every <= 1 || !mcclTestSampling()) return 1;
  if (MCCL_TEST_UNDER_TSAN) every *= 2;  // mccl_test.h says why
  return (k + seed) % every == 0;
}

uint64_t mcclTestRand(void) {
  rngState ^= rngState >> 12;
  rngState ^= rngState << 25;
  rngState ^= rngState >> 27;
  return rngState * 0x2545F4914F6CDD1DULL;
}

int mcclTestCountDir(const char* path) {
  DIR* d = opendir(path);
  if (d == NULL) return -1;
  int n = 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  closedir(d);
  return strcmp(path, "/proc/self/fd") == 0 ? n - 1 : n;
}
long mcclTestCountMaps(const char* containing) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == NULL) return -1;
  char line[4096];
  long n = 0;
  while (fgets(line, sizeof(line), f)) {
    size_t len = strlen(line);
    if (containing == NULL || strstr(line, containing)) n++;
    // A line longer than the buffer continues in the next read: count it once.
    while (len == sizeof(line) - 1 && line[len - 1] != '\n' && fgets(line, sizeof(line), f)) len = strlen(line);
  }
  fclose(f);
  return n;
}

int mcclTestCountFds(void) { return mcclTestCountDir("/proc/self/fd"); }
// The names of the /dev/shm/mccl-* files that another live process holds, open or mapped, one a line in *held (a
// concurrent run's segments, which exist only while their creator holds them). Reads /proc/PID/fd and /proc/PID/maps of
// every process it may read.
static void shmHeldElsewhere(char** held, size_t* len) {
  FILE* out = open_memstream(held, len);
  if (out == NULL) return;
  fputc('\n', out);  // every name then sits between two newlines
  DIR* procs = opendir("/proc");
  const long self = (long)getpid();
  char path[320], target[512], line[1024];
  for (struct dirent* p; procs != NULL && (p = readdir(procs)) != NULL;) {
    char* end = NULL;
    const long pid = strtol(p->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == self) continue;
    snprintf(path, sizeof(path), "/proc/%ld/fd", pid);
    DIR* fds = opendir(path);
    for (struct dirent* f; fds != NULL && (f = readdir(fds)) != NULL;) {
      snprintf(path, sizeof(path), "/proc/%ld/fd/%s", pid, f->d_name);
      ssize_t n = readlink(path, target, sizeof(target) - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      if (strncmp(target, "/dev/shm/mccl-", 14) == 0) fprintf(out, "%s\n", target + 9);
    }
    if (fds) closedir(fds);
    snprintf(path, sizeof(path), "/proc/%ld/maps", pid);
    FILE* maps = fopen(path, "r");
    while (maps != NULL && fgets(line, sizeof(line), maps)) {
      const char* at = strstr(line, "/dev/shm/mccl-");
      if (at) fprintf(out, "%.*s\n", (int)strcspn(at + 9, " \n"), at + 9);
    }
    if (maps) fclose(maps);
  }
  if (procs) closedir(procs);
  fclose(out);
}

int mcclTestCountShm(void) {
  // The names first, then who holds them, then whether each is still there: a concurrent run's segment is held
  // from its creation until it is unlinked, so it is either held at the scan or gone after it.
  DIR* d = opendir("/dev/shm");
  if (d == NULL) return -1;
  char* names = NULL;
  size_t namesLen = 0;
  FILE* list = open_memstream(&names, &namesLen);
  for (struct dirent* e; list != NULL && (e = readdir(d)) != NULL;)
    if (strncmp(e->d_name, "mccl-", 5) == 0) fprintf(list, "%s\n", e->d_name);
  closedir(d);
  if (list == NULL) return -1;
  fclose(list);
  char* held = NULL;
  size_t len = 0;
  shmHeldElsewhere(&held, &len);
  int n = 0;
  char want[300], path[320];
  for (char *save = NULL, *name = strtok_r(names, "\n", &save); name; name = strtok_r(NULL, "\n", &save)) {
    snprintf(want, sizeof(want), "\n%s\n", name);
    if (held != NULL && strstr(held, want) != NULL) continue;  // another process holds it: not this test's
    snprintf(path, sizeof(path), "/dev/shm/%s", name);
    n += access(path, F_OK) == 0;  // gone by now: a segment that was being unlinked
  }
  free(names);
  free(held);
  return n;
}
// Threads that have begun to exit (PF_EXITING in the flags field of their stat, set first thing in
// the kernel's do_exit) are not counted: after pthread_join returns, /proc can still list the joined
// thread until the kernel reaps it, a window that a loaded machine stretches.
#define MCCL_PF_EXITING 0x00000004u
static int threadUncounted(const char* tid) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/self/task/%s/stat", tid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return 1;  // reaped between readdir and here
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  if (n == 0) return 1;  // reaped between open and read: the file reads empty (seen under ASan, 1 in ~20000 joins)
  buf[n] = '\0';
  // pid (comm) state ppid pgrp session tty_nr tpgid flags ...: comm may hold spaces and parentheses.
  const char* rp = strrchr(buf, ')');
  char state;
  int i1, i2, i3, i4, i5;
  unsigned int flags;
  if (rp == NULL || sscanf(rp + 1, " %c %d %d %d %d %d %u", &state, &i1, &i2, &i3, &i4, &i5, &flags) != 7) return 0;
  if (flags & MCCL_PF_EXITING) return 1;
  // The sim's NULL-stream worker (named in sim_stream.c) starts on demand and leaves when idle: whether
  // it is there is timing, not a leak, so thread counts leave it out. So are the sim's idle block threads
  // (sim_launch.c's crews), which it keeps for later launches as a driver keeps its own threads.
  const char* lp = strchr(buf, '(');
  return lp != NULL && (strncmp(lp, "(sim-legacy)", 12) == 0 || strncmp(lp, "(sim-crew)", 10) == 0);
}

int mcclTestCountThreads(void) {
  DIR* d = opendir("/proc/self/task");
  if (d == NULL) return -1;
  int n = 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.' && !threadUncounted(e->d_name)) n++;
  closedir(d);
  return n;
}

int mcclTestWaitThreads(int expected, int timeoutMs) {
  const uint64_t deadline = mcclClockMs() + (uint64_t)(timeoutMs > 0 ? timeoutMs : 0);
  for (;;) {
    int n = mcclTestCountThreads();
    if (n == expected || n < 0) return n;
    if (mcclClockMs() >= deadline) return n;
    mcclSleepMs(1);
  }
}

// Suite name: the directory the binary lives in (the module, e.g. 01_vmm_alloc) and its name.
static void suiteName(const char* argv0, char* out, size_t len) {
  char buf[512];
  snprintf(buf, sizeof(buf), "%s", argv0);
  char* base = strrchr(buf, '/');
  if (base == NULL) { snprintf(out, len, "%s", buf); return; }
  *base++ = '\0';
  char* dir = strrchr(buf, '/');
  snprintf(out, len, "%s/%s", dir ? dir + 1 : buf, base);
}

// A test that reached an exercise stub (a learner tree's, docs/exercises.md) and then skipped did not meet
// missing hardware: the stub made the feature look absent. It fails, naming the exercise, so that a
// learner reads "not implemented yet" and the grade counts the test as failing, never as skipped.
static void stubSkipFails(unsigned stubsBefore) {
  const char* stub = NULL;
  if (curStatus != ST_SKIP || mcclExerciseStubsReached == NULL || mcclExerciseStubsReached(&stub) == stubsBefore)
    return;
  char reason[sizeof(curMsg)];
  snprintf(reason, sizeof(reason), "%s", curMsg);
  snprintf(curMsg, sizeof(curMsg),
           "not implemented yet: exercise %s (reached during this test, which would otherwise skip: %s)",
           stub ? stub : "?", reason);
  curStatus = ST_FAIL;
}

static int selected(const char* pattern, const char* full) {
  if (pattern == NULL || *pattern == '\0') return 1;
  char glob[512];
  if (strpbrk(pattern, "*?[")) snprintf(glob, sizeof(glob), "%s", pattern);
  else snprintf(glob, sizeof(glob), "*%s*", pattern);
  return fnmatch(glob, full, 0) == 0;
}

// A test that crashes (a bad pointer in the code under test, or in a driver it calls) is reported as this
// test's FAIL with the signal and the frames, instead of only its binary's exit status: the runner then counts
// it against the test. Installed only where no handler is (a sanitizer's own report comes first), and the
// signal is raised again after, so the exit status and any core dump stay. Frames inside the test binary show
// as BINARY(+OFFSET): `addr2line -f -e BINARY OFFSET` names them.
static void crashReport(int sig) {
  char line[700];
  int n = snprintf(line, sizeof(line), "FAIL %s (crashed: signal %d, %s; its frames follow)\n", curFull, sig,
                   sig == SIGSEGV  ? "SIGSEGV"
                   : sig == SIGBUS ? "SIGBUS"
                   : sig == SIGFPE ? "SIGFPE"
                   : sig == SIGILL ? "SIGILL"
                                   : "SIGABRT");
  if (n > 0) (void)!write(STDOUT_FILENO, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
  void* frames[48];
  int nf = backtrace(frames, 48);
  char** names = backtrace_symbols(frames, nf);  // allocates: acceptable on the way out
  for (int i = 0; i < nf; i++) {
    n = snprintf(line, sizeof(line), "#   %s\n", names ? names[i] : "?");
    if (n > 0) (void)!write(STDOUT_FILENO, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

static void crashReportInstall(void) {
  static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
    struct sigaction old;
    if (sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) continue;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = crashReport;
    sigemptyset(&sa.sa_mask);
    sigaction(sigs[i], &sa, NULL);
  }
}

#ifdef __SANITIZE_THREAD__
static void* noop(void* arg) {
  return arg;
}
#endif

int mcclTestMain(int argc, char** argv, const mcclTestCase* cases, int nCases, const mcclTestHooks* hooks) {
  static const mcclTestHooks single = {NULL, NULL, 1, 1};
  if (hooks == NULL) hooks = &single;
#ifdef __SANITIZE_THREAD__
  // TSan starts a background thread of its own with the first thread the program creates: have it
  // started now, so tests that count this process's threads before and after see only their own.
  pthread_t t;
  if (pthread_create(&t, NULL, noop, NULL) == 0) pthread_join(t, NULL);
#endif
  setvbuf(stdout, NULL, _IOLBF, 0);
  // `--list [NP]`: print the names the filter selects (as a run on NP processes names them), run nothing.
  int list = argc > 1 && strcmp(argv[1], "--list") == 0;
  int nprocs = list && argc > 2 ? atoi(argv[2]) : hooks->nprocs;
  const char* pattern = argc > 1 && !list ? argv[1] : getenv("MCCL_TEST_FILTER");
  char suite[256];
  suiteName(argv[0], suite, sizeof(suite));
  if (nprocs > 1) snprintf(suite + strlen(suite), sizeof(suite) - strlen(suite), "@np%d", nprocs);
  if (list) {
    for (int i = 0; i < nCases; i++) {
      char full[512];
      snprintf(full, sizeof(full), "%s.%s", suite, cases[i].name);
      if (selected(pattern, full)) printf("%s\n", full);
    }
    return 0;
  }

  const char* s = getenv("MCCL_TEST_SEED");
  seed = (s && *s) ? strtoull(s, NULL, 0) : ((uint64_t)time(NULL) * 2654435761u) ^ ((uint64_t)getpid() << 16);
  if (hooks->shareSeed) seed = hooks->shareSeed(seed);
  if (seed == 0) seed = 1;

  int counts[3] = {0, 0, 0};
  int printedSeed = 0;
  crashReportInstall();
  for (int i = 0; i < nCases; i++) {
    char full[512];
    snprintf(full, sizeof(full), "%s.%s", suite, cases[i].name);
    if (!selected(pattern, full)) continue;
    if (!printedSeed && hooks->reporter) {
      printf("# %s: seed %llu (replay with MCCL_TEST_SEED=%llu)\n", suite, (unsigned long long)seed,
             (unsigned long long)seed);
      printedSeed = 1;
    }
    curStatus = ST_PASS;
    curMsg[0] = '\0';
    curName = cases[i].name;
    snprintf(curFull, sizeof(curFull), "%s", full);
    rngState = seed ^ (0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1));
    unsigned stubs0 = mcclExerciseStubsReached ? mcclExerciseStubsReached(NULL) : 0;
    double t0 = mcclClockSec();
    cases[i].fn();
    double ms = 1e3 * (mcclClockSec() - t0);
    stubSkipFails(stubs0);
    int st = curStatus;
    if (hooks->combine) st = hooks->combine(st, curMsg, sizeof(curMsg));
    counts[st]++;
    if (!hooks->reporter) continue;
    if (st == ST_PASS)
      printf("PASS %s (%.0f ms)\n", full, ms);
    else if (st == ST_SKIP)
      printf("SKIP %s (%s)\n", full, curMsg);
    else
      printf("FAIL %s (%s)\n", full, curMsg);
  }
  if (hooks->reporter) printf("%d passed, %d failed, %d skipped\n", counts[ST_PASS], counts[ST_FAIL], counts[ST_SKIP]);
  fflush(stdout);
  return counts[ST_FAIL] ? 1 : 0;
}
