// Lab 10: an allreduce past the SMs' ceiling, the copy engines carrying the bytes and a small kernel adding
// them (this lab's own design, not NCCL's). Two-shot's shape: a reduce-scatter, then an all-gather, both moved
// by the engines, pipelined in rounds with a flag per chunk (src/ce_reduce.cu is the kernel). The caller's
// stream runs the kernel; two more streams of the communicator run the copies, the reduce-scatter's on one and
// the all-gather's on the other, so that round r's all-gather goes out while later rounds' chunks still come
// in (on one stream every all-gather copy would queue behind the last reduce-scatter copy). Both are forked
// from the caller's stream and joined back, so the call stays ordered with the caller's other work.
#include <string.h>
#include "ce_allreduce.h"
#include "mccl_ce.h"
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_param.h"
#include "mccl_prims.h"

static CUdeviceptr devPtr(const void* p) {
  return (CUdeviceptr)(uintptr_t)p;
}

// Memory operations of one cuStreamBatchMemOp at most (the driver takes fewer than 256).
#define OPS_PER_BATCH 240

struct memOps {
  CUstreamBatchMemOpParams op[OPS_PER_BATCH];
  unsigned n;
};

static mcclResult_t memOpsFlush(struct memOps* m, cudaStream_t stream) {
  if (m->n > 0) CUCHECK(cuStreamBatchMemOp((CUstream)stream, m->n, m->op, 0));
  m->n = 0;
  return mcclSuccess;
}
// A 64-bit write (wait == 0) or a wait for a value at least v (cyclic), queued once the batch is full.
static mcclResult_t memOpAdd(struct memOps* m, cudaStream_t stream, int wait, uint64_t* addr, uint64_t v) {
  if (m->n == OPS_PER_BATCH) MCCLCHECK(memOpsFlush(m, stream));
  CUstreamBatchMemOpParams* p = &m->op[m->n++];
  memset(p, 0, sizeof(*p));
  if (wait) {
    p->waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
    p->waitValue.address = devPtr(addr);
    p->waitValue.value64 = v;
    p->waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
  } else {
    p->writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    p->writeValue.address = devPtr(addr);
    p->writeValue.value64 = v;
    p->writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
  }
  return mcclSuccess;
}

static struct mcclSymSignals* signalsOf(const mcclLabComm* comm, int r) {
  return (struct mcclSymSignals*)comm->signalWin->peerPtrs[r];
}

typedef void (*ceKernelSym)(struct mcclCeArArgs);
static const ceKernelSym kernels[mcclNumTypes] = {
    mcclCeReduceKernel_i8,  mcclCeReduceKernel_u8,   mcclCeReduceKernel_i32,    mcclCeReduceKernel_u32,
    mcclCeReduceKernel_i64, mcclCeReduceKernel_u64,  mcclCeReduceKernel_f16,    mcclCeReduceKernel_f32,
    mcclCeReduceKernel_f64, mcclCeReduceKernel_bf16, mcclCeReduceKernel_f8e4m3, mcclCeReduceKernel_f8e5m2};
_Static_assert(mcclInt8 == 0 && mcclFloat8e5m2 == 11 && mcclNumTypes == 12, "kernels follows mcclDataType_t");

#define MCCL_CE_AR_ROUNDS 4  // a call's rounds where MCCL_CE_AR_CHUNK is 0 (the default)

// The rounds of a call of `bytes` per rank: full rounds of nRanks chunks of `chunk` bytes, one last round of
// shorter chunks (whole elements), and a tail of fewer than nRanks elements. By default a call is four rounds: each
// round costs flag round trips and a batch of copies, so more rounds lose more to them than a shorter pipeline
// fill gains, and fewer leave the engines idle while the kernel reduces the first round (tuning-basis.md).
static void ceArRounds(const mcclLabComm* comm, size_t bytes, size_t esize, struct mcclCeArArgs* a) {
  const size_t n = (size_t)comm->nRanks;
  const int64_t asked = mcclParamCeArChunk(), c = asked > 0 ? asked : (int64_t)(bytes / (n * MCCL_CE_AR_ROUNDS));
  size_t chunk = c < 16 ? 16 : (size_t)c - (size_t)c % 16;  // a multiple of every element size
  a->chunk = chunk;
  a->nFull = (int32_t)(bytes / (n * chunk));
  const size_t rest = bytes - (size_t)a->nFull * n * chunk;
  a->lastChunk = rest / (n * esize) * esize;
  a->tailOffset = bytes - (rest - n * a->lastChunk);
  a->tailBytes = rest - n * a->lastChunk;
}

