// Lab 07: a group's tasks become plans, and each plan one launch (NCCL 2.28.9 src/enqueue.cc:
// ncclPrepareTasks and the algorithm choice, scheduleCollTasksToPlan, scheduleP2pTasksToPlan /
// addP2pToPlan, ncclLaunchPrepare, ncclLaunchKernel; src/transport.cc ncclTransportP2pSetup for the
// connections point-to-point needs). The collectives are planned in call order, then the sends and
// receives, as NCCL orders a plan. A task joins the plan being built when the plan's kernel can run it
// (the generic kernel: its type, or any type for work that moves bytes; a one-shot kernel: the same function,
// type and operation, while their bytes per rank together fit its scratch), on the same stream, with room in the
// launch's argument; otherwise that plan is launched and a new one starts.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "enqueue_internal.h"
#include "mccl_channel.h"
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_param.h"
#include "mccl_utils.h"

// Threads per block of each kind of work: SIMPLE's copies (the ring's, two-shot's, one-shot's SIMPLE,
// point-to-point) want many threads per channel (NCCL runs 512-640); LL lines move a line per thread and
// are latency bound.
#define MCCL_THREADS_SIMPLE 512
#define MCCL_THREADS_LL 256
// LL128 is bandwidth bound as SIMPLE and runs with SIMPLE's threads (NCCL: 640); the default
// MCCL_LL128_BUFFSIZE gives each of those 16 warps 15 slices per step.

// The kernels, per type (kernel_<type>.cu), as C sees them: only their addresses are used.
#define MCCL_KERNELS(suffix)                                                            \
  extern void mcclGenericKernel_##suffix(const struct mcclDevKernelArgsStorage args);   \
  extern void mcclOneShotLLKernel_##suffix(const struct mcclDevKernelArgsStorage args); \
  extern void mcclOneShotSimpleKernel_##suffix(const struct mcclDevKernelArgsStorage args);
