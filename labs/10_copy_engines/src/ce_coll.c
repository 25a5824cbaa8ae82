// Lab 10: collectives on the copy engines (NCCL 2.28.9 src/ce_coll.cc: ncclMemOpSync and ncclPrepUCSync,
// ncclCeLaunchBatchOps, ncclCeAllGather, ncclCeAlltoAll, ncclCeGather, ncclCeScatter, ncclLaunchCeColl,
// ncclCeImplemented). No kernel runs: the stream carries memory operations that synchronise the ranks and
// copies that the copy engines carry out, and the host returns as soon as they are queued.
#include <stddef.h>
#include <string.h>
#include "ce_allreduce.h"
#include "mccl_ce.h"
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_param.h"

// The constant a synchronisation captured into a CUDA graph writes (every replay repeats it), cleared again
// after the wait (NCCL's GRAPH_SYNC_VALUE). Eager values start above it (MCCL_CE_FIRST_SEQ).
#define GRAPH_SYNC_VALUE 1u
_Static_assert(MCCL_CE_FIRST_SEQ > GRAPH_SYNC_VALUE, "eager values must never equal the graph's");

// Whether work queued on `stream` now is captured into a graph. A query that fails means a capture is under way
// elsewhere (the legacy stream during a global capture): taken as captured, as lab 07's launches take it, and the
// query's error is not left for the application to find.
static int isCapturing(cudaStream_t stream) {
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &cs) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  return cs != cudaStreamCaptureStatusNone;
}

// This rank's flag array `useComplete` in rank `r`'s signal area, as mapped here.
static uint32_t* ceFlags(const mcclLabComm* comm, int r, int useComplete) {
  struct mcclSymSignals* s = (struct mcclSymSignals*)comm->signalWin->peerPtrs[r];
  return useComplete ? s->ceComplete : s->ceReady;
}

static CUdeviceptr devPtr(const void* p) {
  return (CUdeviceptr)(uintptr_t)p;
}

mcclResult_t mcclCeMemOpSync(mcclLabComm* comm, cudaStream_t stream) {
  if (comm->signalWin == NULL || comm->nRanks > MCCL_SYM_MAX_RANKS) {
    WARN("Invalid usage: rank %d: copy-engine sync without a signal area (%d ranks)", comm->rank, comm->nRanks);
    return mcclInvalidUsage;
  }
  // EXERCISE(10.memop_sync)
  struct mcclLabCeColl* ce = &comm->ceColl;
  const int n = comm->nRanks, me = comm->rank, graph = isCapturing(stream);
  ce->seq = ce->seq + 1 < MCCL_CE_FIRST_SEQ ? MCCL_CE_FIRST_SEQ : ce->seq + 1;  // past a wrap too
  const uint32_t value = graph ? GRAPH_SYNC_VALUE : ce->seq;
  CUstreamBatchMemOpParams ops[3 * MCCL_SYM_MAX_RANKS];
  memset(ops, 0, sizeof(ops));
  unsigned k = 0;
  // Arrive: this rank's flag in every peer's area. The write waits for the stream's earlier work (the default
  // flags put a memory barrier before it), so a peer that sees it sees this rank's copies too.
  for (int r = 0; r < n; r++) {
    if (r == me) continue;
    ops[k].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[k].writeValue.address = devPtr(&ceFlags(comm, r, ce->useComplete)[me]);
    ops[k].writeValue.value = value;
    ops[k].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    k++;
  }
  // Wait: every peer's flag here. A peer is at most one sync ahead, and that sync writes the other array, so
  // the value waited for is never overwritten before this wait has seen it (NCCL waits for equality). Eager
  // waits accept any later value too (cyclic GEQ), so that one write of the last value releases all of them
  // after an abort (mcclCeRelease); a replay's must be equality, since flags an eager call left hold more.
  for (int r = 0; r < n; r++) {
    if (r == me) continue;
    ops[k].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    ops[k].waitValue.address = devPtr(&ceFlags(comm, me, ce->useComplete)[r]);
    ops[k].waitValue.value = value;
    ops[k].waitValue.flags = graph ? CU_STREAM_WAIT_VALUE_EQ : CU_STREAM_WAIT_VALUE_GEQ;
    k++;
  }
  // A replay writes the same constant again: clear what it waited on, so the next replay waits for real.
  for (int r = 0; graph && r < n; r++) {
    if (r == me) continue;
    ops[k].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[k].writeValue.address = devPtr(&ceFlags(comm, me, ce->useComplete)[r]);
    ops[k].writeValue.value = 0;
    ops[k].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    k++;
  }
  if (k > 0) CUCHECK(cuStreamBatchMemOp((CUstream)stream, k, ops, 0));
  ce->useComplete = !ce->useComplete;
  return mcclSuccess;
  // END EXERCISE(10.memop_sync)
}

