// Tests of common/: result strings, check macros, parameters, logging, harness output.
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "mccl_checks.h"
#include "mccl_elt.h"
#include "mccl_param.h"
#include "mccl_socket.h"
#include "mccl_test.h"
#include "mccl_utils.h"

static void resultStrings(void) {
  for (int r = 0; r < mcclNumResults; r++) EXPECT_TRUE(mcclGetErrorString((mcclResult_t)r) != NULL);
  EXPECT_EQ(mcclSuccess, 0);
  EXPECT_EQ(mcclInProgress, 7);
  EXPECT_EQ(mcclTimeout, 8);
  EXPECT_EQ(mcclNotImplemented, 9);
  EXPECT_RES(mcclExerciseStub("00.test"), mcclNotImplemented);
  EXPECT_EQ(strcmp(mcclGetErrorString((mcclResult_t)99), "unknown result code"), 0);
}

static mcclResult_t sysFails(int* cleaned) {
  mcclResult_t res = mcclSuccess;
  int fd = -1;
  SYSCHECKGOTO(fd = open("/nonexistent/minccl", O_RDONLY), res, undo);
  close(fd);
undo:
  *cleaned = 1;
  return res;
}
static mcclResult_t cuFails(void) {
  CUdevice dev;
  CUCHECK(cuInit(0));
  CUCHECK(cuDeviceGet(&dev, 100000));  // no such device, on any backend
  return mcclSuccess;
}
static mcclResult_t propagates(void) {
  MCCLCHECK(cuFails());
  return mcclInternalError;  // not reached
}
static mcclResult_t passesInProgress(void) {
  MCCLCHECK(mcclInProgress);
  return mcclSuccess;
}
static mcclResult_t pthreadFails(void) {
  PTHREADCHECK(EINVAL);
  return mcclSuccess;
}

static void checkMacros(void) {
  int cleaned = 0;
  EXPECT_RES(sysFails(&cleaned), mcclSystemError);
  EXPECT_EQ(cleaned, 1);
  EXPECT_RES(cuFails(), mcclUnhandledCudaError);
  EXPECT_RES(propagates(), mcclUnhandledCudaError);
  EXPECT_OK(passesInProgress());
  EXPECT_RES(pthreadFails(), mcclSystemError);
}

static void paramsReadOnce(void) {
  setenv("MCCL_IPC_TIMEOUT", "1234", 1);
  mcclParamResetAll();
  EXPECT_EQ(mcclParamIpcTimeout(), 1234);
  setenv("MCCL_IPC_TIMEOUT", "99", 1);
  EXPECT_EQ(mcclParamIpcTimeout(), 1234);  // cached: read once
  mcclParamResetAll();
  EXPECT_EQ(mcclParamIpcTimeout(), 99);
  setenv("MCCL_IPC_TIMEOUT", "12abc", 1);  // malformed: default, with a warning
  mcclParamResetAll();
  EXPECT_EQ(mcclParamIpcTimeout(), 30000);
  unsetenv("MCCL_IPC_TIMEOUT");
  mcclParamResetAll();
  EXPECT_EQ(mcclParamIpcTimeout(), 30000);
  EXPECT_EQ(strcmp(mcclParamIpcDir(), "/tmp"), 0);
}

// docs/parameters.md must be what mk/params-doc.sh makes of mccl_params.def.
static void paramsDocCurrent(void) {
  if (access("mk/params-doc.sh", X_OK) != 0) SKIP("run from the repository root (make test)");
  int rc = system("mk/params-doc.sh | cmp -s - docs/parameters.md");
  EXPECT_EQ(WEXITSTATUS(rc), 0);
}