MCCL_KERNELS(i8)
MCCL_KERNELS(u8)
MCCL_KERNELS(i32)
MCCL_KERNELS(u32)
MCCL_KERNELS(i64)
MCCL_KERNELS(u64)
MCCL_KERNELS(f16)
MCCL_KERNELS(f32)
MCCL_KERNELS(f64)
MCCL_KERNELS(bf16)
MCCL_KERNELS(f8e4m3)
MCCL_KERNELS(f8e5m2)
#undef MCCL_KERNELS
typedef void (*mcclKernelSym)(const struct mcclDevKernelArgsStorage);
#define MCCL_KERNEL_ROW(k) \
  { k##_i8, k##_u8, k##_i32, k##_u32, k##_i64, k##_u64, k##_f16, k##_f32, k##_f64, k##_bf16, k##_f8e4m3, k##_f8e5m2 }
static const mcclKernelSym kernelSyms[MCCL_NUM_KERNELS][mcclNumTypes] = {
    MCCL_KERNEL_ROW(mcclGenericKernel), MCCL_KERNEL_ROW(mcclOneShotLLKernel), MCCL_KERNEL_ROW(mcclOneShotSimpleKernel)};
_Static_assert(mcclInt8 == 0 && mcclFloat8e5m2 == 11 && mcclNumTypes == 12, "kernelSyms follows mcclDataType_t");
static const char* const kernelNames[MCCL_NUM_KERNELS] = {"generic", "one-shot LL", "one-shot SIMPLE"};

// Bytes of the works one launch's argument holds.
#define WORK_ROOM (sizeof(((struct mcclDevKernelArgsStorage*)0)->works))

static int isP2p(const struct mcclLabTask* t) {
  return t->func == mcclFuncSend || t->func == mcclFuncRecv;
}
static int movesBytes(int func) {
  return func == mcclFuncBroadcast || func == mcclFuncAllGather;
}
static size_t taskBytes(const struct mcclLabTask* t) {
  return t->count * mcclTypeSize(t->dtype);
}
// The element type a one-shot kernel runs the task with: AllGather's work moves bytes (a 1-byte type's kernel).
static int oneShotType(const struct mcclLabTask* t) {
  return movesBytes(t->func) ? (int)mcclUint8 : (int)t->dtype;
}

// ---- the launch (NCCL's ncclLaunchKernel) ------------------------------------------------------------
// Never inlined nor cloned: lab.gdb stops here with `plan` intact (at -O2 GCC folds it into planFlush
// with plan the one thread-local buffer, and gdb reads plan as <optimized out>).
#ifdef __clang__
#define MCCL_GDB_STOP __attribute__((noinline))
#else
#define MCCL_GDB_STOP __attribute__((noinline, noclone))
#endif

// The one launch function: the plan's kernel for its type, the header of its argument, and only the
// bytes of the works it carries (NCCL's kernelArgsSize), as a dependent grid on the plan's stream.
MCCL_GDB_STOP static mcclResult_t mcclLabLaunchPlan(mcclLabComm* comm, struct mcclLabPlan* plan) {
  // EXERCISE(07.launch)
  struct mcclDevKernelArgs* a = &plan->args.args;
  a->comm = comm->devComm;
  a->abortFlag = comm->abortFlagDev;
  a->status = comm->statusDev;
  a->seqCounters = comm->seqCounters;
  for (int p = 0; p < comm->nRanks && p < MCCL_SYM_MAX_RANKS && comm->signalWin; p++)
    a->signalPeers[p] = (char*)comm->signalWin->peerPtrs[p];
  a->rank = comm->rank;
  a->nRanks = comm->nRanks;
  a->chunkSteps = MCCL_DEV_DEFAULT_CHUNKSTEPS;
  a->sliceSteps = MCCL_DEV_DEFAULT_SLICESTEPS;
  a->trace = mcclParamKernelTrace() != 0;
  const size_t argsBytes = sizeof(struct mcclDevKernelArgs) + (size_t)a->nColl * sizeof(struct mcclDevWorkColl) +
                           (size_t)a->nP2p * sizeof(struct mcclDevWorkP2p);
  int nBlocks = plan->nBlocks;
  if (plan->kernel == MCCL_KERNEL_ONESHOT_LL) {  // a block per MCCL_ONESHOT_BLOCK_BYTES of the launch
    int64_t per = mcclParamOneShotBlockBytes();
    if (per < 16) per = 1024;
    const int64_t b = ((int64_t)plan->bytes + per - 1) / per;
    nBlocks = b < 1 ? 1 : b < comm->nChannels ? (int)b : comm->nChannels;
  }
  cudaFunction_t fn;
  MCCLCHECK(mcclDevGetFunction(comm->cudaDev,
                               (const void*)kernelSyms[plan->kernel][plan->dtype < 0 ? mcclUint8 : plan->dtype], &fn));
  TRACE(MCCL_COLL, "rank %d: launch %s kernel (%s): %d collective + %d point-to-point works, %d blocks x %d threads",
        comm->rank, kernelNames[plan->kernel], plan->dtype < 0 ? "bytes" : mcclTypeName(plan->dtype), a->nColl, a->nP2p,
        nBlocks, plan->nThreads);
  MCCLCHECK(mcclDevLaunchDependent(fn, nBlocks, plan->nThreads, plan->stream, &plan->args, argsBytes));
  comm->nLaunches++;
  comm->lastBlocks = nBlocks;
  comm->lastKernel = plan->kernel;
  return mcclSuccess;
  // END EXERCISE(07.launch)
}

static void planReset(struct mcclLabPlan* plan) {
  plan->kernel = -1;
  plan->dtype = -1;
  plan->nBlocks = 0;
  plan->nThreads = 0;
  plan->bytes = 0;
  plan->stream = NULL;
  plan->args.args.nColl = 0;
  plan->args.args.nP2p = 0;
  plan->args.args.nSym = 0;
}

void mcclLabThreadThresholds(mcclLabComm* comm) {
  const char* env = mcclParamThreadThresholds();
  long long th[3] = {0, 0, 0};
  int used = 0;
  if (env != NULL && (sscanf(env, "%lld %lld %lld %n", &th[0], &th[1], &th[2], &used) != 3 || env[used] != '\0' ||
                      th[0] < 0 || th[1] < 0 || th[2] < 0)) {
    WARN("Invalid value '%s' for MCCL_THREAD_THRESHOLDS on rank %d (three non-negative integers: LL LL128 SIMPLE): "
         "every channel runs",
         env, comm->rank);
    th[0] = th[1] = th[2] = 0;
  }
  comm->threadThresholds[MCCL_PROTO_LL] = th[0] * comm->nRanks;  // as NCCL's tuning.cc for the ring's LL
  comm->threadThresholds[MCCL_PROTO_LL128] = th[1];
  comm->threadThresholds[MCCL_PROTO_SIMPLE] = th[2];
}

// The most channels a ring work of `bytes` (the larger buffer) wants (NCCL's topoGetAlgoInfo: while
// nBytes < nc * nt * threadThreshold, nc--): a small call runs on few channels, each with enough bytes per
// thread; with thresholds of 0 (MCCL_THREAD_THRESHOLDS unset), on all of them. Every rank computes it from
// the same call, so all agree.
static int ringMaxChannels(const mcclLabComm* comm, int proto, int nThreads, size_t bytes) {
  const int64_t per = (int64_t)nThreads * comm->threadThresholds[proto];
  int nc = comm->nChannels;
  while (nc > 1 && (int64_t)bytes < (int64_t)nc * per) nc--;
  return nc;
}

// The generic kernel's collective works run side by side, each on channels of its own (NCCL's
// scheduleCollTasksToPlan shares a plan's channels out by bytes the same way): work i gets channels in
// proportion to its bytes, at least one, all of them when alone; its two-shot works are the launch's
// symmetric calls 0, 1, ... Every rank plans the same calls alike, so the channels and calls agree.
// A launch of ring works only shares no more channels than its works want together (ringMaxChannels) and
// launches that many blocks; one with two-shot (its symmetric counters are every channel's) or
// point-to-point works (their channels and copy blocks are fixed) shares them all.
static void shareChannels(const mcclLabComm* comm, struct mcclLabPlan* plan) {
  struct mcclDevWorkColl* works = (struct mcclDevWorkColl*)plan->args.works;
  const int n = plan->args.args.nColl;
  int nCh = comm->nChannels, want = 0, fixed = plan->args.args.nP2p > 0;
  for (int i = 0; i < n; i++) {
    want += plan->workMaxChannels[i];
    fixed |= works[i].algorithm == MCCL_ALGO_TWOSHOT;
  }
  if (!fixed && want < nCh) {
    nCh = want;  // at least n: a work wants one channel at least
    plan->nBlocks = nCh;
  }
  int ch[MCCL_SIGNAL_MAX_BLOCKS], sum = 0, nSym = 0;
  double total = 0;
  for (int i = 0; i < n; i++) total += (double)(plan->workBytes[i] ? plan->workBytes[i] : 1);
  for (int i = 0; i < n; i++) {
    ch[i] = (int)((double)nCh * (double)(plan->workBytes[i] ? plan->workBytes[i] : 1) / total);
    if (ch[i] < 1) ch[i] = 1;
    sum += ch[i];
  }
  // Round to exactly nCh: the largest works give or take the difference.
  while (sum != nCh) {
    int big = -1;
    for (int i = 0; i < n; i++)
      if ((sum < nCh || ch[i] > 1) && (big < 0 || plan->workBytes[i] > plan->workBytes[big])) big = i;
    ch[big] += sum < nCh ? 1 : -1;
    sum += sum < nCh ? 1 : -1;
  }
  for (int i = 0, lo = 0; i < n; lo += ch[i], i++) {
    works[i].channelLo = (uint8_t)lo;
    works[i].nChannels = (uint8_t)ch[i];
    if (works[i].algorithm == MCCL_ALGO_TWOSHOT) works[i].seqOffset = (uint32_t)nSym++;
  }
  plan->args.args.nSym = nSym;
}

// Launch the plan if it holds anything, and start a new one.
static mcclResult_t planFlush(mcclLabComm* comm, struct mcclLabPlan* plan) {
  mcclResult_t res = mcclSuccess;
  if (plan->kernel == MCCL_KERNEL_GENERIC && plan->args.args.nColl > 0) shareChannels(comm, plan);
  if (plan->args.args.nColl + plan->args.args.nP2p > 0) {
    // Numbered here, outside the launch: teardown and the watchdog learn from the number when it has ended.
    const uint64_t n = mcclLabLaunchNumber(comm, plan->stream);
    res = mcclLabLaunchPlan(comm, plan);
    if (res == mcclSuccess) res = mcclLabLaunchRecord(comm, plan->stream, n, mcclLabWatchdogOpTag(comm));
    if (res != mcclSuccess) mcclLabLaunchFailed(comm, n);  // nothing will end it: never wait for it
  }
  planReset(plan);
  return res;
}

static size_t planWorkBytes(const struct mcclLabPlan* plan) {
  return (size_t)plan->args.args.nColl * sizeof(struct mcclDevWorkColl) +
         (size_t)plan->args.args.nP2p * sizeof(struct mcclDevWorkP2p);
}

mcclResult_t mcclLabCommProto(const mcclLabComm* comm, size_t bytes, int proto, int* out) {
  // The table asks for LL128 without knowing the ring's edges: where the ring cannot carry it, SIMPLE runs.
  // MCCL_PROTO=ll128 asked for it by name, so a ring that cannot carry it refuses.
  if (proto == MCCL_PROTO_LL128 && !comm->ll128Ok && mcclParamProto() == NULL) proto = MCCL_PROTO_SIMPLE;
  if (proto == MCCL_PROTO_LL128 && !comm->ll128Ok) {
    WARN(
        "Invalid usage: MCCL_PROTO=ll128 on rank %d: rank %d's ring has a connection over %s, which has no LL128 "
        "FIFO (LL128 needs P2P over NVLink, which delivers each 128-byte line whole)",
        comm->rank, comm->noLl128Rank,
        comm->noLl128Transport == TRANSPORT_NET   ? "NET"
        : comm->noLl128Transport == TRANSPORT_SHM ? "SHM"
                                                  : "P2P without NVLink (PCIe)");
    return mcclInvalidUsage;
  }
  if (comm->simpleOnly) proto = MCCL_PROTO_SIMPLE;
  if (comm->multiHost && mcclParamProto() == NULL && bytes > MCCL_NET_LL_MAX) proto = MCCL_PROTO_SIMPLE;
  *out = proto;
  return mcclSuccess;
}

// Whether lab 10's copy-engine allreduce could run the task (its buffers in windows is the caller's to check):
// the copy-engine collectives present, the buffers apart (the output holds the peers' chunks until they are
// reduced), at least 16 bytes per rank, and no CUDA graph capture (its flags' values grow from call to call).
static int ceAllReduceFits(const mcclLabComm* comm, const struct mcclLabTask* t) {
  const struct mcclLabCeOps* ops = comm->ceColl.ops;
  if (t->func != mcclFuncAllReduce || ops == NULL || !ops->implemented(t->func, t->dtype) || t->redOpArgIsPtr) return 0;
  const size_t bytes = taskBytes(t);
  const uintptr_t s = (uintptr_t)t->sendbuff, r = (uintptr_t)t->recvbuff;
  if (bytes < (size_t)comm->nRanks * 16 || (s < r + bytes && r < s + bytes)) return 0;
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(t->stream, &cs) != cudaSuccess) {
    (void)cudaGetLastError();  // a capture under way elsewhere: as captured
    return 0;
  }
  return cs == cudaStreamCaptureStatusNone;
}