void mcclCeRelease(mcclLabComm* comm) {
  if (comm->signalWin == NULL || comm->nRanks < 2 || comm->nRanks > MCCL_SYM_MAX_RANKS) return;
  // The last value this rank's syncs wait for, in every peer's slot of both arrays, written from a stream of
  // its own: the waits hold only their own streams, and a cudaMemcpy on the legacy stream would wait for the
  // application's blocking streams, the stuck one among them.
  const uint32_t value = __atomic_load_n(&comm->ceColl.seq, __ATOMIC_RELAXED);
  CUstreamBatchMemOpParams ops[2 * MCCL_SYM_MAX_RANKS];
  memset(ops, 0, sizeof(ops));
  unsigned k = 0;
  for (int a = 0; a < 2; a++)
    for (int r = 0; r < comm->nRanks; r++) {
      if (r == comm->rank) continue;
      ops[k].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
      ops[k].writeValue.address = devPtr(&ceFlags(comm, comm->rank, a)[r]);
      ops[k].writeValue.value = value;
      k++;
    }
  int saved = -1;
  cudaStream_t s = NULL;
  if ((value == 0 && comm->ceColl.arSeq == 0) || cudaGetDevice(&saved) != cudaSuccess ||
      cudaSetDevice(comm->cudaDev) != cudaSuccess)
    return;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess) {
    if (cuStreamBatchMemOp((CUstream)s, k, ops, 0) != CUDA_SUCCESS || mcclCeReleaseAllReduce(comm, s) != mcclSuccess)
      WARN("rank %d: could not release the copy engines' waits after an abort", comm->rank);
    // Done before teardown unmaps the flags: the writes wait for nothing, so this returns at once.
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
  }
  INFO(MCCL_COLL, "rank %d: aborted: the copy engines' waits up to value %u are released", comm->rank, value);
  cudaSetDevice(saved);
}

// A batch needs CUDA 12.8 (runtime and driver) and a stream that is neither captured nor the legacy one.
static int batchUsable(cudaStream_t stream) {
#if CUDART_VERSION >= 12080
  int driver = 0;
  if (mcclParamCeBatch() == 0 || stream == NULL || stream == cudaStreamLegacy || isCapturing(stream)) return 0;
  return cudaDriverGetVersion(&driver) == cudaSuccess && driver >= 12080;
#else
  (void)stream;
  return 0;
#endif
}

