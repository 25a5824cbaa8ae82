// final/: groups (NCCL's src/group.cc, in small). The collectives and point-to-point calls of a group
// are lab 07's tasks, kept by lab 07's group (mcclLabGroupStart / End), which mcclGroupStart and
// mcclGroupEnd open and close. What lab 07 does not know is kept here: the blocking, collective calls
// of a group (communicator creation, window registration, device communicator creation), run at the
// outermost mcclGroupEnd one thread per communicator, since the ranks wait for each other, before lab 07's
// group end runs the tasks.
// A call outside a group is a group of one, as in NCCL.
#include <pthread.h>
#include <stdlib.h>
#include "mccl_checks.h"
#include "mccl_collectives.h"
#include "mccl_debug.h"
#include "minccl_internal.h"

enum groupOpKind { GROUP_INIT, GROUP_WINDOW, GROUP_DEVCOMM, GROUP_USE };

struct groupOp {
  enum groupOpKind kind;
  struct mcclComm* comm;  // by pointer and uid: found gone at the group's end if destroyed since
  uint64_t uid;
  int rank;     // the communicator's, for the message when it is gone
  int entered;  // the group's end entered it (mcclCommEnter), and leaves it
  // GROUP_WINDOW
  void* buff;
  size_t size;
  mcclWindow_t* win;
  // GROUP_DEVCOMM
  mcclDevCommRequirements* reqs;  // the group's copy
  mcclDevComm* devComm;
  mcclResult_t res;
  struct groupOp* next;
};

static __thread int groupDepth;
static __thread struct groupOp *groupHead, *groupTail;

int mcclGroupActive(void) {
  return groupDepth > 0;
}

mcclResult_t mcclGroupStart(void) {
  groupDepth++;
  return mcclLabGroupStart();
}

static mcclResult_t record(struct groupOp* proto) {
  struct groupOp* op = (struct groupOp*)malloc(sizeof(*op));
  if (op == NULL) {
    WARN("Out of memory recording a grouped call");
    return mcclSystemError;
  }
  *op = *proto;
  op->next = NULL;
  if (groupTail)
    groupTail->next = op;
  else
    groupHead = op;
  groupTail = op;
  return mcclSuccess;
}

mcclResult_t mcclGroupRecordInit(struct mcclComm* comm) {
  struct groupOp op = {.kind = GROUP_INIT, .comm = comm, .uid = comm->uid, .rank = comm->rank};
  return record(&op);
}

mcclResult_t mcclGroupRecordWindow(struct mcclComm* comm, void* buff, size_t size, mcclWindow_t* win) {
  struct groupOp op = {
      .kind = GROUP_WINDOW, .comm = comm, .uid = comm->uid, .rank = comm->rank, .buff = buff, .size = size, .win = win};
  return record(&op);
}

mcclResult_t mcclGroupRecordDevComm(struct mcclComm* comm, mcclDevCommRequirements* reqs, mcclDevComm* devComm) {
  struct groupOp op = {
      .kind = GROUP_DEVCOMM, .comm = comm, .uid = comm->uid, .rank = comm->rank, .reqs = reqs, .devComm = devComm};
  mcclResult_t res = record(&op);
  if (res != mcclSuccess) mcclDevReqsFree(reqs);
  return res;
}

mcclResult_t mcclGroupRecordUse(struct mcclComm* comm) {
  for (struct groupOp* o = groupHead; o; o = o->next)
    if (o->comm == comm && o->uid == comm->uid) return mcclSuccess;  // once per communicator is enough
  struct groupOp op = {.kind = GROUP_USE, .comm = comm, .uid = comm->uid, .rank = comm->rank};
  return record(&op);
}

// The first record of o's communicator in the group.
static const struct groupOp* firstRecord(const struct groupOp* ops, const struct groupOp* o) {
  for (const struct groupOp* q = ops; q != o; q = q->next)
    if (q->comm == o->comm && q->uid == o->uid) return q;
  return o;
}

// One communicator's recorded ops of one kind, in call order.
struct commRun {
  struct groupOp* ops;
  enum groupOpKind kind;
  struct mcclComm* comm;
};

static void* runComm(void* p) {
  struct commRun* cr = (struct commRun*)p;
  for (struct groupOp* o = cr->ops; o; o = o->next) {
    if (o->kind != cr->kind || o->comm != cr->comm || !o->entered) continue;
    if (o->kind == GROUP_INIT)
      o->res = mcclCommInitDeferred(o->comm);
    else if (o->kind == GROUP_WINDOW)
      o->res = mcclWindowRegisterNow(o->comm, o->buff, o->size, o->win);
    else
      o->res = mcclDevCommCreateNow(o->comm, o->reqs, o->devComm);
  }
  return NULL;
}

