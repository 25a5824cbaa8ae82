// Lab 07: groups (NCCL 2.28.9 src/group.cc: ncclGroupStart / ncclGroupEnd / ncclGroupSimulateEnd,
// ncclGroupCommJoin, groupLaunch). A thread's group lists the communicators that have tasks; its
// outermost end runs them: every communicator's point-to-point peers connected (on a thread each when
// several must connect, since their ranks wait for each other), then each communicator's tasks planned
// and launched with its device current (plan.c).
#include <pthread.h>
#include <stdlib.h>
#include "enqueue_internal.h"
#include "mccl_checks.h"
#include "mccl_debug.h"

struct labGroup {
  int depth;
  mcclLabComm* comms;  // through planner.groupNext
  mcclResult_t error;  // a call's failure: the group's end runs nothing and returns it
  int dropped;         // a communicator was destroyed with tasks here: the end returns mcclInvalidUsage
};
static __thread struct labGroup group;
// Membership (planner.group, planner.groupNext) changes under this lock: a communicator may be
// destroyed from another thread than the one whose group holds it.
static pthread_mutex_t groupLock = PTHREAD_MUTEX_INITIALIZER;

int mcclLabGroupDepth(void) {
  return group.depth;
}

mcclResult_t mcclLabGroupStart(void) {
  group.depth++;
  return mcclSuccess;
}

void mcclLabGroupFail(mcclResult_t res) {
  if (group.depth > 0 && group.error == mcclSuccess) group.error = res;
}

mcclResult_t mcclLabGroupAdd(mcclLabComm* comm) {
  mcclResult_t res = mcclSuccess;
  pthread_mutex_lock(&groupLock);
  if (comm->planner.group == NULL) {
    comm->planner.group = &group;
    comm->planner.groupNext = group.comms;
    group.comms = comm;
  } else if (comm->planner.group != &group) {
    res = mcclInvalidUsage;
  }
  pthread_mutex_unlock(&groupLock);
  if (res != mcclSuccess)
    WARN("Invalid usage: rank %d's communicator already has tasks in another thread's open group", comm->rank);
  return res;
}

void mcclLabGroupForget(mcclLabComm* comm) {
  pthread_mutex_lock(&groupLock);
  struct labGroup* g = (struct labGroup*)comm->planner.group;
  if (g != NULL) {
    for (mcclLabComm** p = &g->comms; *p; p = &(*p)->planner.groupNext)
      if (*p == comm) {
        *p = comm->planner.groupNext;
        break;
      }
    comm->planner.group = NULL;
    comm->planner.groupNext = NULL;
    if (comm->planner.nTasks > 0) {
      WARN(
          "Invalid usage: rank %d's communicator was destroyed while an open group held %d of its tasks; that "
          "group's end runs its other communicators' tasks and returns this error",
          comm->rank, comm->planner.nTasks);
      g->dropped = 1;
    }
  }
  pthread_mutex_unlock(&groupLock);
}

// The group's communicators, detached from it (the group is empty again).
static mcclLabComm* takeComms(void) {
  pthread_mutex_lock(&groupLock);
  mcclLabComm* comms = group.comms;
  group.comms = NULL;
  for (mcclLabComm* c = comms; c; c = c->planner.groupNext) c->planner.group = NULL;
  pthread_mutex_unlock(&groupLock);
  return comms;
}

static int hasP2pTask(const mcclLabComm* comm) {
  for (const struct mcclLabTask* t = comm->planner.head; t; t = t->next)
    if (t->func == mcclFuncSend || t->func == mcclFuncRecv) return 1;
  return 0;
}

struct connectJob {
  mcclLabComm* comm;
  mcclResult_t res;
};
static void* connectThread(void* p) {
  struct connectJob* j = (struct connectJob*)p;
  j->res = cudaSetDevice(j->comm->cudaDev) == cudaSuccess ? mcclSuccess : mcclUnhandledCudaError;
  if (j->res == mcclSuccess) j->res = mcclLabConnectP2p(j->comm);
  return NULL;
}