mcclResult_t mcclCeLaunchBatch(mcclLabComm* comm, const struct mcclCeBatch* b, cudaStream_t stream) {
  if (b->n == 0) return mcclSuccess;
  // EXERCISE(10.batch)
  if (batchUsable(stream)) {
#if CUDART_VERSION >= 12080
    // One attribute for every copy: read the source in stream order (after the sync before it), and let the
    // driver keep the copies off the SMs the application's kernels use.
    struct cudaMemcpyAttributes attr;
    memset(&attr, 0, sizeof(attr));
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
    size_t attrIdx = 0;
#if CUDART_VERSION >= 13000
    CUDACHECK(cudaMemcpyBatchAsync(b->dsts, b->srcs, b->sizes, b->n, &attr, &attrIdx, 1, stream));
#else
    size_t failIdx = 0;
    CUDACHECK(cudaMemcpyBatchAsync((void**)b->dsts, (void**)b->srcs, (size_t*)b->sizes, b->n, &attr, &attrIdx, 1,
                                   &failIdx, stream));
#endif
    TRACE(MCCL_COLL, "rank %d: a batch of %zu copies", comm->rank, b->n);
    return mcclSuccess;
#endif
  }
  for (size_t i = 0; i < b->n; i++)
    CUDACHECK(cudaMemcpyAsync(b->dsts[i], b->srcs[i], b->sizes[i], cudaMemcpyDeviceToDevice, stream));
  TRACE(MCCL_COLL, "rank %d: %zu copies one by one", comm->rank, b->n);
  return mcclSuccess;
  // END EXERCISE(10.batch)
}

// ---- the collectives ---------------------------------------------------------------------------------

// A copy into the batch; local: it stays in this rank's memory (its own block).
static void batchAdd(struct mcclCeBatch* b, int local, void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;  // in place: nothing to move
  b->dsts[b->n] = dst;
  b->srcs[b->n] = src;
  b->sizes[b->n] = bytes;
  b->local[b->n] = (uint8_t)local;
  b->n++;
}

mcclResult_t mcclCeSideStreams(mcclLabComm* comm) {
  struct mcclLabCeColl* ce = &comm->ceColl;
  if (ce->stream == NULL) CUDACHECK(cudaStreamCreateWithFlags(&ce->stream, cudaStreamNonBlocking));
  if (ce->agStream == NULL) CUDACHECK(cudaStreamCreateWithFlags(&ce->agStream, cudaStreamNonBlocking));
  if (ce->fork == NULL) CUDACHECK(cudaEventCreateWithFlags(&ce->fork, cudaEventDisableTiming));
  if (ce->agDone == NULL) CUDACHECK(cudaEventCreateWithFlags(&ce->agDone, cudaEventDisableTiming));
  if (ce->rsRound == NULL) CUDACHECK(cudaEventCreateWithFlags(&ce->rsRound, cudaEventDisableTiming));
  if (ce->join == NULL) CUDACHECK(cudaEventCreateWithFlags(&ce->join, cudaEventDisableTiming));
  return mcclSuccess;
}

// Where rank `peer`'s copy of [ptr, ptr + bytes) is mapped here: the same offset in its buffer of window w. A
// range that leaves the window names the call and the rank (the enqueue layer checked recvbuff; in-place
// Scatter addresses blocks of sendbuff through it).
mcclResult_t mcclCePeerAddr(const mcclLabComm* comm, const char* call, const mcclLabWindow* w, const void* ptr,
                            size_t bytes, int peer, void** out) {
  const uintptr_t p = (uintptr_t)ptr, base = (uintptr_t)w->buff;
  if (p < base || p - base > w->size || bytes > w->size - (p - base)) {
    WARN("Invalid usage: %s on rank %d: %zu bytes at %p are not in the window %p (%zu bytes) the copy engines write",
         call, comm->rank, bytes, ptr, w->buff, w->size);
    return mcclInvalidUsage;
  }
  *out = (char*)w->peerPtrs[peer] + (p - base);
  return mcclSuccess;
}

