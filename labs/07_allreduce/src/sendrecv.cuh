// Lab 07 device code: the point-to-point work function (NCCL 2.28.9 src/device/sendrecv.h,
// RunWorkBatch<ncclFuncSendRecv> with runSend / runRecv), over lab 06's Primitives: SIMPLE, or LL for a
// direction of at most MCCL_P2P_LL_THRESHOLD bytes a part (NCCL's P2P LL threshold, so a small message
// costs no fence and no tail round trip). It moves bytes: every type's kernel runs it. A work is one
// round of the host's schedule (a send to rank+round and a receive from rank-round); its send and
// receive are each cut into parts, part p on channel (channelBase + p) mod nP2pChannels
// (ncclP2pChannelToPart); block c runs its part of every work, in work order, over channel c's
// point-to-point connections (connIndex MCCL_P2P_CONN_INDEX). A copy to oneself runs instead on blocks
// launched after the channels' (MCCL_P2P_SELF_MAX_BLOCKS), beside the transfers. Where the block moves both directions
// of a work, the send and the receive run at once on warps of their own, each a Primitives group with its own barriers
// (as NCCL's run()), so neither direction's copy waits for the other's.
//
// Against NCCL, said once here: a block runs its works one after the other, where NCCL splits the
// block's warps between up to 8 works of a batch and runs them side by side. Every rank runs its
// rounds in the same order, and a round's send and receive meet the peer's receive and send of the
// same round, so the order cannot deadlock.
#ifndef MCCL_SENDRECV_CUH_
#define MCCL_SENDRECV_CUH_

#include "dev_common.cuh"

// This block's part [lo, lo + n) of a direction of `bytes` cut into nParts parts from channel base
// (NCCL's ncclP2pChannelToPart and ncclP2pPartBounds); n is 0 where the block has no part.
__device__ __forceinline__ void mcclP2pPart(int64_t bytes, int nParts, int base, int nP2pChannels, int64_t* lo,
                                            int64_t* n) {
  const int part = ((int)blockIdx.x - base) & (nP2pChannels - 1);
  *lo = 0;
  *n = 0;
  if (part >= nParts) return;
  int64_t l, h;
  mcclEvenPart(0, bytes, nParts, part, MCCL_P2P_PART_ALIGN, l, h);
  *lo = l;
  *n = h - l;
}

// One direction of a work on this block: its part of `bytes` moved chunk by chunk through `conn`, by
// `nthreads` threads (tid counted within them) as Primitives group `group` (NCCL's runSend / runRecv).
// Returns whether the group saw the abort flag.
template <typename Proto, bool Send>
__device__ __forceinline__ bool mcclP2pDirection(uint8_t* buf, int64_t bytes, struct mcclConnInfo* conn, int tid,
                                                 int nthreads, int group) {
  Primitives<uint8_t, FuncSum<uint8_t>, Proto> prims(tid, nthreads, Send ? NULL : conn, Send ? conn : NULL, buf, buf, 0,
                                                     group, kShmem.args.chunkSteps / kShmem.args.sliceSteps,
                                                     kShmem.args.sliceSteps);
  const int64_t chunk = prims.chunkElems();
  for (int64_t e = 0; e < bytes && !prims.aborted(); e += chunk) {
    const int n = (int)(chunk < bytes - e ? chunk : bytes - e);
    if (Send)
      prims.send(e, n);
    else
      prims.recv(e, n);
  }
  return prims.aborted();
}

template <bool Send>
__device__ __forceinline__ bool mcclP2pDirection(bool ll, uint8_t* buf, int64_t bytes, struct mcclConnInfo* conn,
                                                 int tid, int nthreads, int group) {
  return ll ? mcclP2pDirection<ProtoLL, Send>(buf, bytes, conn, tid, nthreads, group)
            : mcclP2pDirection<ProtoSimple, Send>(buf, bytes, conn, tid, nthreads, group);
}

// The Primitives groups of a split work (common.cuh); a one-direction work is group 0 too.
#define MCCL_P2P_SEND_GROUP 0
#define MCCL_P2P_RECV_GROUP 2

