// Lab 07 device code: AllReduce's work functions in the generic kernel (NCCL 2.28.9
// src/device/all_reduce.h runRing; the symmetric RSxLD_AGxST kernel of src/device/symmetric/
// all_reduce.cuh for two-shot), and one rank's copy, which every reducing collective shares.
#ifndef MCCL_ALL_REDUCE_CUH_
#define MCCL_ALL_REDUCE_CUH_

#include "dev_common.cuh"

// ---- ring (runRing) -------------------------------------------------------------------------------
// Each channel owns a contiguous part of the buffer (NCCL's ncclCollCbdPart: cut at 512-byte
// multiples here, as lab 06), walked nranks chunks at a time. For chunk indices the ring position
// (ringIx) counts, not the rank: step 0 sends chunk ringIx-1, the middle steps reduce and pass on,
// step n-1 produces the final chunk ringIx (postOp: SumPostDiv divides), the rest pass it around.
template <typename T, typename RedOp, typename Proto>
MCCL_WORK_FN bool mcclRunRing(const struct mcclDevWorkColl& w, uint64_t redOpArg, int tid, int nthreads) {
  const struct mcclKernelComm& comm = kShmem.comm;
  const int nranks = comm.nRanks;
  const int ringIx = comm.ringIndex;
  const int ch = blockIdx.x;
  int64_t chLo, chHi;
  mcclEvenPart(0, (int64_t)w.count, w.nChannels, ch - w.channelLo, 512 / (int64_t)sizeof(T), chLo, chHi);
  const int64_t channelCount = chHi - chLo;
  bool aborted;
  {
    Primitives<T, RedOp, Proto> prims(tid, nthreads, comm.ringRecv + ch, comm.ringSend + ch, w.sendbuff, w.recvbuff,
                                      redOpArg, 0, kShmem.args.chunkSteps / kShmem.args.sliceSteps,
                                      kShmem.args.sliceSteps);
    int64_t chunkCount = prims.chunkElems();
    const int64_t loopCount = (int64_t)nranks * chunkCount;
    auto modRanks = [nranks](int r) -> int { return r - (r >= nranks ? nranks : 0); };
    for (int64_t elemOffset = 0; elemOffset < channelCount && !prims.aborted(); elemOffset += loopCount) {
      const int64_t remCount = channelCount - elemOffset;
      // The last round spreads what is left evenly over the ranks, in 256-byte pieces.
      if (remCount < loopCount) {
        const int64_t q = 256 / (int64_t)sizeof(T);
        chunkCount = mcclDivUp(mcclDivUp(remCount, (int64_t)nranks), q) * q;
      }
      auto at = [&](int chunk, int64_t* offset) -> int {
        int64_t chunkOffset = chunk * chunkCount;
        *offset = chLo + elemOffset + chunkOffset;
        int64_t n = remCount - chunkOffset;
        return (int)(n < chunkCount ? (n < 0 ? 0 : n) : chunkCount);
      };
      int64_t offset;
      int nelem = at(modRanks(ringIx + nranks - 1), &offset);
      prims.send(offset, nelem);
      for (int j = 2; j < nranks; ++j) {
        nelem = at(modRanks(ringIx + nranks - j), &offset);
        prims.recvReduceSend(offset, nelem);
      }
      nelem = at(ringIx, &offset);
      prims.recvReduceCopySend(offset, offset, nelem, /*postOp=*/true);
      for (int j = 1; j < nranks - 1; ++j) {
        nelem = at(modRanks(ringIx + nranks - j), &offset);
        prims.recvCopySend(offset, nelem);
      }
      nelem = at(modRanks(ringIx + 1), &offset);
      prims.recv(offset, nelem);
    }
    aborted = prims.aborted();
  }
  return aborted;
}

