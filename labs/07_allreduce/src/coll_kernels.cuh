// Lab 07: the ring kernels of NCCL's other collectives (NCCL 2.28.9 src/device/broadcast.h,
// reduce.h, all_gather.h, reduce_scatter.h: each RunWorkColl's runRing), over lab 06's Primitives
// with the SIMPLE or LL protocol. Broadcast and AllGather move bytes (NCCL runs them as ncclInt8):
// one copy kernel serves every type (coll_copy.cu). Reduce and ReduceScatter reduce: one kernel per
// element type (coll_<type>.cu), each with the five operations and both protocols.
#ifndef MCCL_COLL_KERNELS_CUH_
#define MCCL_COLL_KERNELS_CUH_

#include "device/primitives.cuh"
#include "coll_args.h"

// The launch's argument, copied into the block's shared memory by its threads (as the allreduce
// kernel and lab 06 do). Lab 06's mcclShmem.work carries what the Primitives read: the abort flag.
struct mcclCollShmem {
  struct mcclCollArgs args;
};
MCCL_SHMEM_DEFINE(struct mcclCollShmem, collShmem);

__device__ __forceinline__ void mcclCollLoadArgs(const struct mcclCollArgs* a, int tid, int nthreads) {
  static_assert(sizeof(struct mcclCollArgs) % sizeof(uint32_t) == 0, "copied in 4-byte words");
  const uint32_t* src = (const uint32_t*)a;
  uint32_t* dst = (uint32_t*)&collShmem.args;
  for (int i = tid; i < (int)(sizeof(*a) / sizeof(uint32_t)); i += nthreads) dst[i] = src[i];
  if (tid == 0) {
    mcclShmem.work.abortFlag = a->abortFlag;
    mcclShmem.work.trace = a->trace;
    mcclShmem.work.op = mcclDevOpNone;
  }
  __syncthreads();
}

// This block's part of the per-rank count: channel c owns [lo, lo + n), cut at 512-byte multiples
// (NCCL's ncclCollCbdPart; the allreduce ring cuts the same way).
template <typename T>
__device__ __forceinline__ void mcclCollChannelPart(int64_t* lo, int64_t* n) {
  const struct mcclCollArgs& a = collShmem.args;
  const int64_t count = (int64_t)a.count;
  const int64_t per =
      mcclDivUp(mcclDivUp(count * (int64_t)sizeof(T), (int64_t)a.nChannels), (int64_t)512) * 512 / (int64_t)sizeof(T);
  const int64_t l = (int64_t)blockIdx.x * per < count ? (int64_t)blockIdx.x * per : count;
  *lo = l;
  *n = (l + per < count ? l + per : count) - l;
}

// The Primitives of this block's channel: the receive connection from the ring's prev and/or the send
// connection to its next. A rank that does not use one direction in this call passes none, and so
// does the peer at that connection's other end (the same ring, the same root), so both keep their
// step counters where they were.
#define MCCL_COLL_PRIMS(prims, recv, send)                                                                           \
  Primitives<T, RedOp, Proto> prims(tid, nthreads, (recv) ? a.recvConns + blockIdx.x : NULL,                         \
                                    (send) ? a.sendConns + blockIdx.x : NULL, a.sendbuff, a.recvbuff, a.redOpArg, 0, \
                                    a.chunkSteps / a.sliceSteps, a.sliceSteps)

// ---- Broadcast (broadcast.h runRing) --------------------------------------------------------------
// The root sends each chunk (copying it to its own output when out of place); every other rank
// receives it, keeps a copy and passes it on, except the root's prev, which only receives.
template <typename T, typename RedOp, typename Proto>
__device__ bool mcclRunBroadcastRing(int tid, int nthreads) {
  const struct mcclCollArgs& a = collShmem.args;
  const int rank = a.ringRanks[0], nextRank = a.ringRanks[1];
  const bool isRoot = rank == a.root, nextIsRoot = nextRank == a.root;
  const bool inPlace = a.sendbuff == (const void*)a.recvbuff;
  int64_t lo, n;
  mcclCollChannelPart<T>(&lo, &n);
  MCCL_COLL_PRIMS(prims, !isRoot, !nextIsRoot);
  const int64_t chunk = prims.chunkElems();
  for (int64_t e = 0; e < n && !prims.aborted(); e += chunk) {
    const int64_t offset = lo + e;
    const int nelem = (int)(chunk < n - e ? chunk : n - e);
    if (isRoot) {
      if (inPlace)
        prims.send(offset, nelem);
      else
        prims.copySend(offset, offset, nelem);
    } else if (nextIsRoot) {
      prims.recv(offset, nelem);
    } else {
      prims.recvCopySend(offset, nelem);
    }
  }
  return prims.aborted();
}