// Connect the point-to-point peers of every communicator that has point-to-point tasks, when more than
// one has: each on its own thread (their ranks wait for each other's connections). A communicator whose
// connections fail keeps the error in *res[i] and runs nothing.
static void connectTogether(mcclLabComm** comms, int n, mcclResult_t* res) {
  int want = 0;
  for (int i = 0; i < n; i++) want += hasP2pTask(comms[i]);
  if (want < 2) return;  // one communicator connects in its own run (plan.c)
  struct connectJob* jobs = (struct connectJob*)calloc((size_t)n, sizeof(*jobs));
  pthread_t* th = (pthread_t*)calloc((size_t)n, sizeof(*th));
  int* started = (int*)calloc((size_t)n, sizeof(int));
  if (jobs == NULL || th == NULL || started == NULL) {
    WARN("Out of memory for the connections of a group of %d communicators", n);
    for (int i = 0; i < n; i++) res[i] = mcclSystemError;
  } else {
    for (int i = 0; i < n; i++) {
      if (!hasP2pTask(comms[i])) continue;
      jobs[i].comm = comms[i];
      if (pthread_create(&th[i], NULL, connectThread, &jobs[i]) != 0) {
        // The peers wait for this one until their timeout (MCCL_BOOTSTRAP_TIMEOUT) ends them.
        WARN("pthread_create failed for the connections of rank %d", comms[i]->rank);
        res[i] = mcclSystemError;
        continue;
      }
      started[i] = 1;
    }
    for (int i = 0; i < n; i++)
      if (started[i]) {
        pthread_join(th[i], NULL);
        res[i] = jobs[i].res;
      }
  }
  free(jobs);
  free(th);
  free(started);
}

// Run (or, with estimateUs, simulate) the tasks of the group's communicators.
static mcclResult_t groupEnd(float* estimateUs) {
  if (group.depth == 0) {
    WARN("Invalid usage: GroupEnd without GroupStart in this thread");
    return mcclInvalidUsage;
  }
  if (--group.depth > 0) return mcclSuccess;
  mcclLabComm* list = takeComms();
  mcclResult_t err = group.error;
  const int dropped = group.dropped;
  group.error = mcclSuccess;
  group.dropped = 0;
  int n = 0;
  for (mcclLabComm* c = list; c; c = c->planner.groupNext) n++;
  mcclLabComm** comms = (mcclLabComm**)calloc((size_t)(n ? n : 1), sizeof(*comms));
  mcclResult_t* res = (mcclResult_t*)calloc((size_t)(n ? n : 1), sizeof(*res));
  if (comms == NULL || res == NULL) {
    WARN("Out of memory ending a group of %d communicators", n);
    err = mcclSystemError;
  }
  int k = 0;
  for (mcclLabComm *c = list, *next; c; c = next) {
    next = c->planner.groupNext;
    c->planner.groupNext = NULL;
    if (comms)
      comms[k++] = c;
    else
      mcclLabTasksDrop(c);
  }
  if (err != mcclSuccess) {  // a call of the group failed: nothing of it runs (NCCL's groupCleanup)
    for (int i = 0; comms && i < n; i++) mcclLabTasksDrop(comms[i]);
    free(comms);
    free(res);
    return err;
  }
  int saved = -1;
  if (cudaGetDevice(&saved) != cudaSuccess) saved = -1;
  if (estimateUs == NULL) connectTogether(comms, n, res);
  for (int i = 0; i < n; i++) {
    if (res[i] == mcclSuccess) {
      res[i] = cudaSetDevice(comms[i]->cudaDev) == cudaSuccess ? mcclSuccess : mcclUnhandledCudaError;
      // The estimate: the longest communicator's (each runs its own tasks, the communicators at once).
      float one = 0;
      if (res[i] == mcclSuccess) res[i] = mcclLabRunTasks(comms[i], estimateUs ? &one : NULL);
      if (estimateUs && one > *estimateUs) *estimateUs = one;
    }
    if (res[i] != mcclSuccess) mcclLabTasksDrop(comms[i]);
    if (res[i] != mcclSuccess && err == mcclSuccess) err = res[i];
  }
  if (saved >= 0) cudaSetDevice(saved);
  free(comms);
  free(res);
  return err != mcclSuccess ? err : dropped ? mcclInvalidUsage : mcclSuccess;
}

mcclResult_t mcclLabGroupEnd(void) {
  return groupEnd(NULL);
}

mcclResult_t mcclLabGroupSimulateEnd(float* estimatedTimeUs) {
  if (estimatedTimeUs == NULL) {
    WARN("Invalid argument: GroupSimulateEnd: estimatedTimeUs is NULL");
    if (group.depth > 0) group.depth--;
    if (group.depth == 0) {
      for (mcclLabComm* c = takeComms(); c; c = c->planner.groupNext) mcclLabTasksDrop(c);
      group.error = mcclSuccess;
      group.dropped = 0;
    }
    return mcclInvalidArgument;
  }
  *estimatedTimeUs = 0;
  return groupEnd(estimatedTimeUs);
}
