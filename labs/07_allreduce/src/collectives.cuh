// Lab 07 device code: the ring work functions of NCCL's other collectives (NCCL 2.28.9
// src/device/broadcast.h, reduce.h, all_gather.h, reduce_scatter.h: each RunWorkColl's runRing), over
// lab 06's Primitives with the SIMPLE or LL protocol. Broadcast and AllGather move bytes (NCCL runs them
// as ncclInt8: the planner gives their count in bytes); Reduce and ReduceScatter reduce elements of T.
#ifndef MCCL_COLLECTIVES_CUH_
#define MCCL_COLLECTIVES_CUH_

#include "all_reduce.cuh"

// The Primitives of this block's channel: the receive connection from the ring's prev and/or the send
// connection to its next. A rank that does not use one direction in this call passes none, and so
// does the peer at that connection's other end (the same ring, the same root), so both keep their
// step counters where they were.
#define MCCL_COLL_PRIMS(prims, recv, send)                                                                           \
  Primitives<T, RedOp, Proto> prims(tid, nthreads, (recv) ? comm.ringRecv + blockIdx.x : NULL,                       \
                                    (send) ? comm.ringSend + blockIdx.x : NULL, w.sendbuff, w.recvbuff, redOpArg, 0, \
                                    kShmem.args.chunkSteps / kShmem.args.sliceSteps, kShmem.args.sliceSteps)

// This block's part of the per-rank count: the work's channel c owns [lo, lo + n), cut at 512-byte
// multiples as the allreduce ring (lab 06's mcclEvenPart).
template <typename T>
__device__ __forceinline__ void mcclCollChannelPart(const struct mcclDevWorkColl& w, int64_t* lo, int64_t* n) {
  int64_t l, h;
  mcclEvenPart(0, (int64_t)w.count, w.nChannels, (int)blockIdx.x - w.channelLo, 512 / (int64_t)sizeof(T), l, h);
  *lo = l;
  *n = h - l;
}

