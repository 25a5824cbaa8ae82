// mccl_fork.h: a forked peer never outlives its parent, a failed child aborts the parent's waits,
// a failed parent kills the child. Without these, a demo or test run with its timeouts off (as
// under `make gdb`) waits forever for a peer that is gone, or leaves a child spinning after gdb quits.
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "mccl_fork.h"
#include "mccl_test.h"
#include "mccl_utils.h"

// Gone, or a zombie nobody has reaped yet (it no longer runs): both count as dead.
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

// The child of a killed parent dies within a second, even when it spins (as lab 05's rank 1 did
// at 130% CPU after gdb quit) or sleeps.
static void childDiesWithParent(void) {
  for (int spin = 0; spin < 2; spin++) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    pid_t parent = fork();  // plain fork: this is the process we kill, like gdb killing a demo
    EXPECT_GE(parent, 0);
    if (parent == 0) {
      close(fds[0]);
      pid_t c = mcclForkChild();
      if (c == 0) {
        for (volatile unsigned long i = 0;; i++)
          if (!spin) pause();
      }
      if (write(fds[1], &c, sizeof(c)) != (ssize_t)sizeof(c)) _exit(1);
      for (;;) pause();
    }
    close(fds[1]);
    pid_t child = -1;
    EXPECT_EQ(read(fds[0], &child, sizeof(child)), (ssize_t)sizeof(child));
    close(fds[0]);
    EXPECT_GT(child, 0);
    EXPECT_FALSE(isDead(child));
    EXPECT_EQ(kill(parent, SIGKILL), 0);
    EXPECT_EQ(waitpid(parent, NULL, 0), parent);
    long long t0 = mcclClockMs();
    while (!isDead(child) && mcclClockMs() - t0 < 5000) mcclSleepMs(10);
    int dead = isDead(child);
    if (!dead) kill(child, SIGKILL);
    EXPECT_TRUE(dead);
    EXPECT_LT(mcclClockMs() - t0, 1000);
  }
}

// A child that fails raises the abort flag; the status is the child's.
static void failedChildAborts(void) {
  volatile uint32_t abortFlag = 0;
  pid_t c = mcclForkChild();
  EXPECT_GE(c, 0);
  if (c == 0) _exit(3);
  mcclChildWatch* w = NULL;
  EXPECT_OK(mcclChildWatchStart(c, &abortFlag, &w));
  long long t0 = mcclClockMs();
  while (!__atomic_load_n(&abortFlag, __ATOMIC_ACQUIRE) && mcclClockMs() - t0 < 5000) mcclSleepMs(5);
  EXPECT_EQ(abortFlag, 1u);
  EXPECT_LT(mcclClockMs() - t0, 1000);
  int st = 0;
  EXPECT_OK(mcclChildWatchEnd(w, 0, &st));
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 3);

  // killed by a signal: also a failure
  abortFlag = 0;
  c = mcclForkChild();
  if (c == 0) for (;;) pause();
  EXPECT_OK(mcclChildWatchStart(c, &abortFlag, &w));
  kill(c, SIGTERM);
  t0 = mcclClockMs();
  while (!__atomic_load_n(&abortFlag, __ATOMIC_ACQUIRE) && mcclClockMs() - t0 < 5000) mcclSleepMs(5);
  EXPECT_EQ(abortFlag, 1u);
  EXPECT_OK(mcclChildWatchEnd(w, 0, &st));
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
}

// A child that succeeds leaves the flag alone.
static void successfulChildQuiet(void) {
  volatile uint32_t abortFlag = 0;
  pid_t c = mcclForkChild();
  if (c == 0) _exit(0);
  mcclChildWatch* w = NULL;
  EXPECT_OK(mcclChildWatchStart(c, &abortFlag, &w));
  mcclSleepMs(100);  // the watcher has seen the exit by now
  int st = -1;
  EXPECT_OK(mcclChildWatchEnd(w, 0, &st));
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  EXPECT_EQ(abortFlag, 0u);
}

// A parent that failed does not wait for a child that waits for it: the child is killed.
static void failedParentKillsChild(void) {
  volatile uint32_t abortFlag = 0;
  pid_t c = mcclForkChild();
  if (c == 0) for (;;) pause();
  mcclChildWatch* w = NULL;
  EXPECT_OK(mcclChildWatchStart(c, &abortFlag, &w));
  long long t0 = mcclClockMs();
  int st = 0;
  EXPECT_OK(mcclChildWatchEnd(w, 1, &st));
  EXPECT_LT(mcclClockMs() - t0, 1000);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  EXPECT_EQ(abortFlag, 0u);  // we killed it: nobody else's failure to report
}

static void badArguments(void) {
  volatile uint32_t f = 0;
  mcclChildWatch* w = NULL;
  EXPECT_RES(mcclChildWatchStart(0, &f, &w), mcclInvalidArgument);
  EXPECT_RES(mcclChildWatchStart(-5, &f, &w), mcclInvalidArgument);
  EXPECT_RES(mcclChildWatchStart(getpid(), NULL, &w), mcclInvalidArgument);
  EXPECT_RES(mcclChildWatchStart(getpid(), &f, NULL), mcclInvalidArgument);
  EXPECT_TRUE(w == NULL);
  EXPECT_RES(mcclChildWatchEnd(NULL, 0, NULL), mcclInvalidArgument);
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(childDiesWithParent), MCCL_TEST_CASE(failedChildAborts),
               MCCL_TEST_CASE(successfulChildQuiet), MCCL_TEST_CASE(failedParentKillsChild),
               MCCL_TEST_CASE(badArguments))
