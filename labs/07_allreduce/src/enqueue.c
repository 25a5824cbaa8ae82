// Lab 07: calls become tasks (NCCL 2.28.9 src/collectives.cc for the calls, src/enqueue.cc
// ncclEnqueueCheck -> ArgsCheck -> taskAppend, hostToDevRedOp, ncclRedOpCreatePreMulSum). Every call
// is checked here, before anything is enqueued; its operation becomes the device's for its type; AlltoAll,
// Gather and Scatter become sends and receives; the tasks wait in the communicator's planner for the
// group's end (group.c). Outside a group, a call is a group of one.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "enqueue_internal.h"
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_elt.h"
#include "mccl_utils.h"

// A call as NCCL's struct ncclInfo carries it.
struct enqueueInfo {
  int func;  // enum mcclFunc
  const char* name;
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  mcclDataType_t dtype;
  mcclRedOp_t op;
  int root;  // or the peer
  mcclLabComm* comm;
  cudaStream_t stream;
};

static int funcReduces(int func) {
  return func == mcclFuncAllReduce || func == mcclFuncReduce || func == mcclFuncReduceScatter;
}
static int funcRooted(int func) {
  return func == mcclFuncBroadcast || func == mcclFuncReduce || func == mcclFuncGather || func == mcclFuncScatter;
}
static int overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return aBytes > 0 && bBytes > 0 && x < y + bBytes && y < x + aBytes;
}

// ---- operations ------------------------------------------------------------------------------------
// Operation numbers are handed out once in the process, so an operation of another communicator, or one
// destroyed, is never found in this communicator's list (NCCL mangles its numbers with the comm instead).
static int nextUserOp = mcclNumOps;

static struct mcclLabUserOp* findUserOp(const mcclLabComm* comm, int op) {
  for (struct mcclLabUserOp* u = comm->userOps; u; u = u->next)
    if (u->op == op) return u;
  return NULL;
}

mcclResult_t mcclLabRedOpCreatePreMulSum(mcclRedOp_t* op, void* scalar, mcclDataType_t dtype,
                                         mcclScalarResidence_t residence, mcclLabComm* comm) {
  MCCL_ARGCHECK(comm != NULL, "RedOpCreatePreMulSum: comm is NULL");
  MCCL_ARGCHECK(op != NULL, "RedOpCreatePreMulSum: op is NULL");
  MCCL_ARGCHECK(scalar != NULL, "RedOpCreatePreMulSum: scalar is NULL");
  MCCL_ARGCHECK((int)dtype >= 0 && (int)dtype < mcclNumTypes, "RedOpCreatePreMulSum: dtype %d (0 .. %d)", (int)dtype,
                mcclNumTypes - 1);
  MCCL_ARGCHECK(residence == mcclScalarDevice || residence == mcclScalarHostImmediate,
                "RedOpCreatePreMulSum: residence %d (mcclScalarDevice %d or mcclScalarHostImmediate %d)",
                (int)residence, (int)mcclScalarDevice, (int)mcclScalarHostImmediate);
  struct mcclLabUserOp* u = (struct mcclLabUserOp*)calloc(1, sizeof(*u));
  if (u == NULL) {
    WARN("Out of memory for a PreMulSum operation");
    return mcclSystemError;
  }
  u->dtype = (int)dtype;
  u->isPtr = residence == mcclScalarDevice;
  if (u->isPtr)
    u->arg = (uint64_t)(uintptr_t)scalar;
  else
    memcpy(&u->arg, scalar, mcclTypeSize(dtype));
  u->op = __atomic_fetch_add(&nextUserOp, 1, __ATOMIC_RELAXED);
  u->next = comm->userOps;
  comm->userOps = u;
  *op = (mcclRedOp_t)u->op;
  return mcclSuccess;
}

mcclResult_t mcclLabRedOpDestroy(mcclRedOp_t op, mcclLabComm* comm) {
  MCCL_ARGCHECK(comm != NULL, "RedOpDestroy: comm is NULL");
  MCCL_ARGCHECK((int)op >= mcclNumOps, "RedOpDestroy: op %d is a built-in operation", (int)op);
  for (struct mcclLabUserOp** p = &comm->userOps; *p; p = &(*p)->next)
    if ((*p)->op == (int)op) {
      struct mcclLabUserOp* u = *p;
      *p = u->next;
      free(u);
      return mcclSuccess;
    }
  WARN("Invalid argument: RedOpDestroy: op %d was not created on rank %d's communicator, or was destroyed", (int)op,
       comm->rank);
  return mcclInvalidArgument;
}