// ---- collectives (NCCL's algorithm choice and scheduleCollTasksToPlan) --------------------------------
// A collective's work item, its kernel, and what it adds to its plan. Returns the work's estimated time
// through *estUs when asked.
static mcclResult_t collWork(mcclLabComm* comm, const struct mcclLabTask* t, struct mcclDevWorkColl* w, int* kernel,
                             double* estUs) {
  const int nRanks = comm->nRanks;
  const size_t bytes = taskBytes(t);
  const int gathered = t->func == mcclFuncAllGather || t->func == mcclFuncReduceScatter;
  const size_t larger = bytes * (gathered ? (size_t)nRanks : 1);
  mcclLabWindow *sw = NULL, *rw = NULL;
  size_t soff = 0, roff = 0;
  if (t->func == mcclFuncAllReduce) {
    MCCLCHECK(mcclLabWindowFind(comm, t->sendbuff, bytes, &sw, &soff));
    MCCLCHECK(mcclLabWindowFind(comm, t->recvbuff, bytes, &rw, &roff));
  }
  // 1: the signal area exists (one-shot possible); 2: and both buffers are in windows (two-shot too).
  // Two-shot reduces every rank's input where it loads it, with its own operation: not for an operation
  // whose scalar may differ between ranks (one-shot scales each input where it is sent, the ring too).
  // 3: and the copy-engine allreduce can run (lab 10: its ops, buffers apart, no graph capture).
  int symmetric = comm->signalWin == NULL ? 0 : (sw != NULL && rw != NULL && !t->userOp) ? 2 : 1;
  if (symmetric == 2 && ceAllReduceFits(comm, t)) symmetric = 3;
  int algo, proto;
  MCCLCHECK(
      mcclLabSelectAlgorithm(t->func, nRanks, t->func == mcclFuncAllReduce ? bytes : larger, symmetric, &algo, &proto));
  // The table's protocols assume 16-byte aligned slices (the windows' and most allocators' buffers).
  if (algo == MCCL_ALGO_RING && nRanks > 1 && mcclParamProto() == NULL &&
      (((uintptr_t)t->sendbuff | (uintptr_t)t->recvbuff | (gathered ? bytes : 0)) & 15))
    proto = mcclLabMisalignedProto(t->func, nRanks, larger, proto);
  if (algo == MCCL_ALGO_RING && nRanks > 1) MCCLCHECK(mcclLabCommProto(comm, larger, proto, &proto));
  if (nRanks == 1) algo = MCCL_ALGO_RING;  // the ring's one-rank path: a copy
  if (estUs) *estUs += mcclLabEstimateTime(t->func, algo, proto, nRanks, larger);
  memset(w, 0, sizeof(*w));
  w->func = (uint8_t)t->func;
  w->algorithm = (uint8_t)algo;
  w->protocol = (uint8_t)proto;
  w->redOp = (uint8_t)t->devRedOp;
  w->redOpArgIsPtr = (uint8_t)t->redOpArgIsPtr;
  w->redOpArg = t->redOpArg;
  w->root = t->root;
  w->count = movesBytes(t->func) ? bytes : t->count;
  w->sendbuff = t->sendbuff;
  w->recvbuff = t->recvbuff;
  const int ll = proto == MCCL_PROTO_LL && algo != MCCL_ALGO_TWOSHOT && nRanks > 1;
  w->nWarps = (uint8_t)((ll ? MCCL_THREADS_LL : MCCL_THREADS_SIMPLE) / 32);
  if (algo == MCCL_ALGO_TWOSHOT) {
    w->sendPeers = sw->devPeerPtrs;
    w->sendOffset = soff;
    w->recvPeers = rw->devPeerPtrs;
    w->recvOffset = roff;
  }
  *kernel = algo == MCCL_ALGO_ONESHOT && nRanks > 1
                ? (proto == MCCL_PROTO_LL ? MCCL_KERNEL_ONESHOT_LL : MCCL_KERNEL_ONESHOT_SIMPLE)
                : MCCL_KERNEL_GENERIC;
  return mcclSuccess;
}