// Runs this block's part of a work, on the whole block. Returns whether the block saw the abort flag
// (every thread the same answer).
static MCCL_WORK_FN bool mcclP2pRunWork(const struct mcclDevWorkP2p& w, int tid, int nthreads) {
  const struct mcclKernelComm& comm = kShmem.comm;
  if (w.sendRank == comm.rank) {  // to oneself: a copy on the launch's copy blocks, no connection
    const int part = (int)blockIdx.x - w.channelBase;
    if (part < 0 || part >= w.nSendParts || w.sendAddr == (const void*)w.recvAddr) return false;
    int64_t lo, hi;
    mcclEvenPart(0, (int64_t)w.sendBytes, w.nSendParts, part, MCCL_P2P_PART_ALIGN, lo, hi);
    FuncSum<uint8_t> op;
    op.arg = 0;
    void* src[1] = {(void*)((const uint8_t*)w.sendAddr + lo)};
    void* dst[1] = {(void*)((uint8_t*)w.recvAddr + lo)};
    // Registers only, no shared memory: the next work needs no barrier after it.
    mcclReduceCopy<MCCL_SIMPLE_UNROLL, uint8_t, FuncSum<uint8_t>, 1, 1>(tid, nthreads, op, false, src, dst, hi - lo);
    return false;
  }
  if ((int)blockIdx.x >= comm.nP2pChannels) return false;  // a copy block
  int64_t sLo, sN, rLo, rN;
  mcclP2pPart((int64_t)w.sendBytes, w.nSendParts, w.channelBase, comm.nP2pChannels, &sLo, &sN);
  mcclP2pPart((int64_t)w.recvBytes, w.nRecvParts, w.channelBase, comm.nP2pChannels, &rLo, &rN);
  // A direction this block has no bytes of is not touched, on either side (both cut alike).
  if (sN <= 0 && rN <= 0) return false;
  struct mcclDevChannelPeer* peers = comm.p2pPeers[blockIdx.x];
  uint8_t* in = (uint8_t*)w.sendAddr + sLo;
  uint8_t* out = (uint8_t*)w.recvAddr + rLo;
  const bool sendLL = (w.llMask & MCCL_P2P_SEND_LL) != 0, recvLL = (w.llMask & MCCL_P2P_RECV_LL) != 0;
  struct mcclConnInfo* sendConn = &peers[w.sendRank].send[MCCL_P2P_CONN_INDEX];
  struct mcclConnInfo* recvConn = &peers[w.recvRank].recv[MCCL_P2P_CONN_INDEX];
  // One direction: the whole block moves it, as group 0.
  if (rN <= 0) return mcclP2pDirection<true>(sendLL, in, sN, sendConn, tid, nthreads, 0);
  if (sN <= 0) return mcclP2pDirection<false>(recvLL, out, rN, recvConn, tid, nthreads, 0);
  // Both: the send and the receive run side by side, each on warps of its own with its own barriers
  // and shared slots (NCCL's run(): above 4 warps, (nWarps - 1) / 2 receive and one more send warp,
  // whose extra warp posts while the others copy; a warp left over sits out). The send group is
  // group 0 (barriers 15 and 14), the receive group 2 (barrier 13), as NCCL numbers them.
  const int nWarps = nthreads / WARP_SIZE;
  const int nRecvWarps = nWarps <= 4 ? nWarps / 2 : (nWarps - 1) / 2;
  const int nSendWarps = nWarps <= 4 ? nRecvWarps : nRecvWarps + 1;
  bool aborted = false;
  if (tid < nSendWarps * WARP_SIZE)
    aborted = mcclP2pDirection<true>(sendLL, in, sN, sendConn, tid, nSendWarps * WARP_SIZE, MCCL_P2P_SEND_GROUP);
  else if (tid < (nSendWarps + nRecvWarps) * WARP_SIZE)
    aborted = mcclP2pDirection<false>(recvLL, out, rN, recvConn, tid - nSendWarps * WARP_SIZE, nRecvWarps * WARP_SIZE,
                                      MCCL_P2P_RECV_GROUP);
  return aborted;
}

#endif