// ---- Broadcast (broadcast.h runRing) --------------------------------------------------------------
// The root sends each chunk (copying it to its own output when out of place); every other rank
// receives it, keeps a copy and passes it on, except the root's prev, which only receives.
template <typename T, typename RedOp, typename Proto>
MCCL_WORK_FN bool mcclRunBroadcastRing(const struct mcclDevWorkColl& w, uint64_t redOpArg, int tid, int nthreads) {
  const struct mcclKernelComm& comm = kShmem.comm;
  const int rank = comm.ringRanks[0], nextRank = comm.ringRanks[1];
  const bool isRoot = rank == w.root, nextIsRoot = nextRank == w.root;
  const bool inPlace = w.sendbuff == (const void*)w.recvbuff;
  int64_t lo, n;
  mcclCollChannelPart<T>(w, &lo, &n);
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
// partial result on; the root adds its input last and writes the result (postOp: SumPostDiv divides).
template <typename T, typename RedOp, typename Proto>
MCCL_WORK_FN bool mcclRunReduceRing(const struct mcclDevWorkColl& w, uint64_t redOpArg, int tid, int nthreads) {
  const struct mcclKernelComm& comm = kShmem.comm;
  const int rank = comm.ringRanks[0], prevRank = comm.ringRanks[comm.nRanks - 1];
  const bool isRoot = rank == w.root, prevIsRoot = prevRank == w.root;
  int64_t lo, n;
  mcclCollChannelPart<T>(w, &lo, &n);
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
MCCL_WORK_FN bool mcclRunAllGatherRing(const struct mcclDevWorkColl& w, uint64_t redOpArg, int tid, int nthreads) {
  const struct mcclKernelComm& comm = kShmem.comm;
  const int nranks = comm.nRanks;
  const int64_t count = (int64_t)w.count;
  const bool inPlace = (const T*)w.sendbuff == (const T*)w.recvbuff + comm.ringRanks[0] * count;
  int64_t lo, n;
  mcclCollChannelPart<T>(w, &lo, &n);
  MCCL_COLL_PRIMS(prims, true, true);
  const int64_t chunk = prims.chunkElems();
  for (int64_t e = 0; e < n && !prims.aborted(); e += chunk) {
    const int64_t dataOffset = lo + e;
    const int nelem = (int)(chunk < n - e ? chunk : n - e);
    int64_t offset = dataOffset + comm.ringRanks[0] * count;
    if (inPlace)
      prims.send(dataOffset, nelem);
    else
      prims.copySend(dataOffset, offset, nelem);
    for (int j = 1; j < nranks - 1; ++j) {
      offset = dataOffset + comm.ringRanks[nranks - j] * count;
      prims.recvCopySend(offset, nelem);
    }
    offset = dataOffset + comm.ringRanks[1] * count;
    prims.recv(offset, nelem);
  }
  return prims.aborted();
}

// ---- ReduceScatter (reduce_scatter.h runRing) -----------------------------------------------------
// Block r of the input is what rank r receives reduced. Each rank starts the partial result of its
// prev's block, adds its input to what arrives for nRanks-2 steps and passes it on, and last adds
// its input to its own block's result and writes it (postOp: SumPostDiv divides).
template <typename T, typename RedOp, typename Proto>
MCCL_WORK_FN bool mcclRunReduceScatterRing(const struct mcclDevWorkColl& w, uint64_t redOpArg, int tid, int nthreads) {
  const struct mcclKernelComm& comm = kShmem.comm;
  const int nranks = comm.nRanks;
  const int64_t count = (int64_t)w.count;
  int64_t lo, n;
  mcclCollChannelPart<T>(w, &lo, &n);
  MCCL_COLL_PRIMS(prims, true, true);
  const int64_t chunk = prims.chunkElems();
  for (int64_t e = 0; e < n && !prims.aborted(); e += chunk) {
    const int64_t dataOffset = lo + e;
    const int nelem = (int)(chunk < n - e ? chunk : n - e);
    int64_t offset = dataOffset + comm.ringRanks[nranks - 1] * count;
    prims.send(offset, nelem);
    for (int j = 2; j < nranks; ++j) {
      offset = dataOffset + comm.ringRanks[nranks - j] * count;
      prims.recvReduceSend(offset, nelem);
    }
    offset = dataOffset + comm.ringRanks[0] * count;
    prims.recvReduceCopy(offset, dataOffset, nelem, /*postOp=*/true);
  }
  return prims.aborted();
}

// ---- dispatch: a ring collective's work on this block -----------------------------------------------
// Reduce and ReduceScatter reduce elements of T with the work's operation; Broadcast and AllGather move
// bytes (T = uint8_t, no operation applied). One rank copies, on the whole block.
template <typename T, typename RedOp, bool Reducing>
__device__ bool mcclRunCollRing(const struct mcclDevWorkColl& w, uint64_t redOpArg, int tid, int nthreads) {
  if (kShmem.comm.nRanks == 1) return mcclRunSelf<T, RedOp>(w, redOpArg, tid, blockDim.x);
  if (tid >= nthreads) return false;
  return mcclWithProto(w.protocol, [&](auto proto) {
    typedef decltype(proto) Proto;
    if constexpr (Reducing) {
      if (w.func == mcclFuncReduce) return mcclRunReduceRing<T, RedOp, Proto>(w, redOpArg, tid, nthreads);
      return mcclRunReduceScatterRing<T, RedOp, Proto>(w, redOpArg, tid, nthreads);
    } else {
      if (w.func == mcclFuncBroadcast) return mcclRunBroadcastRing<T, RedOp, Proto>(w, redOpArg, tid, nthreads);
      return mcclRunAllGatherRing<T, RedOp, Proto>(w, redOpArg, tid, nthreads);
    }
  });
}

#endif