// Whether the plan can take the work (see the top of this file); one-shot's scratch is counted in LL
// lines of 8 data bytes, or SIMPLE's 16-byte packs.
static int planTakes(const mcclLabComm* comm, const struct mcclLabPlan* plan, const struct mcclLabTask* t,
                     const struct mcclDevWorkColl* w, int kernel) {
  if (plan->kernel < 0) return 1;
  if (plan->kernel != kernel || plan->stream != t->stream || plan->args.args.nP2p > 0) return 0;
  if (planWorkBytes(plan) + sizeof(struct mcclDevWorkColl) > WORK_ROOM) return 0;
  if (kernel == MCCL_KERNEL_GENERIC)  // a channel each at least
    return plan->args.args.nColl < comm->nChannels &&
           (movesBytes(w->func) || plan->dtype < 0 || plan->dtype == t->dtype);
  const struct mcclDevWorkColl* first = (const struct mcclDevWorkColl*)plan->args.works;
  if (plan->dtype != oneShotType(t) || first->func != w->func || first->redOp != w->redOp) return 0;
  const size_t unit = kernel == MCCL_KERNEL_ONESHOT_LL ? 8 : 16;
  const size_t cap = kernel == MCCL_KERNEL_ONESHOT_LL ? MCCL_ONESHOT_MAX_BYTES : MCCL_ONESHOT_SIMPLE_MAX_BYTES;
  const struct mcclDevWorkColl* last = first + plan->args.args.nColl - 1;
  const size_t esize = mcclTypeSize(oneShotType(t));
  const size_t end = (size_t)last->firstLine * unit + last->count * esize;  // bytes of scratch used
  return ((end + unit - 1) / unit) * unit + taskBytes(t) <= cap;
}