void mcclLabUserOpsFree(mcclLabComm* comm) {
  while (comm->userOps) {
    struct mcclLabUserOp* u = comm->userOps;
    comm->userOps = u->next;
    free(u);
  }
}

// NCCL's hostToDevRedOp: the operation a kernel runs for this call's type. Avg of a floating type
// multiplies each input by 1/nRanks in that type, then sums (PreMulSum: no overflow where the sum would
// overflow, and NCCL's bits); of an integer type sums, then divides. A created operation brings its scalar.
static mcclResult_t hostToDevRedOp(const struct enqueueInfo* info, struct mcclLabTask* t) {
  t->devRedOp = mcclDevSum;
  t->redOpArgIsPtr = 0;
  t->redOpArg = 0;
  if (!funcReduces(info->func)) return mcclSuccess;
  // EXERCISE(07.redop)
  const int op = (int)info->op;
  if (op < mcclNumOps && op != mcclAvg) {
    t->devRedOp = op;  // sum, prod, max, min: the device values match
  } else if (op == mcclAvg && !mcclEltIsFloat(info->dtype)) {
    t->devRedOp = mcclDevSumPostDiv;
    t->redOpArg = (uint64_t)info->comm->nRanks;
  } else if (op == mcclAvg) {
    t->devRedOp = mcclDevPreMulSum;
    mcclEltSet(info->dtype, &t->redOpArg, 0, 1.0 / info->comm->nRanks);
  } else {
    const struct mcclLabUserOp* u = findUserOp(info->comm, op);  // ArgsCheck found it
    t->devRedOp = mcclDevPreMulSum;
    t->redOpArgIsPtr = u->isPtr;
    t->redOpArg = u->arg;
    t->userOp = 1;
  }
  return mcclSuccess;
  // END EXERCISE(07.redop)
}