// Run the recorded ops of `kind`: one thread per communicator, all at once, since the ranks wait
// for each other (one communicator alone runs on this thread).
static void runTogether(struct groupOp* ops, enum groupOpKind kind) {
  int n = 0;
  for (struct groupOp* o = ops; o; o = o->next) {
    if (o->kind != kind || !o->entered) continue;
    int seen = 0;
    for (struct groupOp* q = ops; q != o && !seen; q = q->next) seen = q->kind == kind && q->comm == o->comm;
    n += !seen;
  }
  if (n == 0) return;
  struct commRun* runs = (struct commRun*)calloc((size_t)n, sizeof(*runs));
  pthread_t* th = (pthread_t*)calloc((size_t)n, sizeof(pthread_t));
  int saved = 0, k = 0;
  if (cudaGetDevice(&saved) != cudaSuccess) saved = -1;
  for (struct groupOp* o = ops; o; o = o->next) {
    if (o->kind != kind || !o->entered) continue;
    int seen = 0;
    for (int i = 0; i < k && !seen; i++) seen = runs && runs[i].comm == o->comm;
    if (seen) continue;
    if (runs == NULL || th == NULL) {
      WARN("Out of memory for the threads of a group of %d communicators", n);
      o->res = mcclSystemError;
      continue;
    }
    runs[k] = (struct commRun){ops, kind, o->comm};
    if (n == 1) {
      runComm(&runs[k]);
    } else if (pthread_create(&th[k], NULL, runComm, &runs[k]) != 0) {
      // The peers wait for this one until their timeout (MCCL_BOOTSTRAP_TIMEOUT) ends them.
      WARN("pthread_create failed for the grouped calls of rank %d", o->comm->rank);
      o->res = mcclSystemError;
      runs[k].comm = NULL;
      th[k] = 0;
    }
    k++;
  }
  for (int i = 0; i < k; i++)
    if (n > 1 && runs[i].comm) pthread_join(th[i], NULL);
  free(runs);
  free(th);
  if (saved >= 0) cudaSetDevice(saved);
}

// End a group: the outermost end runs the records (then frees them), and lab 07's group end runs the
// tasks (or, with simInfo, plans them for the estimate only).
static mcclResult_t groupEnd(mcclSimInfo_t* simInfo) {
  if (groupDepth == 0) {
    WARN("Invalid usage: mcclGroupEnd without mcclGroupStart in this thread");
    return mcclInvalidUsage;
  }
  if (--groupDepth > 0) return mcclLabGroupEnd();
  struct groupOp* ops = groupHead;
  groupHead = groupTail = NULL;
  mcclResult_t res = mcclSuccess;
  // Enter every communicator the group names, for as long as its end runs: one destroyed or aborted from
  // any thread since is found gone here (its work fails, the rest runs), and one destroyed from another
  // thread from now on waits for this end to leave it. A communicator's first record enters it.
  for (struct groupOp* o = ops; o; o = o->next) {
    const struct groupOp* first = firstRecord(ops, o);
    if (first != o) {  // the communicator's first record entered it (or found it gone, and said so)
      o->entered = first->entered;
      if (!first->entered) o->res = mcclInvalidUsage;
    } else if (mcclCommEnter(o->comm, o->uid, "mcclGroupEnd") != mcclSuccess) {
      WARN("Invalid usage: rank %d's communicator was destroyed or aborted while this group held its %s", o->rank,
           o->kind == GROUP_INIT      ? "creation"
           : o->kind == GROUP_WINDOW  ? "window registration"
           : o->kind == GROUP_DEVCOMM ? "device communicator creation"
                                      : "calls");
      o->res = mcclInvalidUsage;
    } else {
      o->entered = 1;
    }
  }
  runTogether(ops, GROUP_INIT);
  runTogether(ops, GROUP_WINDOW);
  runTogether(ops, GROUP_DEVCOMM);
  float estimate = 0;
  mcclResult_t tasks = simInfo ? mcclLabGroupSimulateEnd(&estimate) : mcclLabGroupEnd();
  if (simInfo && tasks == mcclSuccess) simInfo->estimatedTime = estimate;
  for (struct groupOp* o = ops; o; o = o->next)  // leave each communicator once, at its first record
    if (o->entered && firstRecord(ops, o) == o) mcclCommLeave(o->comm);
  while (ops) {
    struct groupOp* o = ops;
    ops = o->next;
    if (o->res != mcclSuccess && res == mcclSuccess) res = o->res;
    if (o->kind == GROUP_DEVCOMM && o->res == mcclSuccess) mcclDevReqsDeliver(o->reqs);
    mcclDevReqsFree(o->reqs);
    free(o);
  }
  return res != mcclSuccess ? res : tasks;
}

mcclResult_t mcclGroupEnd(void) {
  return groupEnd(NULL);
}

mcclResult_t mcclGroupSimulateEnd(mcclSimInfo_t* simInfo) {
  if (groupDepth > 0 &&
      (simInfo == NULL || simInfo->size != sizeof(mcclSimInfo_t) || simInfo->magic != MCCL_SIM_INFO_MAGIC)) {
    WARN(
        "Invalid argument: mcclGroupSimulateEnd: simInfo %p is NULL or not from MCCL_SIM_INFO_INITIALIZER (size %zu, "
        "magic 0x%x)",
        (void*)simInfo, simInfo ? simInfo->size : (size_t)0, simInfo ? simInfo->magic : 0u);
    // The group ends as one whose call failed: its creations and registrations run, none of its calls.
    mcclLabGroupFail(mcclInvalidArgument);
    const mcclResult_t res = groupEnd(NULL);
    return res == mcclSuccess ? mcclInvalidArgument : res;
  }
  return groupEnd(simInfo);
}