static void planAddColl(mcclLabComm* comm, struct mcclLabPlan* plan, const struct mcclLabTask* t,
                        struct mcclDevWorkColl* w, int kernel) {
  if (plan->kernel < 0) {
    plan->kernel = kernel;
    plan->stream = t->stream;
  }
  if (kernel != MCCL_KERNEL_GENERIC)
    plan->dtype = oneShotType(t);
  else if (!movesBytes(w->func))
    plan->dtype = t->dtype;
  struct mcclDevWorkColl* works = (struct mcclDevWorkColl*)plan->args.works;
  if (kernel != MCCL_KERNEL_GENERIC) {  // where the work starts in the launch's scratch (a rank's part of it)
    const size_t unit = kernel == MCCL_KERNEL_ONESHOT_LL ? 8 : 16, esize = mcclTypeSize(oneShotType(t));
    if (plan->args.args.nColl > 0) {
      const struct mcclDevWorkColl* last = &works[plan->args.args.nColl - 1];
      w->firstLine = (uint32_t)((last->firstLine * unit + last->count * esize + unit - 1) / unit);
    }
  }
  const size_t bytes =
      taskBytes(t) * (t->func == mcclFuncAllGather || t->func == mcclFuncReduceScatter ? (size_t)comm->nRanks : 1);
  plan->workBytes[plan->args.args.nColl] = bytes;
  plan->workMaxChannels[plan->args.args.nColl] = w->algorithm == MCCL_ALGO_RING && comm->nRanks > 1
                                                     ? ringMaxChannels(comm, w->protocol, w->nWarps * 32, bytes)
                                                     : comm->nChannels;
  works[plan->args.args.nColl++] = *w;
  plan->bytes += taskBytes(t);
  const int threads = w->nWarps * 32;
  if (threads > plan->nThreads) plan->nThreads = threads;
  if (comm->nChannels > plan->nBlocks) plan->nBlocks = comm->nChannels;
}

// ---- point-to-point (NCCL's scheduleP2pTasksToPlan / addP2pToPlan) ----------------------------------
// The channel of a round's part 0: the round's bits reversed (NCCL's ncclP2pChannelBaseForRound on
// one node), so consecutive rounds start far apart and a group's rounds spread over the channels.
static int p2pChannelBase(int round, int nP2p) {
  int bits = 0, base = 0;
  while ((1 << bits) < nP2p) bits++;
  for (int b = 0; b < bits; b++)
    if (round & (1 << b)) base |= 1 << (bits - 1 - b);
  return base;
}

// Channels a direction of `bytes` is cut over (NCCL's addP2pToPlan): at least nMin parts when the
// bytes allow parts of stepSize/8, doubled up to nMax while parts exceed 32 steps. Both ends of a
// transfer compute it from the same byte count, so they agree.
static int p2pNParts(size_t bytes, int nMin, int nMax, size_t stepSize) {
  if (bytes == 0) return 0;
  const size_t minPart = stepSize / 8, maxPart = stepSize * 32;
  size_t n = (bytes + minPart - 1) / minPart;
  if (n > (size_t)nMin) n = (size_t)nMin;
  size_t part = (bytes + n - 1) / n;
  if (part < minPart) part = minPart;
  while (part > maxPart && n <= (size_t)nMax / 2) {
    n *= 2;
    part = (bytes + n - 1) / n;
  }
  return (int)n;
}

// Round of a task: a send to peer runs in round (peer - rank) mod n, a receive from peer in
// (rank - peer) mod n.
static int p2pRound(const struct mcclLabTask* t, int rank, int n) {
  return t->func == mcclFuncSend ? (t->root - rank + n) % n : (rank - t->root + n) % n;
}