// ---- ArgsCheck -----------------------------------------------------------------------------------
static mcclResult_t argsCheck(const struct enqueueInfo* info) {
  const char* name = info->name;
  mcclLabComm* comm = info->comm;
  MCCL_ARGCHECK(comm != NULL, "%s: comm is NULL", name);
  MCCL_ARGCHECK((int)info->dtype >= 0 && (int)info->dtype < mcclNumTypes, "%s: dtype %d (0 .. %d)", name,
                (int)info->dtype, mcclNumTypes - 1);
  const int nRanks = comm->nRanks, rank = comm->rank, func = info->func;
  if (funcReduces(func)) {
    const int op = (int)info->op;
    MCCL_ARGCHECK(op >= 0, "%s: op %d (built-in 0 .. %d, or one from RedOpCreatePreMulSum)", name, op, mcclNumOps - 1);
    if (op >= mcclNumOps) {
      const struct mcclLabUserOp* u = findUserOp(comm, op);
      MCCL_ARGCHECK(u != NULL,
                    "%s: op %d is not an operation of rank %d's communicator (another communicator's, destroyed, or "
                    "never created)",
                    name, op, rank);
      MCCL_ARGCHECK(u->dtype == (int)info->dtype, "%s: op %d was created for %s, not for the call's %s", name, op,
                    mcclTypeName(u->dtype), mcclTypeName(info->dtype));
    }
  }
  if (funcRooted(func))
    MCCL_ARGCHECK(info->root >= 0 && info->root < nRanks, "%s: root %d (ranks 0 .. %d)", name, info->root, nRanks - 1);
  if (func == mcclFuncSend || func == mcclFuncRecv)
    MCCL_ARGCHECK(info->root >= 0 && info->root < nRanks, "%s: peer %d (ranks 0 .. %d)", name, info->root, nRanks - 1);
  // The larger buffer's bytes: the kernels index them in 64-bit signed arithmetic.
  const int isRoot = info->root == rank;
  const size_t blocks = func == mcclFuncAllGather || func == mcclFuncReduceScatter || func == mcclFuncAlltoAll ||
                                ((func == mcclFuncGather || func == mcclFuncScatter) && isRoot)
                            ? (size_t)nRanks
                            : 1;
  const size_t esize = mcclTypeSize(info->dtype);
  MCCL_ARGCHECK(info->count <= (size_t)INT64_MAX / esize / blocks,
                "%s: count %zu (x %zu-byte %s x %zu is past the 2^63 bytes the kernels index)", name, info->count,
                esize, mcclTypeName(info->dtype), blocks);
  if (mcclIsAborted(comm->abortFlag)) {
    WARN("Invalid usage: %s: rank %d's communicator was aborted", name, rank);
    return mcclInvalidUsage;
  }
  if (info->count == 0) return mcclSuccess;
  const size_t bytes = info->count * esize, total = bytes * blocks;
  const void* s = info->sendbuff;
  const void* r = info->recvbuff;
  // Who reads sendbuff and who writes recvbuff (NCCL's ArgsCheck pointer checks).
  const int readsSend = func != mcclFuncRecv && !((func == mcclFuncBroadcast || func == mcclFuncScatter) && !isRoot);
  const int writesRecv = func != mcclFuncSend && !((func == mcclFuncReduce || func == mcclFuncGather) && !isRoot);
  MCCL_ARGCHECK(!readsSend || s != NULL, "%s: sendbuff is NULL with count %zu", name, info->count);
  MCCL_ARGCHECK(!writesRecv || r != NULL, "%s: recvbuff is NULL with count %zu", name, info->count);
  if (!readsSend || !writesRecv) return mcclSuccess;
  // Overlapping buffers: only each call's in-place form (uintptr_t arithmetic: never on a NULL pointer).
  const uintptr_t own = func == mcclFuncAllGather || func == mcclFuncGather
                            ? (uintptr_t)r + (size_t)(func == mcclFuncGather ? info->root : rank) * bytes
                        : func == mcclFuncReduceScatter || func == mcclFuncScatter
                            ? (uintptr_t)s + (size_t)(func == mcclFuncScatter ? info->root : rank) * bytes
                            : (uintptr_t)r;
  switch (func) {
    case mcclFuncAllReduce:
    case mcclFuncBroadcast:
    case mcclFuncReduce:
      MCCL_ARGCHECK(s == r || !overlaps(s, bytes, r, bytes),
                    "%s: sendbuff %p and recvbuff %p overlap (%zu bytes) without being equal", name, s, r, bytes);
      break;
    case mcclFuncAllGather:
    case mcclFuncGather:
      MCCL_ARGCHECK((uintptr_t)s == own || !overlaps(s, bytes, r, total),
                    "%s: sendbuff %p overlaps recvbuff %p (%zu bytes) but is not block %d %p (in place)", name, s, r,
                    total, func == mcclFuncGather ? info->root : rank, (void*)own);
      break;
    case mcclFuncReduceScatter:
    case mcclFuncScatter:
      MCCL_ARGCHECK((uintptr_t)r == own || !overlaps(r, bytes, s, total),
                    "%s: recvbuff %p overlaps sendbuff %p (%zu bytes) but is not block %d %p (in place)", name, r, s,
                    total, func == mcclFuncScatter ? info->root : rank, (void*)own);
      break;
    case mcclFuncAlltoAll:
      // NCCL takes sendbuff == recvbuff (nccl-tests' in-place rows call it so) and runs it as any other:
      // each block is sent while the block received from the same peer lands on it, so what arrives is
      // not defined (nccl-tests checks no in-place AlltoAll). Only one rank's is a defined no-op.
      MCCL_ARGCHECK(s == r || !overlaps(s, total, r, total),
                    "%s: sendbuff %p and recvbuff %p overlap (%zu bytes each) without being equal", name, s, r, total);
      break;
    default:
      break;
  }
  return mcclSuccess;
}