// ---- Reduce (reduce.h runRing) --------------------------------------------------------------------
// The root's next starts each chunk with its input; every rank after it adds its own and passes the
// partial sum on; the root adds its input last and writes the result (postOp: avg divides).
template <typename T, typename RedOp, typename Proto>
__device__ bool mcclRunReduceRing(int tid, int nthreads) {
  const struct mcclCollArgs& a = collShmem.args;
  const int rank = a.ringRanks[0], prevRank = a.ringRanks[a.nRanks - 1];
  const bool isRoot = rank == a.root, prevIsRoot = prevRank == a.root;
  int64_t lo, n;
  mcclCollChannelPart<T>(&lo, &n);
  MCCL_COLL_PRIMS(prims, !prevIsRoot, !isRoot);
  const int64_t chunk = prims.chunkElems();
  for (int64_t e = 0; e < n && !prims.aborted(); e += chunk) {
    const int64_t offset = lo + e;
    const int nelem = (int)(chunk < n - e ? chunk : n - e);
    if (prevIsRoot)
      prims.send(offset, nelem);
    else if (isRoot)
      prims.recvReduceCopy(offset, offset, nelem, /*postOp=*/true);
    else
      prims.recvReduceSend(offset, nelem);
  }
  return prims.aborted();
}

// ---- AllGather (all_gather.h runRing) -------------------------------------------------------------
// Block r of the output is rank r's input. Each rank sends its own block (copying it into its
// output unless in place), then for nRanks-2 steps receives the block of the rank j places back,
// keeps it and passes it on, and last receives the block of its next (which went all the way round).
template <typename T, typename RedOp, typename Proto>
__device__ bool mcclRunAllGatherRing(int tid, int nthreads) {
  const struct mcclCollArgs& a = collShmem.args;
  const int nranks = a.nRanks;
  const int64_t count = (int64_t)a.count;
  const bool inPlace = (const T*)a.sendbuff == (const T*)a.recvbuff + a.ringRanks[0] * count;
  int64_t lo, n;
  mcclCollChannelPart<T>(&lo, &n);
  MCCL_COLL_PRIMS(prims, true, true);
  const int64_t chunk = prims.chunkElems();
  for (int64_t e = 0; e < n && !prims.aborted(); e += chunk) {
    const int64_t dataOffset = lo + e;
    const int nelem = (int)(chunk < n - e ? chunk : n - e);
    int64_t offset = dataOffset + a.ringRanks[0] * count;
    if (inPlace)
      prims.send(dataOffset, nelem);
    else
      prims.copySend(dataOffset, offset, nelem);
    for (int j = 1; j < nranks - 1; ++j) {
      offset = dataOffset + a.ringRanks[nranks - j] * count;
      prims.recvCopySend(offset, nelem);
    }
    offset = dataOffset + a.ringRanks[1] * count;
    prims.recv(offset, nelem);
  }
  return prims.aborted();
}

// ---- ReduceScatter (reduce_scatter.h runRing) -----------------------------------------------------
// Block r of the input is what rank r receives reduced. Each rank starts the partial sum of its
// prev's block, adds its input to what arrives for nRanks-2 steps and passes it on, and last adds
// its input to its own block's sum and writes the result (postOp: avg divides).
template <typename T, typename RedOp, typename Proto>
__device__ bool mcclRunReduceScatterRing(int tid, int nthreads) {
  const struct mcclCollArgs& a = collShmem.args;
  const int nranks = a.nRanks;
  const int64_t count = (int64_t)a.count;
  int64_t lo, n;
  mcclCollChannelPart<T>(&lo, &n);
  MCCL_COLL_PRIMS(prims, true, true);
  const int64_t chunk = prims.chunkElems();
  for (int64_t e = 0; e < n && !prims.aborted(); e += chunk) {
    const int64_t dataOffset = lo + e;
    const int nelem = (int)(chunk < n - e ? chunk : n - e);
    int64_t offset = dataOffset + a.ringRanks[nranks - 1] * count;
    prims.send(offset, nelem);
    for (int j = 2; j < nranks; ++j) {
      offset = dataOffset + a.ringRanks[nranks - j] * count;
      prims.recvReduceSend(offset, nelem);
    }
    offset = dataOffset + a.ringRanks[0] * count;
    prims.recvReduceCopy(offset, dataOffset, nelem, /*postOp=*/true);
  }
  return prims.aborted();
}