// What every group's sends and receives must satisfy before anything connects: one stream for the
// communicator's, and a send to oneself paired with the receive from oneself of the same size (NCCL
// refuses the unpaired). Sends and receives to oneself pair in call order.
static mcclResult_t p2pCheck(const mcclLabComm* comm) {
  cudaStream_t stream = NULL;
  int any = 0;
  const struct mcclLabTask *s = comm->planner.head, *r = comm->planner.head;
  for (const struct mcclLabTask* t = comm->planner.head; t; t = t->next) {
    if (!isP2p(t)) continue;
    if (any && t->stream != stream) {
      WARN(
          "Invalid usage: rank %d: a group's sends and receives of one communicator are on several streams (%p and "
          "%p); "
          "minccl launches them together on one stream",
          comm->rank, (void*)stream, (void*)t->stream);
      return mcclInvalidUsage;
    }
    stream = t->stream;
    any = 1;
  }
  for (;;) {  // the k-th send to oneself with the k-th receive from oneself
    while (s && !(s->func == mcclFuncSend && s->root == comm->rank)) s = s->next;
    while (r && !(r->func == mcclFuncRecv && r->root == comm->rank)) r = r->next;
    if (!s && !r) return mcclSuccess;
    if (!s || !r || taskBytes(s) != taskBytes(r)) {
      WARN(
          "Invalid usage: rank %d: a send to itself needs the receive from itself of the same size in the same group "
          "(send %s%zu bytes, receive %s%zu bytes)",
          comm->rank, s ? "" : "missing ", s ? taskBytes(s) : 0, r ? "" : "missing ", r ? taskBytes(r) : 0);
      return mcclInvalidUsage;
    }
    s = s->next;
    r = r->next;
  }
}

// Connect, on every point-to-point channel, the directions to peers that are not connected yet
// (NCCL: p2pTaskAppend marks connectSend/connectRecv, the group's end runs ncclTransportP2pSetup on
// connIndex 1). The peers' matching tasks mark the other ends, so both setups pair up.
mcclResult_t mcclLabConnectP2p(mcclLabComm* comm) {
  MCCLCHECK(p2pCheck(comm));
  const int nP2p = comm->nP2pChannels;
  int nTasks = 0;
  for (const struct mcclLabTask* t = comm->planner.head; t; t = t->next) {
    if (!isP2p(t) || t->root == comm->rank) continue;
    nTasks++;
    const int base = p2pChannelBase(p2pRound(t, comm->rank, comm->nRanks), nP2p);
    const int send = t->func == mcclFuncSend;
    for (int part = 0; part < nP2p; part++) {
      const int c = (base + part) & (nP2p - 1);
      MCCLCHECK(
          mcclTransportP2pConnect(&comm->ctx, c, send ? 0 : 1, &t->root, send ? 1 : 0, &t->root, MCCL_P2P_CONN_INDEX));
    }
  }
  int any = 0;
  for (int p = 0; p < comm->nRanks && !any; p++) any = comm->ctx.connectSend[p] || comm->ctx.connectRecv[p];
  if (!any) return mcclSuccess;
  INFO(MCCL_INIT, "rank %d: connecting point-to-point channels (connIndex %d) for a group of %d send(s)/receive(s)",
       comm->rank, MCCL_P2P_CONN_INDEX, nTasks);
  return mcclTransportP2pSetup(&comm->ctx, NULL, MCCL_P2P_CONN_INDEX);
}

// The next task of (func, peer) after *cursor (NULL: from the head), or NULL.
static const struct mcclLabTask* nextP2p(const mcclLabComm* comm, int func, int peer,
                                         const struct mcclLabTask** cursor) {
  const struct mcclLabTask* t = *cursor ? (*cursor)->next : comm->planner.head;
  while (t && !(t->func == func && t->root == peer)) t = t->next;
  if (t) *cursor = t;
  return t;
}

