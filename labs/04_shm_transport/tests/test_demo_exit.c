// The lab 04 demo ends when either side fails, also with its timeouts off (MCCL_*_TIMEOUT=0, as
// under `make gdb`): an error on one side must end both processes promptly, never leave one
// waiting for (or retrying) a peer that is gone. It once hung forever with MCCL_BUFFSIZE=1000: the
// receiver failed and waited for the sender, which retried its socket send to the receiver.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "mccl_test.h"
#include "mccl_utils.h"

// The demo built beside this test (build/<backend>/bin/04_shm_transport/demo).
static int demoPath(char* out, size_t n) {
  char self[PATH_MAX];
  ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (k <= 0) return -1;
  self[k] = '\0';
  char* slash = strrchr(self, '/');
  if (slash == NULL) return -1;
  *slash = '\0';
  snprintf(out, n, "%s/demo", self);
  return access(out, X_OK);
}

// Runs the demo in its own process group with `extraEnv`; returns its wait status, or -1 if it
// had to be killed after limitMs. *groupLeft: some process of its group outlived it by 1 s.
static int runDemo(const char* path, const char* extraEnv, int limitMs, int* groupLeft) {
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    setenv("MCCL_SHM_TIMEOUT", "0", 1);
    setenv("MCCL_IPC_TIMEOUT", "0", 1);
    putenv((char*)extraEnv);
    execl(path, "demo", (char*)NULL);
    _exit(127);
  }
  setpgid(pid, pid);
  uint64_t t0 = mcclClockMs();
  int st = 0;
  pid_t r = 0;
  while ((r = waitpid(pid, &st, WNOHANG)) == 0 && mcclClockMs() - t0 < (uint64_t)limitMs) mcclSleepMs(10);
  if (r != pid) {
    kill(-pid, SIGKILL);
    waitpid(pid, &st, 0);
    st = -1;
  }
  t0 = mcclClockMs();
  while (kill(-pid, 0) == 0 && mcclClockMs() - t0 < 1000) mcclSleepMs(10);
  *groupLeft = kill(-pid, 0) == 0;
  if (*groupLeft) kill(-pid, SIGKILL);
  return st;
}

static void bufferTooSmallEndsBoth(void) {
  char path[PATH_MAX];
  if (demoPath(path, sizeof(path)) != 0) SKIP("no demo binary beside this test (make all)");
  int left = 0;
  long long t0 = mcclClockMs();
  int st = runDemo(path, "MCCL_BUFFSIZE=1000", 15000, &left);
  EXPECT_NE(st, -1);  // -1: still running after 15 s
  EXPECT_TRUE(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 0);
  EXPECT_LT(mcclClockMs() - t0, 10000);
  EXPECT_EQ(left, 0);
}

static void normalRunPasses(void) {
  char path[PATH_MAX];
  if (demoPath(path, sizeof(path)) != 0) SKIP("no demo binary beside this test (make all)");
  int left = 0;
  int st = runDemo(path, "MCCL_DEBUG=WARN", 60000, &left);
  EXPECT_TRUE(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  EXPECT_EQ(left, 0);
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(bufferTooSmallEndsBoth), MCCL_TEST_CASE(normalRunPasses))