// ---- one rank ---------------------------------------------------------------------------------------
// The result is the input with the operation's pre and post steps (PreMulSum multiplies, SumPostDiv
// divides by 1), as NCCL's one-rank path; in place, only a PreMulSum has anything to do. The copy goes
// through the workers' loop so every type and alignment is handled the same way. Broadcast and AllGather
// call it with bytes; ReduceScatter's block 0 and AllGather's output block 0 are both at offset 0.
template <typename T, typename RedOp>
MCCL_WORK_FN bool mcclRunSelf(const struct mcclDevWorkColl& w, uint64_t redOpArg, int tid, int nthreads) {
  if (w.sendbuff == (const void*)w.recvbuff && w.redOp != mcclDevPreMulSum) return false;
  int64_t lo, hi;
  mcclEvenPart(0, (int64_t)w.count, w.nChannels, (int)blockIdx.x - w.channelLo, 16 / (int64_t)sizeof(T), lo, hi);
  if (hi <= lo) return false;
  RedOp op;
  op.arg = redOpArg;
  void* src[1] = {(void*)((const T*)w.sendbuff + lo)};
  void* dst[1] = {(void*)((T*)w.recvbuff + lo)};
  mcclReduceCopy<MCCL_SIMPLE_UNROLL, T, RedOp, 1, 1, 1>(tid, nthreads, op, true, src, dst, hi - lo);
  return false;
}

// ---- two-shot (reduce-scatter by loads, all-gather by stores) -------------------------------------
// Rank r owns chunk r of the buffer. After a barrier (every rank's input is ready), each block reads
// its slice of chunk r from every rank's sendbuff (16-byte volatile loads over NVLink, or the sim's
// shared mappings), reduces in rank order, and stores the result into every rank's recvbuff. A
// second barrier keeps every rank in the kernel until all stores into its recvbuff have landed and
// no peer still reads its sendbuff. Each two-shot work of a launch is one symmetric call, on the channels
// (blocks) of its own: its slots are those blocks' and its number base + seqOffset + 1 (dev_common.cuh).