// The /dev/shm probe counts a file no one holds (a leak) and leaves out one another live process holds (another
// run's segment, there only while its creator holds it); once that process is gone, a file it left counts.
static void shmCountSeesLeaksOnly(void) {
  const int base = mcclTestCountShm();
  EXPECT_GE(base, 0);
  char leaked[] = "/dev/shm/mccl-probeXXXXXX", held[] = "/dev/shm/mccl-probeXXXXXX";
  int fd = mkstemp(leaked);
  EXPECT_GE(fd, 0);
  if (fd >= 0) close(fd);
  EXPECT_EQ(mcclTestCountShm(), base + 1);
  unlink(leaked);  // at once: another run's probe would count it too
  int hold[2], name[2];  // the parent holds the child while `hold` is open; the child sends its file's name
  EXPECT_EQ(pipe(hold), 0);
  EXPECT_EQ(pipe(name), 0);
  pid_t child = fork();
  if (child == 0) {
    close(hold[1]);
    close(name[0]);
    char c;
    if (mkstemp(held) < 0 || write(name[1], held, sizeof(held)) != (ssize_t)sizeof(held)) _exit(1);
    while (read(hold[0], &c, 1) > 0) {
    }
    _exit(0);  // its file stays behind, no longer held
  }
  close(hold[0]);
  close(name[1]);
  EXPECT_EQ(read(name[0], held, sizeof(held)), (ssize_t)sizeof(held));
  close(name[0]);
  EXPECT_EQ(mcclTestCountShm(), base);  // the child's file is held by the child: not counted
  close(hold[1]);
  EXPECT_EQ(waitpid(child, NULL, 0), child);
  EXPECT_EQ(mcclTestCountShm(), base + 1);  // now no one holds it
  unlink(held);
  EXPECT_EQ(mcclTestCountShm(), base);
}

// This binary run again in a child, `ENV... BINARY 2>/dev/null AFTER` through the shell, its output to read
// (the self-check cases, the crash, the error strings); NULL if it cannot start.
static FILE* runSelf(const char* env, const char* after) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return NULL;
  exe[n] = '\0';
  char cmd[8192];
  snprintf(cmd, sizeof(cmd), "%s %s 2>/dev/null%s", env, exe, after);
  return popen(cmd, "r");
}

// Runs this binary's hidden self-check cases in a child and reads what the harness printed.
static void harnessOutput(void) {
  FILE* p = runSelf("MCCL_TEST_SEED=42 MCCL_HARNESS_SELFCHECK=1", "");
  EXPECT_TRUE(p != NULL);
  if (p == NULL) return;
  char line[1024];
  int sawPass = 0, sawFail = 0, sawSkip = 0, sawStub = 0, sawTotal = 0, sawSeed = 0;
  while (fgets(line, sizeof(line), p)) {
    if (strncmp(line, "PASS ", 5) == 0 && strstr(line, "selfcheckPass")) sawPass = 1;
    if (strncmp(line, "FAIL ", 5) == 0 && strstr(line, "test_common.c:") &&
        strstr(line, "expected 2 + 2 == 5 (5), got 4"))
      sawFail = 1;
    if (strncmp(line, "SKIP ", 5) == 0 && strstr(line, "(no hardware)")) sawSkip = 1;
    // A skip after a stub is a failure that names the exercise, never missing hardware.
    if (strncmp(line, "FAIL ", 5) == 0 && strstr(line, "selfcheckStubSkip") &&
        strstr(line, "not implemented yet: exercise 00.selfcheck") && strstr(line, "refused here"))
      sawStub = 1;
    if (strcmp(line, "1 passed, 2 failed, 1 skipped\n") == 0) sawTotal = 1;
    if (strstr(line, "seed 42")) sawSeed = 1;
  }
  int rc = pclose(p);
  EXPECT_EQ(sawPass, 1);
  EXPECT_EQ(sawFail, 1);
  EXPECT_EQ(sawSkip, 1);
  EXPECT_EQ(sawStub, 1);
  EXPECT_EQ(sawTotal, 1);
  EXPECT_EQ(sawSeed, 1);
  EXPECT_EQ(WEXITSTATUS(rc), 1);  // non-zero exit when a test failed
}

// The harness's crash report: a test that crashes is this test's FAIL, with the signal and its frames, and the
// process still dies of the signal (this binary, run again with MCCL_HARNESS_CRASH, runs selfcheckCrash).
// Sanitizer builds keep their own report (the harness installs nothing over their handlers).
static volatile uintptr_t nowhere = 8;  // an address no process maps, hidden from the compiler
static void selfcheckCrash(void) {
  *(volatile int*)nowhere = 1;
}