// ---- taskAppend ------------------------------------------------------------------------------------
static mcclResult_t newTask(mcclLabComm* comm, struct mcclLabTask** out) {
  struct mcclLabPlanner* pl = &comm->planner;
  struct mcclLabTask* t = pl->freeTasks;
  if (t) {
    pl->freeTasks = t->next;
  } else if ((t = (struct mcclLabTask*)malloc(sizeof(*t))) == NULL) {
    WARN("Out of memory for a task of rank %d", comm->rank);
    return mcclSystemError;
  }
  memset(t, 0, sizeof(*t));
  *out = t;
  return mcclSuccess;
}
static void appendTask(mcclLabComm* comm, struct mcclLabTask* t) {
  struct mcclLabPlanner* pl = &comm->planner;
  if (pl->tail)
    pl->tail->next = t;
  else
    pl->head = t;
  pl->tail = t;
  pl->nTasks++;
}

// A send or a receive of count elements (NCCL's p2pTaskAppend).
static mcclResult_t p2pTaskAppend(const struct enqueueInfo* info, int func, void* buff, size_t count, int peer) {
  struct mcclLabTask* t = NULL;
  MCCLCHECK(newTask(info->comm, &t));
  t->func = func;
  t->sendbuff = func == mcclFuncSend ? buff : NULL;
  t->recvbuff = func == mcclFuncRecv ? buff : NULL;
  t->count = count;
  t->dtype = (int)info->dtype;
  t->root = peer;
  t->stream = info->stream;
  appendTask(info->comm, t);
  return mcclSuccess;
}

// AlltoAll, Gather and Scatter: no kernel of their own; each becomes sends and receives, one per peer and
// block (itself included).
static mcclResult_t p2pCollAppend(const struct enqueueInfo* info) {
  // EXERCISE(07.task_append)
  mcclLabComm* comm = info->comm;
  const int n = comm->nRanks;
  const size_t bytes = info->count * mcclTypeSize(info->dtype);
  switch (info->func) {
    case mcclFuncAlltoAll:
      for (int r = 0; r < n; r++) {
        MCCLCHECK(p2pTaskAppend(info, mcclFuncSend, (char*)info->sendbuff + (size_t)r * bytes, info->count, r));
        MCCLCHECK(p2pTaskAppend(info, mcclFuncRecv, (char*)info->recvbuff + (size_t)r * bytes, info->count, r));
      }
      return mcclSuccess;
    case mcclFuncGather:
      MCCLCHECK(p2pTaskAppend(info, mcclFuncSend, (void*)info->sendbuff, info->count, info->root));
      if (comm->rank == info->root)
        for (int r = 0; r < n; r++)
          MCCLCHECK(p2pTaskAppend(info, mcclFuncRecv, (char*)info->recvbuff + (size_t)r * bytes, info->count, r));
      return mcclSuccess;
    default:  // mcclFuncScatter
      if (comm->rank == info->root)
        for (int r = 0; r < n; r++)
          MCCLCHECK(p2pTaskAppend(info, mcclFuncSend, (char*)info->sendbuff + (size_t)r * bytes, info->count, r));
      return p2pTaskAppend(info, mcclFuncRecv, info->recvbuff, info->count, info->root);
  }
  // END EXERCISE(07.task_append)
}