// Schedule the sends and receives as NCCL does: round r pairs the send to (rank + r) mod n with the
// receive from (rank - r) mod n, and a peer's k-th send and k-th receive go in pass k. Each round is
// one work whose directions are cut into parts over the channels from a base that depends on the round
// only, so both ends cut alike. Works join the plan being built (after its collectives) while it has
// room; a full plan is launched.
static mcclResult_t planP2p(mcclLabComm* comm, struct mcclLabPlan* plan, double* estUs) {
  const int rank = comm->rank, n = comm->nRanks;
  int nP2pTasks = 0;
  cudaStream_t stream = NULL;
  size_t sendBytes = 0, recvBytes = 0;
  for (const struct mcclLabTask* t = comm->planner.head; t; t = t->next)
    if (isP2p(t)) {
      nP2pTasks++;
      stream = t->stream;
      *(t->func == mcclFuncSend ? &sendBytes : &recvBytes) += taskBytes(t);
    }
  if (nP2pTasks == 0) return mcclSuccess;
  if (estUs) {
    *estUs += mcclLabEstimateTime(mcclFuncSendRecv, MCCL_ALGO_RING, MCCL_PROTO_SIMPLE, n,
                                  sendBytes > recvBytes ? sendBytes : recvBytes);
    return mcclSuccess;
  }
  const int nP2p = comm->nP2pChannels;
  // NCCL's nChannelsMin: every channel when all peers fit, else fewer parts per peer to start with.
  int nMin = nP2p;
  while (nMin * n > nP2p && nMin > 1) nMin /= 2;
  const size_t stepSize = (size_t)comm->ctx.buffSizes[MCCL_P2P_CONN_INDEX][MCCL_PROTO_SIMPLE] / MCCL_STEPS;
  const int64_t llParam = mcclParamP2pLlThreshold();
  uint64_t llThreshold = llParam > 0 ? (uint64_t)llParam : 0;
  // NET's receiving proxy takes an LL step into a SIMPLE slot (lab 08, as comm.c's agreeProtocols): with
  // point-to-point SIMPLE slots smaller than LL slots (a small MCCL_P2P_BUFFSIZE), everything moves as SIMPLE.
  if (comm->ctx.buffSizes[MCCL_P2P_CONN_INDEX][MCCL_PROTO_LL] >
      comm->ctx.buffSizes[MCCL_P2P_CONN_INDEX][MCCL_PROTO_SIMPLE])
    llThreshold = 0;
  const struct mcclLabTask* sendCur[MCCL_LAB_MAX_RANKS];
  const struct mcclLabTask* recvCur[MCCL_LAB_MAX_RANKS];
  memset(sendCur, 0, sizeof(sendCur));
  memset(recvCur, 0, sizeof(recvCur));
  int left = nP2pTasks;
  while (left > 0) {  // pass k takes each peer's k-th send and k-th receive
    int took = 0;
    for (int round = 0; round < n; round++) {
      const int sendPeer = (rank + round) % n, recvPeer = (rank - round + n) % n;
      const struct mcclLabTask* s = nextP2p(comm, mcclFuncSend, sendPeer, &sendCur[sendPeer]);
      const struct mcclLabTask* r = nextP2p(comm, mcclFuncRecv, recvPeer, &recvCur[recvPeer]);
      if (!s && !r) continue;
      took += (s != NULL) + (r != NULL);
      struct mcclDevWorkP2p w;
      memset(&w, 0, sizeof(w));
      w.sendRank = s ? sendPeer : -1;
      w.recvRank = r ? recvPeer : -1;
      w.sendAddr = s ? s->sendbuff : NULL;
      w.recvAddr = r ? r->recvbuff : NULL;
      w.sendBytes = s ? taskBytes(s) : 0;
      w.recvBytes = r ? taskBytes(r) : 0;
      w.nSendParts = p2pNParts(w.sendBytes, nMin, nP2p, stepSize);
      w.nRecvParts = p2pNParts(w.recvBytes, nMin, nP2p, stepSize);
      w.channelBase = p2pChannelBase(round, nP2p);
      if (w.sendBytes > 0 && w.sendBytes <= (uint64_t)w.nSendParts * llThreshold) w.llMask |= MCCL_P2P_SEND_LL;
      if (w.recvBytes > 0 && w.recvBytes <= (uint64_t)w.nRecvParts * llThreshold) w.llMask |= MCCL_P2P_RECV_LL;
      // Nothing to move (zero bytes, or an in-place copy to oneself, which NCCL skips too).
      if (w.nSendParts == 0 && w.nRecvParts == 0) continue;
      if (round == 0 && w.sendAddr == (const void*)w.recvAddr) continue;
      if (round == 0) {  // a copy to oneself: on blocks of its own after the channels' (MCCL_P2P_SELF_MAX_BLOCKS)
        size_t nb = (size_t)((w.sendBytes + MCCL_P2P_SELF_BLOCK_BYTES - 1) / MCCL_P2P_SELF_BLOCK_BYTES);
        if (nb > MCCL_P2P_SELF_MAX_BLOCKS) nb = MCCL_P2P_SELF_MAX_BLOCKS;
        if (nb > (size_t)nP2p) nb = (size_t)nP2p;
        w.channelBase = comm->nChannels;
        w.nSendParts = w.nRecvParts = (int)nb;
        w.llMask = 0;
      }
      TRACE(MCCL_COLL, "rank %d: round %d: send %zu bytes to %d (%s), recv %zu bytes from %d (%s), channels from %d",
            rank, round, (size_t)w.sendBytes, w.sendRank, (w.llMask & MCCL_P2P_SEND_LL) ? "LL" : "SIMPLE",
            (size_t)w.recvBytes, w.recvRank, (w.llMask & MCCL_P2P_RECV_LL) ? "LL" : "SIMPLE", w.channelBase);
      if (plan->kernel >= 0 && (plan->kernel != MCCL_KERNEL_GENERIC || plan->stream != stream ||
                                planWorkBytes(plan) + sizeof(w) > WORK_ROOM))
        MCCLCHECK(planFlush(comm, plan));
      if (plan->kernel < 0) {
        plan->kernel = MCCL_KERNEL_GENERIC;
        plan->stream = stream;
      }
      struct mcclDevWorkP2p* p2ps =
          (struct mcclDevWorkP2p*)((struct mcclDevWorkColl*)plan->args.works + plan->args.args.nColl);
      p2ps[plan->args.args.nP2p++] = w;
      if (plan->nThreads < MCCL_THREADS_SIMPLE) plan->nThreads = MCCL_THREADS_SIMPLE;
      const int blocks = round == 0 ? w.channelBase + w.nSendParts : nP2p;
      if (plan->nBlocks < blocks) plan->nBlocks = blocks;
    }
    if (took == 0) {
      WARN("Internal error: rank %d: %d point-to-point task(s) left unscheduled", rank, left);
      return mcclInternalError;
    }
    left -= took;
  }
  return mcclSuccess;
}