// ---- one rank ---------------------------------------------------------------------------------------
// The output is the input (avg divides by 1); nothing to do in place. AllGather's input goes to
// block 0 of the output, ReduceScatter's block 0 of the input to the output: both offsets are 0.
template <typename T, typename RedOp>
__device__ void mcclCollRunSelf(int tid, int nthreads) {
  const struct mcclCollArgs& a = collShmem.args;
  if (a.sendbuff == (const void*)a.recvbuff) return;
  int64_t lo, n;
  mcclCollChannelPart<T>(&lo, &n);
  if (n <= 0) return;
  RedOp op;
  op.arg = a.redOpArg;
  void* src[1] = {(void*)((const T*)a.sendbuff + lo)};
  void* dst[1] = {(void*)((T*)a.recvbuff + lo)};
  mcclReduceCopy<MCCL_SIMPLE_UNROLL, T, RedOp, 1, 1>(tid, nthreads, op, true, src, dst, n);
}

// ---- dispatch ---------------------------------------------------------------------------------------
template <typename T, typename RedOp, typename Proto, bool Reducing>
__device__ bool mcclRunCollRing(int tid, int nthreads) {
  const int func = collShmem.args.func;
  if constexpr (Reducing) {
    return func == mcclCollReduce ? mcclRunReduceRing<T, RedOp, Proto>(tid, nthreads)
                                  : mcclRunReduceScatterRing<T, RedOp, Proto>(tid, nthreads);
  } else {
    return func == mcclCollBroadcast ? mcclRunBroadcastRing<T, RedOp, Proto>(tid, nthreads)
                                     : mcclRunAllGatherRing<T, RedOp, Proto>(tid, nthreads);
  }
}

template <typename T, typename RedOp, bool Reducing>
__device__ void mcclRunColl(int tid, int nthreads) {
  if (collShmem.args.nRanks == 1) {
    mcclCollRunSelf<T, RedOp>(tid, nthreads);
  } else if (collShmem.args.proto == MCCL_PROTO_LL) {
    mcclRunCollRing<T, RedOp, ProtoLL, Reducing>(tid, nthreads);
  } else {
    mcclRunCollRing<T, RedOp, ProtoSimple, Reducing>(tid, nthreads);
  }
}

// Reduce and ReduceScatter for one element type, every operation.
template <typename T>
__device__ __forceinline__ void mcclCollReduceMain(const struct mcclCollArgs& args) {
  const int tid = threadIdx.x, nthreads = blockDim.x;
  mcclDependentGridBegin();  // collectives.c launches it as a dependent grid
  mcclCollLoadArgs(&args, tid, nthreads);
  switch (collShmem.args.op) {
    case mcclSum:
      mcclRunColl<T, FuncSum<T>, true>(tid, nthreads);
      break;
    case mcclProd:
      mcclRunColl<T, FuncProd<T>, true>(tid, nthreads);
      break;
    case mcclMax:
      mcclRunColl<T, FuncMax<T>, true>(tid, nthreads);
      break;
    case mcclMin:
      mcclRunColl<T, FuncMin<T>, true>(tid, nthreads);
      break;
    default:
      mcclRunColl<T, FuncAvg<T>, true>(tid, nthreads);
      break;
  }
}

// Broadcast and AllGather: bytes (FuncSum is never applied: no primitive they call reduces).
__device__ __forceinline__ void mcclCollCopyMain(const struct mcclCollArgs& args) {
  const int tid = threadIdx.x, nthreads = blockDim.x;
  mcclDependentGridBegin();  // collectives.c launches it as a dependent grid
  mcclCollLoadArgs(&args, tid, nthreads);
  mcclRunColl<uint8_t, FuncSum<uint8_t>, false>(tid, nthreads);
}

#define MCCL_DEFINE_COLL_KERNEL(suffix, T)                          \
  extern "C" __global__ void __launch_bounds__(MCCL_AR_MAX_THREADS) \
      mcclCollKernel_##suffix(struct mcclCollArgs args) {           \
    mcclCollReduceMain<T>(args);                                    \
  }                                                                 \
  MCCL_KERNEL_REGISTER(mcclCollKernel_##suffix)

#define MCCL_DEFINE_COLL_COPY_KERNEL()                                                                              \
  extern "C" __global__ void __launch_bounds__(MCCL_AR_MAX_THREADS) mcclCollKernel_copy(struct mcclCollArgs args) { \
    mcclCollCopyMain(args);                                                                                         \
  }                                                                                                                 \
  MCCL_KERNEL_REGISTER(mcclCollKernel_copy)

#endif