// Where round r starts, and its chunks' bytes.
static size_t roundAt(const struct mcclCeArArgs* a, int r, int n) {
  return (size_t)(r < a->nFull ? r : a->nFull) * (size_t)n * a->chunk;
}
static size_t roundLen(const struct mcclCeArArgs* a, int r) {
  return r < a->nFull ? a->chunk : a->lastChunk;
}

mcclResult_t mcclCeAllReduce(mcclLabComm* comm, const struct mcclLabCeCollArgs* args, cudaStream_t stream) {
  const int n = comm->nRanks, me = comm->rank;
  const size_t bytes = args->nElts * args->eltSize;
  if (comm->signalWin == NULL || n > MCCL_SYM_MAX_RANKS || args->sendWin == NULL || args->recvWin == NULL ||
      args->dtype < 0 || args->dtype >= mcclNumTypes || bytes < (size_t)n * 16 ||
      ((const char*)args->sendBuff < (char*)args->recvBuff + bytes &&
       (char*)args->recvBuff < (const char*)args->sendBuff + bytes)) {
    WARN(
        "Invalid usage: AllReduce on the copy engines on rank %d: needs a signal area, at most %d ranks (%d), "
        "sendbuff %p and recvbuff %p in windows and apart, at least %d bytes per rank (%zu)",
        me, MCCL_SYM_MAX_RANKS, n, args->sendBuff, args->recvBuff, n * 16, bytes);
    return mcclInvalidUsage;
  }
  // EXERCISE(10.assisted_allreduce)
  struct mcclLabCeColl* ce = &comm->ceColl;
  MCCLCHECK(mcclCeSideStreams(comm));
  struct mcclCeArArgs a;
  memset(&a, 0, sizeof(a));
  ceArRounds(comm, bytes, args->eltSize, &a);
  const int nRounds = a.nFull + (a.lastChunk > 0);
  a.recv = (char*)args->recvBuff;
  a.send = (const char*)args->sendBuff;
  for (int p = 0; p < n; p++) {
    MCCLCHECK(mcclCePeerAddr(comm, "AllReduce", args->sendWin, args->sendBuff, bytes, p, (void**)&a.peerSend[p]));
    a.signals[p] = (char*)comm->signalWin->peerPtrs[p];
  }
  a.abortFlag = comm->abortFlagDev;
  a.redOp = args->redOp;
  a.redOpArg = args->redOpArg;
  a.rank = me;
  a.nRanks = n;
  a.base = ce->arSeq + 1;  // every rank counts the same rounds
  ce->arSeq += (uint64_t)nRounds;
  cudaStream_t side = ce->stream, ag = ce->agStream;
  // Fork: the copies come after the caller's earlier work, the ready sync after them. The all-gather's stream
  // needs no sync of its own: its first copy waits for a reduced chunk, which needs every peer in the call.
  CUDACHECK(cudaEventRecord(ce->fork, stream));
  CUDACHECK(cudaStreamWaitEvent(side, ce->fork, 0));
  CUDACHECK(cudaStreamWaitEvent(ag, ce->fork, 0));
  MCCLCHECK(mcclCeMemOpSync(comm, side));
  // The kernel, on the caller's stream: it waits for the chunks as they come. A block per 4 SMs (MCCL_CE_AR_BLOCKS
  // sets the count), at most MCCL_CE_AR_MAX_BLOCKS (the flags have room for that many): the chunks come from the
  // engines at the link's rate, and every byte is read from HBM twice and written once, so fewer blocks, each with
  // only a few loads in flight, make the kernel the pipeline's slowest stage.
  int dev = -1, sms = 0;
  cudaFunction_t fn;
  void* params[] = {&a};
  CUDACHECK(cudaGetDevice(&dev));
  CUDACHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int64_t asked = mcclParamCeArBlocks(), want = asked > 0 ? asked : sms / 4;
  const int nBlocks = want < 1 ? 1 : want > MCCL_CE_AR_MAX_BLOCKS ? MCCL_CE_AR_MAX_BLOCKS : (int)want;
  MCCLCHECK(mcclDevGetFunction(dev, (const void*)kernels[args->dtype], &fn));
  CUCHECK(cuLaunchKernel((CUfunction)fn, (unsigned)nBlocks, 1, 1, MCCL_CE_AR_THREADS, 1, 1, 0, (CUstream)stream, params,
                         NULL));
  comm->nLaunches++;
  struct memOps m;
  m.n = 0;
  // Each round: the reduce-scatter's copies (this rank's chunk p to rank p, at this rank's position, then a flag)
  // on one stream; then, on the other, once this rank's blocks reduced its chunk and every peer has read what this
  // rank put at that position, the reduced chunk to every peer's same position. The all-gather's copies of a
  // round also wait for the same round's reduce-scatter copies here (an event, re-recorded each round: a wait
  // takes the record made before it): both write to the peers' same positions, and the peers' flags order
  // them only while no one aborts (the release after an abort lets every wait go).
  for (int r = 0; r < nRounds; r++) {
    const size_t at = roundAt(&a, r, n), len = roundLen(&a, r);
    const uint64_t v = a.base + (uint64_t)r;
    struct mcclCeBatch b;
    b.n = 0;
    for (int k = 1; k < n; k++) {
      const int p = (me + k) % n;
      MCCLCHECK(mcclCePeerAddr(comm, "AllReduce", args->recvWin, a.recv + at + (size_t)me * len, len, p, &b.dsts[b.n]));
      b.srcs[b.n] = a.send + at + (size_t)p * len;
      b.sizes[b.n++] = len;
    }
    MCCLCHECK(mcclCeLaunchBatch(comm, &b, side));
    for (int k = 1; k < n; k++)
      MCCLCHECK(memOpAdd(&m, side, 0, &signalsOf(comm, (me + k) % n)->ceArArrived[me][r % MCCL_CE_AR_SLOTS], v));
    MCCLCHECK(memOpsFlush(&m, side));
    CUDACHECK(cudaEventRecord(ce->rsRound, side));
    CUDACHECK(cudaStreamWaitEvent(ag, ce->rsRound, 0));
    struct mcclSymSignals* mine = signalsOf(comm, me);
    MCCLCHECK(memOpAdd(&m, ag, 1, &mine->ceArReduced[0][r % MCCL_CE_AR_SLOTS], v));
    for (int k = 1; k < n; k++)
      MCCLCHECK(memOpAdd(&m, ag, 1, &mine->ceArConsumed[(me + k) % n][r % MCCL_CE_AR_SLOTS], v));
    MCCLCHECK(memOpsFlush(&m, ag));
    b.n = 0;
    for (int k = 1; k < n; k++) {
      char* src = a.recv + at + (size_t)me * len;
      MCCLCHECK(mcclCePeerAddr(comm, "AllReduce", args->recvWin, src, len, (me + k) % n, &b.dsts[b.n]));
      b.srcs[b.n] = src;
      b.sizes[b.n++] = len;
    }
    MCCLCHECK(mcclCeLaunchBatch(comm, &b, ag));
  }
  // This rank's all-gather copies done, the closing sync says so to every peer, and waits until every peer's
  // reduced chunks have landed here; then join the caller's stream.
  CUDACHECK(cudaEventRecord(ce->agDone, ag));
  CUDACHECK(cudaStreamWaitEvent(side, ce->agDone, 0));
  MCCLCHECK(mcclCeMemOpSync(comm, side));
  CUDACHECK(cudaEventRecord(ce->join, side));
  CUDACHECK(cudaStreamWaitEvent(stream, ce->join, 0));
  TRACE(MCCL_COLL, "rank %d: AllReduce of %zu bytes on the copy engines: %d rounds of %llu-byte chunks, tail %llu", me,
        bytes, nRounds, (unsigned long long)a.chunk, (unsigned long long)a.tailBytes);
  return mcclSuccess;
  // END EXERCISE(10.assisted_allreduce)
}

mcclResult_t mcclCeReleaseAllReduce(mcclLabComm* comm, cudaStream_t stream) {
  const uint64_t v = comm->ceColl.arSeq;
  if (v == 0) return mcclSuccess;
  struct mcclSymSignals* mine = signalsOf(comm, comm->rank);
  struct memOps m;
  m.n = 0;
  // The streams' waits only: the arrival flags are the kernel's, which leaves on the abort flag; were they
  // released too, a kernel that has not looked at the abort flag yet would go on to reduce what never came while
  // the released copies read the same output.
  for (int s = 0; s < MCCL_CE_AR_SLOTS; s++) {
    MCCLCHECK(memOpAdd(&m, stream, 0, &mine->ceArReduced[0][s], v));
    for (int q = 0; q < comm->nRanks; q++)
      if (q != comm->rank) MCCLCHECK(memOpAdd(&m, stream, 0, &mine->ceArConsumed[q][s], v));
  }
  return memOpsFlush(&m, stream);
}