// Sync, this rank's copies, sync: every collective's shape. A copy within this rank's memory needs neither sync:
// outside a graph capture it goes to the side stream, forked from the caller's at the start and joined after the
// closing sync, so that one engine moves it while another carries the copies to the peers.
static mcclResult_t runSynced(mcclLabComm* comm, const struct mcclCeBatch* b, cudaStream_t stream) {
  struct mcclCeBatch peers, own;
  peers.n = own.n = 0;
  for (size_t i = 0; i < b->n; i++)
    batchAdd(b->local[i] ? &own : &peers, b->local[i], b->dsts[i], b->srcs[i], b->sizes[i]);
  const int side = own.n > 0 && peers.n > 0 && !isCapturing(stream);
  struct mcclLabCeColl* ce = &comm->ceColl;
  if (side) {
    MCCLCHECK(mcclCeSideStreams(comm));
    CUDACHECK(cudaEventRecord(ce->fork, stream));
    CUDACHECK(cudaStreamWaitEvent(ce->stream, ce->fork, 0));
    MCCLCHECK(mcclCeLaunchBatch(comm, &own, ce->stream));
    CUDACHECK(cudaEventRecord(ce->join, ce->stream));
  }
  MCCLCHECK(mcclCeMemOpSync(comm, stream));
  MCCLCHECK(mcclCeLaunchBatch(comm, side ? &peers : b, stream));
  MCCLCHECK(mcclCeMemOpSync(comm, stream));
  if (side) CUDACHECK(cudaStreamWaitEvent(stream, ce->join, 0));
  return mcclSuccess;
}

static mcclResult_t checkRanks(const mcclLabComm* comm, const char* call) {
  if (comm->nRanks <= MCCL_CE_MAX_COPIES) return mcclSuccess;
  WARN("Invalid usage: %s on rank %d: %d ranks, more than the copy engines' %d", call, comm->rank, comm->nRanks,
       MCCL_CE_MAX_COPIES);
  return mcclInvalidUsage;
}

mcclResult_t mcclCeAllGather(mcclLabComm* comm, const struct mcclLabCeCollArgs* args, cudaStream_t stream) {
  MCCLCHECK(checkRanks(comm, "AllGather"));
  // EXERCISE(10.allgather)
  const size_t bytes = args->nElts * args->eltSize;
  const int n = comm->nRanks, me = comm->rank;
  char* mine = (char*)args->recvBuff + (size_t)me * bytes;  // this rank's block, on every rank
  struct mcclCeBatch b;
  b.n = 0;
  // Its own block first (nothing in place), then each peer from the next rank on, so that the ranks' first
  // copies go to different peers.
  for (int k = 0; k < n; k++) {
    const int peer = (me + k) % n;
    void* dst;
    MCCLCHECK(mcclCePeerAddr(comm, "AllGather", args->recvWin, mine, bytes, peer, &dst));
    batchAdd(&b, peer == me, dst, args->sendBuff, bytes);
  }
  return runSynced(comm, &b, stream);
  // END EXERCISE(10.allgather)
}

mcclResult_t mcclCeAlltoAll(mcclLabComm* comm, const struct mcclLabCeCollArgs* args, cudaStream_t stream) {
  MCCLCHECK(checkRanks(comm, "AlltoAll"));
  // EXERCISE(10.alltoall)
  const size_t bytes = args->nElts * args->eltSize;
  const int n = comm->nRanks, me = comm->rank;
  char* mine = (char*)args->recvBuff + (size_t)me * bytes;
  struct mcclCeBatch b;
  b.n = 0;
  for (int k = 0; k < n; k++) {
    const int peer = (me + k) % n;
    void* dst;
    MCCLCHECK(mcclCePeerAddr(comm, "AlltoAll", args->recvWin, mine, bytes, peer, &dst));
    batchAdd(&b, peer == me, dst, (const char*)args->sendBuff + (size_t)peer * bytes, bytes);
  }
  return runSynced(comm, &b, stream);
  // END EXERCISE(10.alltoall)
}

mcclResult_t mcclCeGather(mcclLabComm* comm, const struct mcclLabCeCollArgs* args, cudaStream_t stream) {
  MCCLCHECK(checkRanks(comm, "Gather"));
  // EXERCISE(10.gather)
  const size_t bytes = args->nElts * args->eltSize;
  struct mcclCeBatch b;
  b.n = 0;
  void* dst;
  MCCLCHECK(mcclCePeerAddr(comm, "Gather", args->recvWin, (char*)args->recvBuff + (size_t)comm->rank * bytes, bytes,
                           args->root, &dst));
  batchAdd(&b, args->root == comm->rank, dst, args->sendBuff, bytes);  // the root's own block: a local copy
  return runSynced(comm, &b, stream);
  // END EXERCISE(10.gather)
}

