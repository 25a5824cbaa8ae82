// Lab 07: the send/receive kernel (NCCL 2.28.9 src/device/sendrecv.h, RunWorkBatch<ncclFuncSendRecv>
// with runSend / runRecv), over lab 06's Primitives: SIMPLE, or LL for a direction of at most
// MCCL_P2P_LL_THRESHOLD bytes a part (NCCL's P2P LL threshold, so a small message costs no fence and
// no tail round trip). It moves bytes: one kernel serves every type. One launch carries up to
// MCCL_P2P_MAX_WORKS works, one per round of the host's schedule (a send to rank+round and a receive
// from rank-round). A work's send and receive are each cut into parts, part p on channel
// (channelBase + p) mod nP2pChannels (ncclP2pChannelToPart); block c runs its part of every work, in
// work order, over channel c's point-to-point connections (connIndex MCCL_P2P_CONN_INDEX), one chunk
// of each direction in turn, so neither direction waits for the other to finish (the FIFO holds more
// than one chunk).
//
// Against NCCL, said once here: a block runs its works one after the other, where NCCL splits the
// block's warps between up to 8 works of a batch and runs them side by side (lab 06's Primitives use
// one pair of named barriers per block). Every rank runs its rounds in the same order, and a round's
// send and receive meet the peer's receive and send of the same round, so the order cannot deadlock.
#ifndef MCCL_SENDRECV_KERNELS_CUH_
#define MCCL_SENDRECV_KERNELS_CUH_

#include <type_traits>
#include "device/primitives.cuh"
#include "sendrecv_args.h"

struct mcclSendRecvShmem {
  struct mcclSendRecvArgs args;
};
MCCL_SHMEM_DEFINE(struct mcclSendRecvShmem, sendRecvShmem);

// This block's part [lo, lo + n) of a direction of `bytes` cut into nParts parts from channel base
// (NCCL's ncclP2pChannelToPart and ncclP2pPartBounds); n is 0 where the block has no part.
__device__ __forceinline__ void mcclP2pPart(int64_t bytes, int nParts, int base, int nP2pChannels, int64_t* lo,
                                            int64_t* n) {
  const int part = ((int)blockIdx.x - base) & (nP2pChannels - 1);
  *lo = 0;
  *n = 0;
  if (part >= nParts) return;
  const int64_t per = mcclDivUp(mcclDivUp(bytes, (int64_t)nParts), (int64_t)MCCL_P2P_PART_ALIGN) * MCCL_P2P_PART_ALIGN;
  const int64_t l = (int64_t)part * per < bytes ? (int64_t)part * per : bytes;
  *lo = l;
  *n = (l + per < bytes ? l + per : bytes) - l;
}

// Moves this block's part of a work: sN bytes from `in` to the send connection and rN bytes from
// the receive connection to `out`, one chunk of each direction in turn (neither waits for the other
// to finish: each FIFO holds more than one chunk). Both directions of one protocol share one
// Primitives; with different protocols (a small send as LL lines, a large receive in SIMPLE slots,
// or the reverse) each has its own, used in turn by the same threads.
template <typename SendProto, typename RecvProto>
__device__ __forceinline__ bool mcclP2pRun(const struct mcclSendRecvArgs& a, const uint8_t* in, uint8_t* out,
                                           int64_t sN, int64_t rN, struct mcclConnInfo* sendConn,
                                           struct mcclConnInfo* recvConn, int tid, int nthreads) {
  typedef Primitives<uint8_t, FuncSum<uint8_t>, SendProto> SendPrims;
  typedef Primitives<uint8_t, FuncSum<uint8_t>, RecvProto> RecvPrims;
  constexpr bool Shared = std::is_same<SendProto, RecvProto>::value;
  const int ss = a.chunkSteps / a.sliceSteps;
  if (Shared) {
    SendPrims prims(tid, nthreads, recvConn, sendConn, in, out, 1, ss, a.sliceSteps);
    const int64_t chunk = prims.chunkElems();
    const int64_t n = sN > rN ? sN : rN;
    for (int64_t e = 0; e < n && !prims.aborted(); e += chunk) {
      if (e < sN) prims.send(e, (int)(chunk < sN - e ? chunk : sN - e));
      if (e < rN && !prims.aborted()) prims.recv(e, (int)(chunk < rN - e ? chunk : rN - e));
    }
    return prims.aborted();
  }
  SendPrims sp(tid, nthreads, NULL, sendConn, in, NULL, 1, ss, a.sliceSteps);
  RecvPrims rp(tid, nthreads, recvConn, NULL, NULL, out, 1, ss, a.sliceSteps);
  const int64_t sc = sp.chunkElems(), rc = rp.chunkElems();
  for (int64_t es = 0, er = 0; (es < sN || er < rN) && !sp.aborted() && !rp.aborted();) {
    if (es < sN) {
      sp.send(es, (int)(sc < sN - es ? sc : sN - es));
      es += sc;
    }
    if (er < rN && !sp.aborted()) {
      rp.recv(er, (int)(rc < rN - er ? rc : rN - er));
      er += rc;
    }
  }
  return sp.aborted() || rp.aborted();
}