// ---- the copy engines (NCCL's plan->isCeColl and ncclLaunchCeColl) ------------------------------------
// A copy-engine task is a plan of its own with no kernel: lab 10's launch queues its synchronisations and
// copies on the task's stream. It takes a launch number as a kernel does, and an event recorded after its last
// synchronisation marks its end (mcclLabLaunchRecord), so teardown and the watchdog see it end as they see a
// kernel end.
static mcclResult_t ceLaunch(mcclLabComm* comm, const struct mcclLabTask* t) {
  struct mcclLabCeCollArgs args = {t->func,     t->root,     t->count,   mcclTypeSize(t->dtype),
                                   t->sendbuff, t->recvbuff, t->sendWin, t->recvWin,
                                   t->dtype,    t->devRedOp, t->redOpArg};
  size_t off;
  if (t->func == mcclFuncAllReduce) {  // planned here, not at the call: its windows are found now
    MCCLCHECK(mcclLabWindowFind(comm, t->sendbuff, taskBytes(t), &args.sendWin, &off));
    MCCLCHECK(mcclLabWindowFind(comm, t->recvbuff, taskBytes(t), &args.recvWin, &off));
  }
  const uint64_t n = mcclLabLaunchNumber(comm, t->stream);
  TRACE(MCCL_COLL, "rank %d: function %d runs on the %s: %zu x %zu bytes, launch %llu", comm->rank, t->func,
        comm->ceColl.ops->name, args.nElts, args.eltSize, (unsigned long long)n);
  mcclResult_t res = comm->ceColl.ops->launch(comm, &args, t->stream);
  if (res == mcclSuccess) res = mcclLabLaunchRecord(comm, t->stream, n, mcclLabWatchdogOpTag(comm));
  if (res == mcclSuccess) return mcclSuccess;
  mcclLabLaunchFailed(comm, n);  // nothing will mark it: never wait for it
  return res;
}

// ---- a communicator's tasks: connect, plan, launch ---------------------------------------------------
int mcclLabTasksDrop(mcclLabComm* comm) {
  struct mcclLabPlanner* pl = &comm->planner;
  const int n = pl->nTasks;
  while (pl->head) {
    struct mcclLabTask* t = pl->head;
    pl->head = t->next;
    t->next = pl->freeTasks;
    pl->freeTasks = t;
  }
  pl->tail = NULL;
  pl->nTasks = 0;
  return n;
}

void mcclLabTasksFree(mcclLabComm* comm) {
  mcclLabTasksDrop(comm);
  while (comm->planner.freeTasks) {
    struct mcclLabTask* t = comm->planner.freeTasks;
    comm->planner.freeTasks = t->next;
    free(t);
  }
}

mcclResult_t mcclLabRunTasks(mcclLabComm* comm, float* estimateUs) {
  if (comm->planner.nTasks == 0) return mcclSuccess;
  if (mcclIsAborted(comm->abortFlag)) {
    WARN("Invalid usage: rank %d's communicator was aborted with %d task(s) in its group", comm->rank,
         comm->planner.nTasks);
    mcclLabTasksDrop(comm);
    return mcclInvalidUsage;
  }
  mcclResult_t res = mcclSuccess;
  double est = 0;
  // One plan at a time per thread, launched before the next is built (the works are copied at launch).
  static __thread struct mcclLabPlan planBuf;
  struct mcclLabPlan* plan = &planBuf;
  planReset(plan);
  memset(&plan->args.args, 0, sizeof(plan->args.args));
  // The watchdog's record of the group's calls, numbered in call order before anything is launched.
  const int watched = comm->watchdog != NULL && estimateUs == NULL;
  const uint64_t nCalls = watched ? mcclLabWatchdogNumber(comm) : 0;
  if (estimateUs == NULL) MCCLCHECKGOTO(mcclLabConnectP2p(comm), res, out);
  for (const struct mcclLabTask* t = comm->planner.head; t; t = t->next) {
    if (isP2p(t)) continue;
    if (t->ce) {
      const size_t bytes = taskBytes(t) * (t->func == mcclFuncBroadcast ? 1 : (size_t)comm->nRanks);
      if (estimateUs) {
        est += mcclLabEstimateTime(t->func, MCCL_ALGO_CE, MCCL_PROTO_SIMPLE, comm->nRanks, bytes);
        continue;
      }
      MCCLCHECKGOTO(planFlush(comm, plan), res, out);  // the kernels of the calls before it go first
      MCCLCHECKGOTO(ceLaunch(comm, t), res, out);
      continue;
    }
    struct mcclDevWorkColl w;
    int kernel;
    MCCLCHECKGOTO(collWork(comm, t, &w, &kernel, estimateUs ? &est : NULL), res, out);
    if (estimateUs) continue;
    if (w.algorithm == MCCL_ALGO_CE) {  // the copy-engine allreduce: a plan of its own, as the other CE calls
      MCCLCHECKGOTO(planFlush(comm, plan), res, out);
      MCCLCHECKGOTO(ceLaunch(comm, t), res, out);
      continue;
    }
    if (!planTakes(comm, plan, t, &w, kernel)) MCCLCHECKGOTO(planFlush(comm, plan), res, out);
    planAddColl(comm, plan, t, &w, kernel);
  }
  MCCLCHECKGOTO(planP2p(comm, plan, estimateUs ? &est : NULL), res, out);
  if (estimateUs == NULL) MCCLCHECKGOTO(planFlush(comm, plan), res, out);
  if (estimateUs) *estimateUs += (float)est;
out:
  if (nCalls) mcclLabWatchdogPublish(comm, nCalls);
  mcclLabTasksDrop(comm);
  return res;
}