static void crashReported(void) {
  if (MCCL_TEST_UNDER_ASAN || MCCL_TEST_UNDER_TSAN) SKIP("a sanitizer reports the crash itself");
  FILE* p = runSelf("env -u MCCL_TEST_FILTER MCCL_HARNESS_CRASH=1", "; echo \"exit $?\"");
  EXPECT_TRUE(p != NULL);
  if (p == NULL) return;
  char line[1024];
  int sawFail = 0, frames = 0, sawExit = 0;
  while (fgets(line, sizeof(line), p)) {
    if (strncmp(line, "FAIL ", 5) == 0 && strstr(line, "test_common.selfcheckCrash (crashed: signal 11, SIGSEGV"))
      sawFail = 1;
    if (sawFail && strncmp(line, "#   ", 4) == 0) frames++;
    if (strcmp(line, "exit 139\n") == 0) sawExit = 1;  // 128 + SIGSEGV: the signal raised again
  }
  pclose(p);
  EXPECT_EQ(sawFail, 1);
  EXPECT_GT(frames, 2);
  EXPECT_EQ(sawExit, 1);
}

// What mcclGetErrorString returns in a fresh process under each MCCL_DEBUG (the level is read once per
// process): this binary, run again with MCCL_TEST_PRINT_ERROR_STRINGS, prints "code|string" lines.
static int errorStringsAt(const char* debug, char strings[mcclNumResults][256]) {
  char env[256];
  snprintf(env, sizeof(env), "%s%s MCCL_TEST_PRINT_ERROR_STRINGS=1", debug ? "MCCL_DEBUG=" : "env -u MCCL_DEBUG",
           debug ? debug : "");
  FILE* p = runSelf(env, "");
  if (p == NULL) return -1;
  char line[512];
  int got = 0;
  while (fgets(line, sizeof(line), p)) {
    int code = -1, off = 0;
    if (sscanf(line, "%d|%n", &code, &off) != 1 || code < 0 || code >= mcclNumResults) continue;
    line[strcspn(line, "\n")] = '\0';
    snprintf(strings[code], 256, "%s", line + off);
    got++;
  }
  return pclose(p) == 0 ? got : -1;
}

// "run with MCCL_DEBUG=X for details" only where level X would print more than the level in force.
static void errorStringHints(void) {
  static const struct {
    const char* debug;  // MCCL_DEBUG, NULL: unset (WARN)
    int warnHint;       // invalid argument / usage say "run with MCCL_DEBUG=WARN"
    int infoHint;       // cuda / system errors say "run with MCCL_DEBUG=INFO"
  } levels[] = {{NULL, 0, 1}, {"NONE", 1, 1}, {"VERSION", 1, 1}, {"WARN", 0, 1}, {"INFO", 0, 0}, {"TRACE", 0, 0}};
  for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
    char s[mcclNumResults][256];
    memset(s, 0, sizeof(s));
    EXPECT_EQ(errorStringsAt(levels[i].debug, s), mcclNumResults);
    const int w = levels[i].warnHint, f = levels[i].infoHint;
    EXPECT_EQ(strstr(s[mcclInvalidArgument], "run with MCCL_DEBUG=WARN") != NULL, w);
    EXPECT_EQ(strstr(s[mcclInvalidUsage], "run with MCCL_DEBUG=WARN") != NULL, w);
    EXPECT_EQ(strstr(s[mcclUnhandledCudaError], "run with MCCL_DEBUG=INFO") != NULL, f);
    EXPECT_EQ(strstr(s[mcclSystemError], "run with MCCL_DEBUG=INFO") != NULL, f);
    // Without the hint, the string says where the details already are.
    EXPECT_EQ(strstr(s[mcclInvalidArgument], "WARN line logged with it") != NULL, !w);
    EXPECT_EQ(strstr(s[mcclSystemError], "INFO lines logged with it") != NULL, !f);
    EXPECT_EQ(strncmp(s[mcclInvalidArgument], "invalid argument", 16), 0);
    EXPECT_EQ(strncmp(s[mcclInvalidUsage], "invalid usage", 13), 0);
    EXPECT_EQ(strncmp(s[mcclUnhandledCudaError], "unhandled cuda error", 20), 0);
    EXPECT_EQ(strncmp(s[mcclSystemError], "unhandled system error", 22), 0);
    EXPECT_EQ(strcmp(s[mcclSuccess], "no error"), 0);
    for (int r = 0; r < mcclNumResults; r++) {  // no other string names MCCL_DEBUG
      int hint = r == mcclInvalidArgument || r == mcclInvalidUsage     ? w
                 : r == mcclUnhandledCudaError || r == mcclSystemError ? f
                                                                       : 0;
      EXPECT_EQ(strstr(s[r], "MCCL_DEBUG") != NULL, hint);
    }
  }
}