// ---- the copy engines (NCCL's ceCollTaskAppend) ------------------------------------------------------
// With CTA policy ZERO, a function the copy engines serve (lab 10) runs on them when recvbuff is in a window:
// the engines write each peer's copy of it, which only a window maps here, at this rank's offset in it (every
// rank passes its buffers at the same offsets of its windows, as a symmetric call does, so every rank takes
// the same path). sendbuff is read where it is. Otherwise the kernels run it, and an INFO line says why: the
// policy asks for no SM, it never makes a call fail (as NCCL).
static int ceTaskWanted(const struct enqueueInfo* info, mcclLabWindow** sendWin, mcclLabWindow** recvWin) {
  mcclLabComm* comm = info->comm;
  const struct mcclLabCeOps* ops = comm->ceColl.ops;
  // The reductions need SMs: AllReduce's copy-engine form (with a kernel) is an algorithm the plan picks.
  if (comm->ctaPolicy != MCCL_CTA_POLICY_ZERO || funcReduces(info->func)) return 0;
  if (ops == NULL) {
    INFO(MCCL_COLL, "rank %d: %s with CTA policy ZERO: this communicator has no copy-engine collectives: kernels",
         comm->rank, info->name);
    return 0;
  }
  if (!ops->implemented(info->func, (int)info->dtype)) return 0;
  if (comm->signalWin == NULL) {
    INFO(MCCL_COLL, "rank %d: %s with CTA policy ZERO: no signal area for the copy engines' flags: kernels", comm->rank,
         info->name);
    return 0;
  }
  const size_t bytes = info->count * mcclTypeSize(info->dtype);
  const int blocks = info->func == mcclFuncAllGather || info->func == mcclFuncAlltoAll || info->func == mcclFuncGather;
  const size_t recvBytes = bytes * (blocks ? (size_t)comm->nRanks : 1);
  const size_t sendBytes =
      bytes * (info->func == mcclFuncAlltoAll || info->func == mcclFuncScatter ? (size_t)comm->nRanks : 1);
  size_t off;
  if (mcclLabWindowFind(comm, info->recvbuff, recvBytes, recvWin, &off) != mcclSuccess || *recvWin == NULL) {
    INFO(MCCL_COLL,
         "rank %d: %s with CTA policy ZERO: recvbuff %p (%zu bytes) is not in a registered window, so the copy "
         "engines cannot reach the peers' copies of it: kernels",
         comm->rank, info->name, info->recvbuff, recvBytes);
    return 0;
  }
  if (mcclLabWindowFind(comm, info->sendbuff, sendBytes, sendWin, &off) != mcclSuccess) *sendWin = NULL;
  return 1;
}

// A collective's task as the call gives it; not appended.
static mcclResult_t collTaskNew(const struct enqueueInfo* info, struct mcclLabTask** out) {
  struct mcclLabTask* t = NULL;
  MCCLCHECK(newTask(info->comm, &t));
  t->func = info->func;
  t->sendbuff = info->sendbuff;
  t->recvbuff = info->recvbuff;
  t->count = info->count;
  t->dtype = (int)info->dtype;
  t->root = info->root;
  t->opHost = (int)info->op;
  t->stream = info->stream;
  *out = t;
  return mcclSuccess;
}

static mcclResult_t ceTaskAppend(const struct enqueueInfo* info, mcclLabWindow* sendWin, mcclLabWindow* recvWin) {
  struct mcclLabTask* t = NULL;
  MCCLCHECK(collTaskNew(info, &t));
  t->ce = 1;
  t->sendWin = sendWin;
  t->recvWin = recvWin;
  appendTask(info->comm, t);
  return mcclSuccess;
}

static mcclResult_t taskAppend(const struct enqueueInfo* info) {
  mcclLabComm* comm = info->comm;
  if (info->func == mcclFuncSend || info->func == mcclFuncRecv)
    return p2pTaskAppend(info, info->func, info->func == mcclFuncSend ? (void*)info->sendbuff : info->recvbuff,
                         info->count, info->root);
  if (info->count == 0) return mcclSuccess;  // NCCL: empty collectives are discarded
  mcclLabWindow *sendWin = NULL, *recvWin = NULL;
  if (ceTaskWanted(info, &sendWin, &recvWin)) return ceTaskAppend(info, sendWin, recvWin);
  if (info->func == mcclFuncAlltoAll || info->func == mcclFuncGather || info->func == mcclFuncScatter) {
    struct mcclLabTask* mark = comm->planner.tail;
    mcclResult_t res = p2pCollAppend(info);
    // The first of its tasks stands for the call (the watchdog numbers and records calls, not tasks).
    struct mcclLabTask* first = mark ? mark->next : comm->planner.head;
    if (res == mcclSuccess && first) {
      first->callFunc = info->func + 1;
      first->callRoot = info->root;
    }
    return res;
  }
  struct mcclLabTask* t = NULL;
  MCCLCHECK(collTaskNew(info, &t));
  // The operation is read now: a created one may be destroyed before the group ends (NCCL copies it too).
  mcclResult_t res = hostToDevRedOp(info, t);
  if (res != mcclSuccess) {  // back to the free list: the task was never appended
    t->next = comm->planner.freeTasks;
    comm->planner.freeTasks = t;
    return res;
  }
  appendTask(comm, t);
  return mcclSuccess;
}