// Two-shot's 16-byte packs of [lo, lo + npacks * 16 bytes): each trip loads U packs from R ranks
// before it uses any, so a trip waits for one memory latency, not one per rank (a peer's pack is a
// load over NVLink); more than R ranks are taken R at a time (NCCL's allreduceDeep unrolls over peers
// the same way, src/device/symmetric/all_reduce.cuh). Every rank's input goes through the operation's
// pre step; the reduction stays in rank order; the result goes to every rank's recvbuff.
template <typename T, typename RedOp, int R, int U>
__device__ __forceinline__ void mcclTwoShotPacks(const RedOp& op, int64_t lo, int64_t npacks, int tid, int nthreads) {
  const int nranks = kShmem.args.nRanks;
  for (int64_t base = 0; base < npacks; base += (int64_t)nthreads * U) {
    mcclPack<T> acc[U] = {};  // set by rank 0's packs; zeroed for the host compiler's sake
    for (int p0 = 0; p0 < nranks; p0 += R) {
      mcclPack<T> x[R][U];
#pragma unroll
      for (int i = 0; i < R; i++) {
        if (p0 + i >= nranks) break;
        const uint64_t* src = (const uint64_t*)((const T*)kShmem.peerSend[p0 + i] + lo);
#pragma unroll
        for (int u = 0; u < U; u++) {
          const int64_t k = base + (int64_t)u * nthreads + tid;
          if (k < npacks) load128(src + 2 * k, x[i][u].u[0], x[i][u].u[1]);
        }
      }
#pragma unroll
      for (int i = 0; i < R; i++) {
        if (p0 + i >= nranks) break;
#pragma unroll
        for (int u = 0; u < U; u++) {
          const int64_t k = base + (int64_t)u * nthreads + tid;
          if (k < npacks) {
            const mcclPack<T> in = mcclPrePack<T>(op, x[i][u]);
            acc[u] = p0 + i == 0 ? in : mcclApplyPack<T>(op, acc[u], in);
          }
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int64_t k = base + (int64_t)u * nthreads + tid;
      if (k < npacks) acc[u] = mcclPostPack<T>(op, acc[u]);
    }
    for (int p = 0; p < nranks; p++) {
      uint64_t* dst = (uint64_t*)((T*)kShmem.peerRecv[p] + lo);
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int64_t k = base + (int64_t)u * nthreads + tid;
        if (k < npacks) store128(dst + 2 * k, acc[u].u[0], acc[u].u[1]);
      }
    }
  }
}

template <typename T, typename RedOp>
MCCL_WORK_FN bool mcclRunTwoShot(const struct mcclDevWorkColl& w, uint64_t redOpArg, int tid, int nthreads) {
  const int nranks = kShmem.args.nRanks;
  if (tid < nranks) {  // the arrive barrier's syncthreads publishes them
    kShmem.peerSend[tid] = w.sendPeers[tid] + w.sendOffset;
    kShmem.peerRecv[tid] = w.recvPeers[tid] + w.recvOffset;
  }
  const uint64_t seq = kShmem.seq + w.seqOffset + 1;
  const int64_t count = (int64_t)w.count;
  const int64_t q = 16 / (int64_t)sizeof(T);
  int64_t cLo, cHi, lo, hi;  // this rank's chunk, then this block's part of it
  mcclEvenPart(0, count, nranks, kShmem.args.rank, q, cLo, cHi);
  mcclEvenPart(cLo, cHi, w.nChannels, (int)blockIdx.x - w.channelLo, q, lo, hi);
  RedOp op;
  op.arg = redOpArg;
  bool aborted = mcclSymBarrier<true>(seq, tid);
  if (!aborted) {
    const int64_t n = hi - lo;
    // Head, body, tail (lab 06's copy loop): the buffers usually sit at the same offsets of every rank's
    // windows, so where all of them agree modulo 16 the elements before the first aligned pack go one by
    // one and the rest in 16-byte packs (lo is a multiple of 16 bytes, so the peers' addresses decide).
    // Where they disagree, or are not even element-aligned, every element goes alone.
    const uintptr_t base = (uintptr_t)kShmem.peerSend[0];
    uintptr_t differ = base & (sizeof(T) - 1);
    for (int p = 0; p < nranks; p++)
      differ |= ((uintptr_t)kShmem.peerSend[p] ^ base) | ((uintptr_t)kShmem.peerRecv[p] ^ base);
    int64_t head = n, npacks = 0;
    if ((differ & 15) == 0) {
      const int64_t headElts = (int64_t)((16 - ((base + (uintptr_t)lo * sizeof(T)) & 15)) & 15) / (int64_t)sizeof(T);
      head = headElts < n ? headElts : n;
      npacks = (n - head) / q;
      // Four packs in flight per thread: two ranks' two each, or four ranks' one each (the 640-thread
      // bound leaves 96 registers a thread).
      if (nranks <= 2)
        mcclTwoShotPacks<T, RedOp, 2, 2>(op, lo + head, npacks, tid, nthreads);
      else
        mcclTwoShotPacks<T, RedOp, 4, 1>(op, lo + head, npacks, tid, nthreads);
    }
    const int64_t tailFrom = head + npacks * q;
    for (int64_t k = tid; k < head + (n - tailFrom); k += nthreads) {
      const int64_t i = lo + (k < head ? k : tailFrom + (k - head));
      T acc = op.pre(mcclLoadElt((const T*)kShmem.peerSend[0] + i));
      for (int p = 1; p < nranks; p++) acc = op.apply(acc, op.pre(mcclLoadElt((const T*)kShmem.peerSend[p] + i)));
      acc = op.post(acc);
      for (int p = 0; p < nranks; p++) mcclStoreElt((T*)kShmem.peerRecv[p] + i, acc);
    }
    aborted = mcclSymBarrier<false>(seq, tid);
  }
  return aborted;
}

// ---- dispatch: an AllReduce work on this block ----------------------------------------------------
// The ring runs on the work's warps (nthreads); two-shot and one rank on the whole block.
template <typename T, typename RedOp>
__device__ bool mcclRunAllReduce(const struct mcclDevWorkColl& w, uint64_t redOpArg, int tid, int nthreads) {
  if (kShmem.comm.nRanks == 1) return mcclRunSelf<T, RedOp>(w, redOpArg, tid, blockDim.x);
  if (w.algorithm == MCCL_ALGO_TWOSHOT) return mcclRunTwoShot<T, RedOp>(w, redOpArg, tid, blockDim.x);
  if (tid >= nthreads) return false;
  return mcclWithProto(w.protocol,
                       [&](auto proto) { return mcclRunRing<T, RedOp, decltype(proto)>(w, redOpArg, tid, nthreads); });
}

#endif