static void seededRandomRepeats(void) {
  // Same seed and case index give the same stream: what makes a printed seed replayable.
  uint64_t a = mcclTestRand(), b = mcclTestRand();
  EXPECT_NE(a, b);
}

static void* quick(void* arg) {
  return arg;
}
static void* untilReleased(void* arg) {
  while (!__atomic_load_n((volatile int*)arg, __ATOMIC_ACQUIRE)) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

// A joined thread is never counted, even in the moment the kernel still lists it; a thread that ends
// on its own is waited for; one still running makes the wait time out with the count it saw.
static void threadCounts(void) {
  int th0 = mcclTestCountThreads();
  EXPECT_GT(th0, 0);
  int stray = 0;
  for (int i = 0; i < 2000; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, quick, NULL) != 0) break;
    pthread_join(t, NULL);
    if (mcclTestCountThreads() != th0) stray++;
  }
  EXPECT_EQ(stray, 0);
  static volatile int release;
  release = 0;
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  EXPECT_EQ(pthread_create(&t, &attr, untilReleased, (void*)&release), 0);
  pthread_attr_destroy(&attr);
  EXPECT_EQ(mcclTestCountThreads(), th0 + 1);
  EXPECT_EQ(mcclTestWaitThreads(th0, 20), th0 + 1);  // still running: times out, says what it saw
  __atomic_store_n(&release, 1, __ATOMIC_RELEASE);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
}

// The host's element conversions (mccl_elt.h), at the values whose bits are known: ties to even, the
// largest finite values, fp8's saturation, subnormals, 64-bit integers stored exactly.
static void elementConversions(void) {
  unsigned char buf[16];
  EXPECT_TRUE(mcclEltRound(mcclFloat16, 1.0 + ldexp(1.0, -11)) == 1.0);                       // tie: even
  EXPECT_TRUE(mcclEltRound(mcclFloat16, 1.0 + 3 * ldexp(1.0, -11)) == 1.0 + ldexp(1.0, -9));  // tie: even
  EXPECT_TRUE(mcclEltRound(mcclFloat16, 65520.0) == INFINITY);                                // past max
  EXPECT_TRUE(mcclEltRound(mcclFloat16, ldexp(1.0, -24)) == ldexp(1.0, -24));                 // subnormal
  EXPECT_TRUE(mcclEltRound(mcclBfloat16, 1.0 + ldexp(1.0, -8)) == 1.0);
  EXPECT_TRUE(mcclEltRound(mcclFloat8e4m3, 1000.0) == 448.0);  // saturates
  EXPECT_TRUE(mcclEltRound(mcclFloat8e5m2, -1e6) == -57344.0);
  EXPECT_TRUE(mcclEltRound(mcclFloat8e4m3, 0.3) == 0.3125);
  for (int t = 0; t < mcclNumTypes; t++) {  // a value every type holds survives a store and a load
    mcclEltSet((mcclDataType_t)t, buf, 1, 3.0);
    EXPECT_TRUE(mcclEltGet((mcclDataType_t)t, buf, 1) == 3.0);
  }
  mcclEltSetInt(mcclInt64, buf, 0, INT64_MIN + 1);
  EXPECT_TRUE(((int64_t*)buf)[0] == INT64_MIN + 1);
  mcclEltSetInt(mcclUint64, buf, 1, -1);
  EXPECT_TRUE(((uint64_t*)buf)[1] == UINT64_MAX);
  mcclEltSetInt(mcclUint8, buf, 3, -5);  // wraps, as the kernels' unsigned arithmetic
  EXPECT_EQ(buf[3], 251);
  mcclEltSetInt(mcclUint32, buf, 1, -1);
  EXPECT_TRUE(((uint32_t*)buf)[1] == UINT32_MAX);
  mcclEltSetInt(mcclFloat16, buf, 0, 2049);  // rounded: 2048 (ties to even)
  EXPECT_TRUE(mcclEltGet(mcclFloat16, buf, 0) == 2048.0);
  static const int bits[mcclNumTypes] = {0, 0, 0, 0, 0, 0, 10, 23, 52, 7, 3, 2};
  for (int t = 0; t < mcclNumTypes; t++) EXPECT_EQ(mcclEltMantBits((mcclDataType_t)t), bits[t]);
}