// NCCL's ncclEnqueueCheck: check, append inside a group (an implicit one of one call outside any),
// and end that group. A call that fails its check inside a user's group fails the whole group
// (group.c): its end then launches nothing.
static mcclResult_t enqueueCheck(const struct enqueueInfo* info) {
  mcclResult_t res = argsCheck(info);
  if (res != mcclSuccess) {
    mcclLabGroupFail(res);
    return res;
  }
  TRACE(MCCL_COLL, "rank %d: %s %zu x %s op %d root %d stream %p", info->comm->rank, info->name, info->count,
        mcclTypeName(info->dtype), (int)info->op, info->root, (void*)info->stream);
  MCCLCHECK(mcclLabGroupStart());
  res = mcclLabGroupAdd(info->comm);
  if (res == mcclSuccess) res = taskAppend(info);
  if (res != mcclSuccess) mcclLabGroupFail(res);
  mcclResult_t end = mcclLabGroupEnd();
  return res != mcclSuccess ? res : end;
}

// ---- the calls -------------------------------------------------------------------------------------
#define ENQUEUE(func, name, send, recv, count, dtype, op, root, comm, stream)                 \
  do {                                                                                        \
    struct enqueueInfo info = {func, name, send, recv, count, dtype, op, root, comm, stream}; \
    return enqueueCheck(&info);                                                               \
  } while (0)

mcclResult_t mcclLabAllReduce(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t dtype, mcclRedOp_t op,
                              mcclLabComm* comm, cudaStream_t stream) {
  ENQUEUE(mcclFuncAllReduce, "AllReduce", sendbuff, recvbuff, count, dtype, op, 0, comm, stream);
}
mcclResult_t mcclLabBroadcast(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t dtype, int root,
                              mcclLabComm* comm, cudaStream_t stream) {
  ENQUEUE(mcclFuncBroadcast, "Broadcast", sendbuff, recvbuff, count, dtype, mcclSum, root, comm, stream);
}
mcclResult_t mcclLabReduce(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t dtype, mcclRedOp_t op,
                           int root, mcclLabComm* comm, cudaStream_t stream) {
  ENQUEUE(mcclFuncReduce, "Reduce", sendbuff, recvbuff, count, dtype, op, root, comm, stream);
}
mcclResult_t mcclLabAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, mcclDataType_t dtype,
                              mcclLabComm* comm, cudaStream_t stream) {
  ENQUEUE(mcclFuncAllGather, "AllGather", sendbuff, recvbuff, sendcount, dtype, mcclSum, 0, comm, stream);
}
mcclResult_t mcclLabReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, mcclDataType_t dtype,
                                  mcclRedOp_t op, mcclLabComm* comm, cudaStream_t stream) {
  ENQUEUE(mcclFuncReduceScatter, "ReduceScatter", sendbuff, recvbuff, recvcount, dtype, op, 0, comm, stream);
}
mcclResult_t mcclLabSend(const void* sendbuff, size_t count, mcclDataType_t dtype, int peer, mcclLabComm* comm,
                         cudaStream_t stream) {
  ENQUEUE(mcclFuncSend, "Send", sendbuff, NULL, count, dtype, mcclSum, peer, comm, stream);
}
mcclResult_t mcclLabRecv(void* recvbuff, size_t count, mcclDataType_t dtype, int peer, mcclLabComm* comm,
                         cudaStream_t stream) {
  ENQUEUE(mcclFuncRecv, "Recv", NULL, recvbuff, count, dtype, mcclSum, peer, comm, stream);
}
mcclResult_t mcclLabAlltoAll(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t dtype,
                             mcclLabComm* comm, cudaStream_t stream) {
  ENQUEUE(mcclFuncAlltoAll, "AlltoAll", sendbuff, recvbuff, count, dtype, mcclSum, 0, comm, stream);
}
mcclResult_t mcclLabGather(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t dtype, int root,
                           mcclLabComm* comm, cudaStream_t stream) {
  ENQUEUE(mcclFuncGather, "Gather", sendbuff, recvbuff, count, dtype, mcclSum, root, comm, stream);
}
mcclResult_t mcclLabScatter(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t dtype, int root,
                            mcclLabComm* comm, cudaStream_t stream) {
  ENQUEUE(mcclFuncScatter, "Scatter", sendbuff, recvbuff, count, dtype, mcclSum, root, comm, stream);
}
