// final/: groups (NCCL's src/group.cc, in small). Between mcclGroupStart and the outermost
// mcclGroupEnd a thread's collective calls are recorded; mcclGroupEnd then runs them: the blocking,
// collective ones (communicator creation, window registration) one thread per call, since the
// ranks wait for each other; then the collectives, launched in call order (launches never block);
// then, as NCCL schedules a plan's point-to-point tasks after its collectives, each communicator's
// sends and receives, to any peers, handed together to lab 07's mcclLabSendRecv (one thread per
// communicator when several have some: connecting new peers waits for the peers' matching calls).
// A call outside a group is a group of one, as in NCCL.
#include <pthread.h>
#include <stdlib.h>
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "minccl_internal.h"

enum groupOpKind { GROUP_INIT, GROUP_WINDOW, GROUP_CALL, GROUP_P2P };

struct groupOp {
  enum groupOpKind kind;
  struct mcclComm* comm;
  // GROUP_WINDOW
  void* buff;
  size_t size;
  mcclWindow_t* win;
  // GROUP_CALL, GROUP_P2P (a send or a receive)
  struct mcclCall call;
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
  return mcclSuccess;
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
  struct groupOp op = {.kind = GROUP_INIT, .comm = comm};
  return record(&op);
}

mcclResult_t mcclGroupRecordWindow(struct mcclComm* comm, void* buff, size_t size, mcclWindow_t* win) {
  struct groupOp op = {.kind = GROUP_WINDOW, .comm = comm, .buff = buff, .size = size, .win = win};
  return record(&op);
}

mcclResult_t mcclGroupRecordCall(const struct mcclCall* call) {
  const int p2p = call->kind == MCCL_CALL_SEND || call->kind == MCCL_CALL_RECV;
  struct groupOp o = {.kind = p2p ? GROUP_P2P : GROUP_CALL, .comm = call->comm, .call = *call};
  return record(&o);
}

// One communicator's sends and receives, in call order, in one lab 07 call; the result goes to its first op.
static void runP2p(struct groupOp* ops, struct mcclComm* comm) {
  int n = 0;
  struct groupOp* first = NULL;
  for (struct groupOp* o = ops; o; o = o->next)
    if (o->kind == GROUP_P2P && o->comm == comm) {
      if (!first) first = o;
      n++;
    }
  struct mcclCall* calls = (struct mcclCall*)malloc((size_t)n * sizeof(*calls));
  if (calls == NULL) {
    WARN("Out of memory for %d grouped sends and receives", n);
    first->res = mcclSystemError;
    return;
  }
  int k = 0;
  for (struct groupOp* o = ops; o; o = o->next)
    if (o->kind == GROUP_P2P && o->comm == comm) calls[k++] = o->call;
  first->res = mcclSendRecvNow(comm, calls, n);
  free(calls);
}

// One communicator's recorded ops of one kind, in call order (a communicator's collectives must
// reach every rank in the same order, so they never run side by side).
struct commRun {
  struct groupOp* ops;
  enum groupOpKind kind;
  struct mcclComm* comm;
};

static void* runComm(void* p) {
  struct commRun* cr = (struct commRun*)p;
  for (struct groupOp* o = cr->ops; o; o = o->next) {
    if (o->kind != cr->kind || o->comm != cr->comm) continue;
    if (o->kind == GROUP_P2P) {
      runP2p(cr->ops, cr->comm);
      break;
    }
    if (o->kind == GROUP_INIT)
      o->res = mcclCommInitDeferred(o->comm);
    else
      o->res = mcclWindowRegisterNow(o->comm, o->buff, o->size, o->win);
  }
  return NULL;
}

// Run the recorded ops of `kind`: one thread per communicator, all at once, since the ranks wait
// for each other (one communicator alone runs on this thread).
static void runTogether(struct groupOp* ops, enum groupOpKind kind) {
  int n = 0;
  for (struct groupOp* o = ops; o; o = o->next) {
    if (o->kind != kind) continue;
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
    if (o->kind != kind) continue;
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

mcclResult_t mcclGroupEnd(void) {
  if (groupDepth == 0) {
    WARN("Invalid usage: mcclGroupEnd without mcclGroupStart in this thread");
    return mcclInvalidUsage;
  }
  if (--groupDepth > 0) return mcclSuccess;
  struct groupOp* ops = groupHead;
  groupHead = groupTail = NULL;
  mcclResult_t res = mcclSuccess;
  runTogether(ops, GROUP_INIT);
  runTogether(ops, GROUP_WINDOW);
  for (struct groupOp* o = ops; o; o = o->next)
    if (o->kind == GROUP_CALL) o->res = mcclCallNow(&o->call);
  runTogether(ops, GROUP_P2P);
  while (ops) {
    struct groupOp* o = ops;
    ops = o->next;
    if (o->res != mcclSuccess && res == mcclSuccess) res = o->res;
    free(o);
  }
  return res;
}