mcclResult_t mcclCeScatter(mcclLabComm* comm, const struct mcclLabCeCollArgs* args, cudaStream_t stream) {
  MCCLCHECK(checkRanks(comm, "Scatter"));
  // EXERCISE(10.scatter)
  const size_t bytes = args->nElts * args->eltSize;
  const int n = comm->nRanks, me = comm->rank;
  struct mcclCeBatch b;
  b.n = 0;
  if (me == args->root) {
    const char* send = (const char*)args->sendBuff;
    // In place, every rank's recvbuff is its block of a sendbuff at the root's offset (nccl-tests' layout);
    // otherwise every recvbuff is at the root's recvbuff's offset.
    const int inPlace = (const char*)args->recvBuff == send + (size_t)me * bytes;
    const mcclLabWindow* w = inPlace && args->sendWin ? args->sendWin : args->recvWin;
    for (int k = 0; k < n; k++) {
      const int peer = (me + k) % n;
      const void* src = send + (size_t)peer * bytes;
      void* dst = args->recvBuff;
      if (peer != me) MCCLCHECK(mcclCePeerAddr(comm, "Scatter", w, inPlace ? src : args->recvBuff, bytes, peer, &dst));
      batchAdd(&b, peer == me, dst, src, bytes);
    }
  }
  return runSynced(comm, &b, stream);  // the other ranks only synchronise
  // END EXERCISE(10.scatter)
}

mcclResult_t mcclCeBroadcast(mcclLabComm* comm, const struct mcclLabCeCollArgs* args, cudaStream_t stream) {
  MCCLCHECK(checkRanks(comm, "Broadcast"));
  // EXERCISE(10.broadcast)
  const size_t bytes = args->nElts * args->eltSize;
  const int n = comm->nRanks, me = comm->rank;
  struct mcclCeBatch b;
  b.n = 0;
  for (int k = 0; me == args->root && k < n; k++) {
    const int peer = (me + k) % n;
    void* dst;
    MCCLCHECK(mcclCePeerAddr(comm, "Broadcast", args->recvWin, args->recvBuff, bytes, peer, &dst));
    batchAdd(&b, peer == me, dst, args->sendBuff, bytes);
  }
  return runSynced(comm, &b, stream);
  // END EXERCISE(10.broadcast)
}

mcclResult_t mcclLaunchCeColl(mcclLabComm* comm, const struct mcclLabCeCollArgs* args, cudaStream_t stream) {
  switch (args->func) {
    case mcclFuncAllGather:
      return mcclCeAllGather(comm, args, stream);
    case mcclFuncAlltoAll:
      return mcclCeAlltoAll(comm, args, stream);
    case mcclFuncGather:
      return mcclCeGather(comm, args, stream);
    case mcclFuncScatter:
      return mcclCeScatter(comm, args, stream);
    case mcclFuncBroadcast:
      return mcclCeBroadcast(comm, args, stream);
    case mcclFuncAllReduce:
      return mcclCeAllReduce(comm, args, stream);
    default:
      WARN("Invalid usage: rank %d: function %d has no copy-engine form", comm->rank, args->func);
      return mcclInvalidUsage;
  }
}

int mcclCeImplemented(int func, int dtype) {
  (void)dtype;  // the engines move bytes
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess || driver < 12050) return 0;
  return func == mcclFuncAllGather || func == mcclFuncAlltoAll || func == mcclFuncGather || func == mcclFuncScatter ||
         func == mcclFuncBroadcast || func == mcclFuncAllReduce;
}

const struct mcclLabCeOps mcclCeOps = {"copy engines", mcclCeImplemented, mcclLaunchCeColl, mcclCeRelease};