// Returns whether the block saw the abort flag (the whole block agrees).
__device__ __forceinline__ bool mcclP2pRunWork(const struct mcclSendRecvArgs& a, const struct mcclP2pWork& w, int tid,
                                               int nthreads) {
  int64_t sLo, sN, rLo, rN;
  mcclP2pPart((int64_t)w.sendBytes, w.nSendParts, w.channelBase, a.nP2pChannels, &sLo, &sN);
  mcclP2pPart((int64_t)w.recvBytes, w.nRecvParts, w.channelBase, a.nP2pChannels, &rLo, &rN);
  if (w.sendRank == a.rank) {  // to oneself: a copy, no connection
    if (sN <= 0 || w.sendAddr == (const void*)w.recvAddr) return false;
    FuncSum<uint8_t> op;
    op.arg = 1;
    void* src[1] = {(void*)((const uint8_t*)w.sendAddr + sLo)};
    void* dst[1] = {(void*)((uint8_t*)w.recvAddr + sLo)};
    mcclReduceCopy<MCCL_SIMPLE_UNROLL, uint8_t, FuncSum<uint8_t>, 1, 1>(tid, nthreads, op, false, src, dst, sN);
    __syncthreads();  // the next work reuses the threads
    return false;
  }
  // A direction this block has no bytes of is not touched, on either side (both cut alike).
  if (sN <= 0 && rN <= 0) return false;
  struct mcclDevChannelPeer* peers = a.devPeers[blockIdx.x];
  struct mcclConnInfo* recvConn = rN > 0 ? &peers[w.recvRank].recv[MCCL_P2P_CONN_INDEX] : NULL;
  struct mcclConnInfo* sendConn = sN > 0 ? &peers[w.sendRank].send[MCCL_P2P_CONN_INDEX] : NULL;
  const uint8_t* in = (const uint8_t*)w.sendAddr + sLo;
  uint8_t* out = (uint8_t*)w.recvAddr + rLo;
  const bool sendLL = sN > 0 && (w.llMask & MCCL_P2P_SEND_LL), recvLL = rN > 0 && (w.llMask & MCCL_P2P_RECV_LL);
  // One protocol for the directions this block moves: one Primitives over both connections (NCCL
  // runs a work's send and receive each with its protocol too, in warps of their own).
  if (sN <= 0 || rN <= 0 || sendLL == recvLL)
    return (sendLL || recvLL) ? mcclP2pRun<ProtoLL, ProtoLL>(a, in, out, sN, rN, sendConn, recvConn, tid, nthreads)
                              : mcclP2pRun<ProtoSimple, ProtoSimple>(a, in, out, sN, rN, sendConn, recvConn, tid, nthreads);
  return sendLL ? mcclP2pRun<ProtoLL, ProtoSimple>(a, in, out, sN, rN, sendConn, recvConn, tid, nthreads)
                : mcclP2pRun<ProtoSimple, ProtoLL>(a, in, out, sN, rN, sendConn, recvConn, tid, nthreads);
}

__device__ __forceinline__ void mcclSendRecvMain(const struct mcclSendRecvArgs& args) {
  const int tid = threadIdx.x, nthreads = blockDim.x;
  mcclDependentGridBegin();  // sendrecv.c launches it as a dependent grid
  static_assert(sizeof(struct mcclSendRecvArgs) % sizeof(uint32_t) == 0, "copied in 4-byte words");
  {
    const uint32_t* src = (const uint32_t*)&args;
    uint32_t* dst = (uint32_t*)&sendRecvShmem.args;
    for (int i = tid; i < (int)(sizeof(args) / sizeof(uint32_t)); i += nthreads) dst[i] = src[i];
    if (tid == 0) {
      mcclShmem.work.abortFlag = args.abortFlag;
      mcclShmem.work.trace = args.trace;
      mcclShmem.work.op = mcclDevOpNone;
    }
    __syncthreads();
  }
  const struct mcclSendRecvArgs& a = sendRecvShmem.args;
  bool aborted = false;
  for (int w = 0; w < a.nWorks && !aborted; w++) aborted = mcclP2pRunWork(a, a.works[w], tid, nthreads);
}

#define MCCL_DEFINE_SENDRECV_KERNEL()                                                                              \
  extern "C" __global__ void __launch_bounds__(MCCL_AR_MAX_THREADS) mcclSendRecvKernel(struct mcclSendRecvArgs args) { \
    mcclSendRecvMain(args);                                                                                        \
  }                                                                                                                \
  MCCL_KERNEL_REGISTER(mcclSendRecvKernel)

#endif