// Cases that exercise the harness itself; only harnessOutput runs them, in a child process.
static void selfcheckPass(void) { EXPECT_EQ(1 + 1, 2); }
static void selfcheckFail(void) { EXPECT_EQ(2 + 2, 5); }
static void selfcheckSkip(void) { SKIP("no hardware"); }
static void selfcheckStubSkip(void) {
  (void)mcclExerciseStub("00.selfcheck");
  SKIP("feature refused here");
}

// MCCL_EXERCISE_PROBE (a probe tree's switch): one id, a comma-separated list of them, or all; and the count
// of stubs reached, which the harness reads.
static void exerciseProbeAndStubCount(void) {
  unsetenv("MCCL_EXERCISE_PROBE");
  EXPECT_EQ(mcclExerciseProbe("01.a"), 0);
  setenv("MCCL_EXERCISE_PROBE", "01.a", 1);
  EXPECT_EQ(mcclExerciseProbe("01.a"), 1);
  EXPECT_EQ(mcclExerciseProbe("01.ab"), 0);
  setenv("MCCL_EXERCISE_PROBE", "01.b,01.abc,", 1);
  EXPECT_EQ(mcclExerciseProbe("01.a"), 0);
  EXPECT_EQ(mcclExerciseProbe("01.ab"), 0);
  EXPECT_EQ(mcclExerciseProbe("01.abc"), 1);
  EXPECT_EQ(mcclExerciseProbe("01.b"), 1);
  setenv("MCCL_EXERCISE_PROBE", "01.b,all", 1);
  EXPECT_EQ(mcclExerciseProbe("02.x"), 1);
  unsetenv("MCCL_EXERCISE_PROBE");
  const char* last = NULL;
  unsigned before = mcclExerciseStubsReached(NULL);
  EXPECT_RES(mcclExerciseStub("00.count"), mcclNotImplemented);
  EXPECT_EQ(mcclExerciseStubsReached(&last), before + 1);
  EXPECT_TRUE(last != NULL && strcmp(last, "00.count") == 0);
}

