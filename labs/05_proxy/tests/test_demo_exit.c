// Killing the lab 05 demo (as quitting gdb does) kills its forked rank 1 too. Before mccl_fork.h
// the child kept running at 130% CPU, forever with the timeouts off (MCCL_*_TIMEOUT=0, as under
// `make gdb`).
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

// The demo built beside this test (build/<backend>/bin/05_proxy/demo).
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

// Gone, or a zombie nobody reaped yet: both no longer run.
static int isDead(pid_t pid) {
  char path[64], buf[256];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return 1;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* close = strrchr(buf, ')');
  return close != NULL && (close[2] == 'Z' || close[2] == 'X');
}

static pid_t firstChild(pid_t pid) {
  char path[96];
  snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return -1;
  int c = -1;
  if (fscanf(f, "%d", &c) != 1) c = -1;
  fclose(f);
  return c;
}

static void killedDemoTakesItsChild(void) {
  char path[PATH_MAX];
  if (demoPath(path, sizeof(path)) != 0) SKIP("no demo binary beside this test (make all)");
  for (int attempt = 0; attempt < 5; attempt++) {
    pid_t demo = fork();
    if (demo == 0) {
      int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      dup2(null, 2);
      setenv("MCCL_BOOTSTRAP_TIMEOUT", "0", 1);
      setenv("MCCL_PROXY_TIMEOUT", "0", 1);
      setenv("MCCL_SHM_TIMEOUT", "0", 1);
      setenv("MCCL_IPC_TIMEOUT", "0", 1);
      execl(path, "demo", (char*)NULL);
      _exit(127);
    }
    EXPECT_GT(demo, 0);
    pid_t child = -1;
    long long t0 = mcclClockMs();
    while ((child = firstChild(demo)) <= 0 && mcclClockMs() - t0 < 10000 && waitpid(demo, NULL, WNOHANG) == 0) {
    }
    if (child <= 0) {  // it finished before we saw its child: try again
      waitpid(demo, NULL, 0);
      continue;
    }
    EXPECT_EQ(kill(demo, SIGKILL), 0);  // what gdb does on quit
    EXPECT_EQ(waitpid(demo, NULL, 0), demo);
    t0 = mcclClockMs();
    while (!isDead(child) && mcclClockMs() - t0 < 5000) mcclSleepMs(10);
    int dead = isDead(child);
    if (!dead) kill(child, SIGKILL);
    EXPECT_TRUE(dead);
    EXPECT_LT(mcclClockMs() - t0, 1000);
    return;
  }
  SKIP("the demo finished five times before its child could be seen");
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(killedDemoTakesItsChild))
