// Forked peers that end together: the child dies with its parent (PR_SET_PDEATHSIG), a failed child
// aborts the parent's waits (a watcher thread raises the abort flag), a failed parent kills the
// child. mpirun gives MPI ranks the same guarantee; demos and tests that fork need it too, or a
// "no timeout" wait (MCCL_*_TIMEOUT=0, as under `make gdb`) becomes a wait for a dead peer.
#include "mccl_fork.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mccl_checks.h"
#include "mccl_debug.h"

pid_t mcclForkChild(void) {
  pid_t parent = getpid();
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
      fprintf(stderr, "mcclForkChild: prctl(PR_SET_PDEATHSIG) failed: %s\n", strerror(errno));
      _exit(127);
    }
    // The parent may have died between fork() and prctl(): then no signal will ever come.
    if (getppid() != parent) _exit(127);
  }
  return pid;
}

struct mcclChildWatch {
  pid_t pid;
  volatile uint32_t* abortFlag;
  int stop;  // atomic: the owner asks the thread to return
  pthread_t thread;
};

static void* watchMain(void* arg) {
  struct mcclChildWatch* w = arg;
  while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    // WNOWAIT: look, but leave the child for mcclChildWatchEnd to reap.
    if (waitid(P_PID, (id_t)w->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      break;  // no such child any more: someone else reaped it
    }
    if (si.si_pid == w->pid) {
      if (si.si_code != CLD_EXITED || si.si_status != 0) {
        if (si.si_code == CLD_EXITED)
          WARN("Peer process %d exited with status %d: aborting this process's waits", (int)w->pid, si.si_status);
        else
          WARN("Peer process %d was killed by signal %d (%s): aborting this process's waits", (int)w->pid,
               si.si_status, strsignal(si.si_status));
        __atomic_store_n(w->abortFlag, 1, __ATOMIC_RELEASE);
      }
      break;
    }
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

mcclResult_t mcclChildWatchStart(pid_t child, volatile uint32_t* abortFlag, mcclChildWatch** watch) {
  MCCL_ARGCHECK(child > 0, "mcclChildWatchStart: child pid %d is not a child's pid", (int)child);
  MCCL_ARGCHECK(abortFlag != NULL, "mcclChildWatchStart: abortFlag is NULL");
  MCCL_ARGCHECK(watch != NULL, "mcclChildWatchStart: watch is NULL");
  struct mcclChildWatch* w = calloc(1, sizeof(*w));
  if (w == NULL) {
    WARN("mcclChildWatchStart: out of memory");
    return mcclSystemError;
  }
  w->pid = child;
  w->abortFlag = abortFlag;
  int err = pthread_create(&w->thread, NULL, watchMain, w);
  if (err != 0) {
    WARN("mcclChildWatchStart: pthread_create failed: %s", strerror(err));
    free(w);
    return mcclSystemError;
  }
  *watch = w;
  return mcclSuccess;
}

mcclResult_t mcclChildWatchEnd(mcclChildWatch* watch, int selfFailed, int* status) {
  MCCL_ARGCHECK(watch != NULL, "mcclChildWatchEnd: watch is NULL");
  // Stop the watcher first: a child we kill below is not a failure to report.
  __atomic_store_n(&watch->stop, 1, __ATOMIC_RELEASE);
  pthread_join(watch->thread, NULL);
  if (selfFailed) kill(watch->pid, SIGKILL);  // it may wait for us forever: we are not coming
  int st = 0;
  pid_t r;
  while ((r = waitpid(watch->pid, &st, 0)) < 0 && errno == EINTR) {
  }
  int err = errno;
  pid_t pid = watch->pid;
  free(watch);
  if (r != pid) {
    WARN("mcclChildWatchEnd: waitpid(%d) failed: %s", (int)pid, strerror(err));
    return mcclSystemError;
  }
  if (status) *status = st;
  return mcclSuccess;
}