// mcclSocketSendAll / RecvAll: a message larger than the socket buffers moves whole while the other side
// drains it, and each way of ending is told apart: closed (with the bytes that came), timed out, aborted.
typedef struct {
  int fd;
  size_t n;
  unsigned char* buf;
  mcclSocketStatus st;
} sockSide;
static void* sockReceiver(void* p) {
  sockSide* a = p;
  a->st = mcclSocketRecvAll(a->fd, a->buf, a->n, mcclClockMs() + 30000, NULL, NULL);
  return NULL;
}
static void socketWholeMessages(void) {
  int sv[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const size_t n = 4u << 20;
  unsigned char* out = malloc(n);
  sockSide rx = {.fd = sv[1], .n = n, .buf = malloc(n)};
  EXPECT_TRUE(out != NULL && rx.buf != NULL);
  for (size_t i = 0; i < n; i++) out[i] = (unsigned char)(i * 131 + 7);
  pthread_t th;
  pthread_create(&th, NULL, sockReceiver, &rx);
  size_t done = 0;
  EXPECT_EQ(mcclSocketSendAll(sv[0], out, n, MCCL_SOCKET_NO_DEADLINE, NULL, &done), mcclSocketDone);
  pthread_join(th, NULL);
  EXPECT_EQ(done, n);
  EXPECT_EQ(rx.st, mcclSocketDone);
  EXPECT_EQ(memcmp(out, rx.buf, n), 0);
  // Nothing comes: a deadline 50 ms away passes; a raised abort flag ends the wait.
  uint64_t t0 = mcclClockMs();
  EXPECT_EQ(mcclSocketRecvAll(sv[1], rx.buf, 8, t0 + 50, NULL, &done), mcclSocketTimedOut);
  EXPECT_TRUE(mcclClockMs() - t0 >= 50 && done == 0);
  volatile uint32_t abortFlag = 1;
  EXPECT_EQ(mcclSocketRecvAll(sv[1], rx.buf, 8, MCCL_SOCKET_NO_DEADLINE, &abortFlag, &done), mcclSocketAborted);
  // Three bytes of eight, then the sender leaves: closed, and *done says how many came.
  EXPECT_EQ(mcclSocketSendAll(sv[0], out, 3, MCCL_SOCKET_NO_DEADLINE, NULL, &done), mcclSocketDone);
  close(sv[0]);
  EXPECT_EQ(mcclSocketRecvAll(sv[1], rx.buf, 8, mcclClockMs() + 30000, NULL, &done), mcclSocketClosed);
  EXPECT_EQ(done, 3u);
  EXPECT_EQ(mcclSocketRecvAll(sv[1], rx.buf, 8, mcclClockMs() + 30000, NULL, &done), mcclSocketClosed);
  EXPECT_EQ(done, 0u);
  // Sending to a closed peer is closed too, not a SIGPIPE.
  EXPECT_EQ(mcclSocketSendAll(sv[1], out, 8, MCCL_SOCKET_NO_DEADLINE, NULL, &done), mcclSocketClosed);
  close(sv[1]);
  free(out);
  free(rx.buf);
}

int main(int argc, char** argv) {
  static const mcclTestCase selfcheck[] = {MCCL_TEST_CASE(selfcheckPass), MCCL_TEST_CASE(selfcheckFail),
                                           MCCL_TEST_CASE(selfcheckSkip), MCCL_TEST_CASE(selfcheckStubSkip)};
  static const mcclTestCase cases[] = {MCCL_TEST_CASE(resultStrings),        MCCL_TEST_CASE(checkMacros),
                                       MCCL_TEST_CASE(paramsReadOnce),       MCCL_TEST_CASE(paramsDocCurrent),
                                       MCCL_TEST_CASE(errorStringHints),     MCCL_TEST_CASE(harnessOutput),
                                       MCCL_TEST_CASE(seededRandomRepeats),  MCCL_TEST_CASE(threadCounts),
                                       MCCL_TEST_CASE(elementConversions),   MCCL_TEST_CASE(exerciseProbeAndStubCount),
                                       MCCL_TEST_CASE(socketWholeMessages),  MCCL_TEST_CASE(crashReported),
                                       MCCL_TEST_CASE(shmCountSeesLeaksOnly)};
  if (getenv("MCCL_HARNESS_SELFCHECK")) return mcclTestMain(argc, argv, selfcheck, 4, NULL);
  if (getenv("MCCL_HARNESS_CRASH")) {  // crashReported's child
    static const mcclTestCase crash[] = {MCCL_TEST_CASE(selfcheckCrash)};
    return mcclTestMain(1, argv, crash, 1, NULL);
  }
  if (getenv("MCCL_TEST_PRINT_ERROR_STRINGS")) {  // errorStringHints' child
    for (int r = 0; r < mcclNumResults; r++) printf("%d|%s\n", r, mcclGetErrorString((mcclResult_t)r));
    return 0;
  }
  return mcclTestMain(argc, argv, cases, (int)(sizeof(cases) / sizeof(cases[0])), NULL);
}
