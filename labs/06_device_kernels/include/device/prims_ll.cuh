// Lab 06 device code: the LL (low-latency) protocol (NCCL 2.28.9 src/device/prims_ll.h).
//
// No tail counter: every 16-byte line of the FIFO carries 8 bytes of data and, twice, the flag of the
// step it belongs to ({data1, flag1, data2, flag2}, union mcclLLFifoLine). The sender stores whole
// lines; the receiver spins on the line itself until both flags match, so the data arrives with its
// own "ready" bit and no fence or second round trip is needed: half the bandwidth, a fraction of
// the latency. The receiver still returns slots with head, so a sender never overwrites a step the
// receiver has not read. Every thread handles its own lines; one thread of the block waits for the
// send credit (WaitSend: thread nthreads-WARP_SIZE) and one returns it (PostRecv: thread 0).
#ifndef MCCL_DEVICE_PRIMS_LL_CUH_
#define MCCL_DEVICE_PRIMS_LL_CUH_

// The flag of a step: mcclLLFlag() (mccl_conn.h, shared with lab 08's proxies, which check it on the
// host), 1 + step mod (2^32 - 1), never the 0 of a zeroed buffer.

template <typename T, typename RedOp>
class Primitives<T, RedOp, ProtoLL> {
  static constexpr int Aborted = 0x40;
  static constexpr int EltPerLine = sizeof(uint64_t) / sizeof(T);
  const int tid;       // within the group
  const int nthreads;  // the group's threads (whole warps)
  const int group;     // its barrier (common.cuh); LL needs no shared slots
  int flags = 0;
  int stepLines;  // lines per FIFO slot
  struct mcclConnInfo* recvConn;
  struct mcclConnInfo* sendConn;
  union mcclLLFifoLine* recvBuff = NULL;
  union mcclLLFifoLine* sendBuff = NULL;
  uint64_t recvStep = 0, sendStep = 0;  // every thread: the step whose slot it reads / writes
  uint64_t* recvConnHeadPtr = NULL;     // PostRecv: the sender's head
  uint64_t recvConnHead = 0;
  uint64_t* sendConnHeadPtr = NULL;  // WaitSend: the receiver's head, read here
  uint64_t sendConnHeadCache = 0;
  uint64_t sendConnHead = 0;
  struct mcclConnFifo* sendConnFifo = NULL;
  const T* userInput;
  T* userOutput;
  RedOp redOp;

  // barrier_sync / barrier_red_or reconverge the warp first (a lane may spin alone in waitSend or readLL).
  __device__ __forceinline__ void barrier() { barrier_sync(MCCL_BAR_GROUP - group, nthreads); }
  __device__ __forceinline__ bool barrierAny(int vote) {
    return barrier_red_or(vote != 0, MCCL_BAR_GROUP - group, nthreads);
  }

  __device__ __forceinline__ union mcclLLFifoLine* recvPtr() { return recvBuff + (recvStep % MCCL_STEPS) * stepLines; }
  __device__ __forceinline__ union mcclLLFifoLine* sendPtr() { return sendBuff + (sendStep % MCCL_STEPS) * stepLines; }

  // WaitSend: a free slot in the receiver's FIFO (its head within MCCL_STEPS), then tell a proxy
  // how many bytes of lines the step holds. Everyone waits for that thread.
  // Not inlined, as SIMPLE's waitPeer: once per step, and gdb sees its state.
  __device__ __noinline__ void waitSend(int nbytes) {
    if (sendConnHeadPtr) {
      struct mcclSpin spins;
      while (mcclStepDiff(sendConnHead + 1, sendConnHeadCache + MCCL_STEPS) > 0) {
        sendConnHeadCache = ld_volatile_global(sendConnHeadPtr);
        if (mcclCheckAbort(flags, Aborted, spins)) break;
      }
      if (mcclShmem.work.trace)
        printf("  [%s block %d thread %d] LL WaitSend: slot of step %llu is free (head %llu)\n",
               mcclDevOpNameDev(mcclShmem.work.op), (int)blockIdx.x, (int)threadIdx.x, (unsigned long long)sendConnHead,
               (unsigned long long)sendConnHeadCache);
      if (sendConnFifo) sendConnFifo[sendConnHead % MCCL_STEPS].size = nbytes;
      sendConnHead += 1;
    }
    if (barrierAny(flags & Aborted)) flags |= Aborted;
  }

  // PostRecv: every thread has read its lines of the step; return the slot.
  __device__ void postRecv() {
    if (barrierAny(flags & Aborted)) flags |= Aborted;
    if (recvConnHeadPtr) {
      recvConnHead += 1;
      if (!(flags & Aborted)) st_relaxed_sys_global(recvConnHeadPtr, recvConnHead);
      if (mcclShmem.work.trace)
        printf("  [%s block %d thread %d] LL PostRecv: published head = %llu\n", mcclDevOpNameDev(mcclShmem.work.op),
               (int)blockIdx.x, (int)threadIdx.x, (unsigned long long)recvConnHead);
    }
  }

  // Spin on one line until both of its flags are this step's, and return its 8 data bytes.
  __device__ __forceinline__ uint64_t readLL(int offset) {
    union mcclLLFifoLine* src = recvPtr() + offset;
    const uint32_t flag = mcclLLFlag(recvStep);
    uint64_t v0, v1;
    struct mcclSpin spins;
    do {
      load128((const uint64_t*)src, v0, v1);
      if (mcclCheckAbort(flags, Aborted, spins)) break;
    } while ((uint32_t)(v0 >> 32) != flag || (uint32_t)(v1 >> 32) != flag);
    return (v0 & 0xffffffffull) | (v1 << 32);
  }
  __device__ __forceinline__ void storeLL(union mcclLLFifoLine* dst, uint64_t data, uint32_t flag) {
    store128((uint64_t*)dst, (data & 0xffffffffull) | ((uint64_t)flag << 32), (data >> 32) | ((uint64_t)flag << 32));
  }

  // One step: at most stepLines lines, i.e. stepLines * EltPerLine elements.
  template <int Recv, int Send, int SrcBuf, int DstBuf>
  __device__ void LLGenericOp(int64_t srcIx, int64_t dstIx, int nelem, bool postOp) {
    constexpr int Src = SrcBuf != -1;
    constexpr int Dst = DstBuf != -1;
    const T* srcElts = Src ? (SrcBuf == mcclPrimsInput ? userInput : userOutput) + srcIx : NULL;
    T* dstElts = Dst ? (DstBuf == mcclPrimsInput ? (T*)userInput : userOutput) + dstIx : NULL;
    nelem = nelem < 0 ? 0 : nelem;
    if (Send) waitSend(mcclDivUp(nelem, EltPerLine) * (int)sizeof(union mcclLLFifoLine));
    const uint32_t sendFlag = mcclLLFlag(sendStep);
    int left = nelem - tid * EltPerLine;
    if (Src) srcElts += tid * EltPerLine;
    if (Dst) dstElts += tid * EltPerLine;
    int offset = tid;
    const int eltPerTrip = nthreads * EltPerLine;
    while (left > 0 && !(flags & Aborted)) {
      int eltInLine = EltPerLine < left ? EltPerLine : left;
      uint64_t data = 0, peerData = 0;
      // The user's input is loaded before the wait for the peer's line, so that its trip to memory overlaps the
      // wait instead of following it (NCCL's DataLoader::loadBegin before readLL): a reducing step would
      // otherwise pay one memory latency more than a copying one.
      if (Src) data = mcclLoadWord(srcElts, eltInLine);
      if (Recv) peerData = readLL(offset);
      if (Src) {
        data = mcclPreWord<T>(redOp, data);  // the operation's pre step on the user's input
        srcElts += eltPerTrip;
        if (Recv) data = mcclReduceWord<T>(redOp, data, peerData);
      } else {
        data = peerData;
      }
      if (postOp) data = mcclPostWord<T>(redOp, data);
      if (Send) storeLL(sendPtr() + offset, data, sendFlag);
      if (Dst) {
        mcclStoreWord(dstElts, data, eltInLine);
        dstElts += eltPerTrip;
      }
      left -= eltPerTrip;
      offset += nthreads;
    }
    if (Recv) {
      recvStep += 1;
      postRecv();
    }
    if (Send) sendStep += 1;
  }

 public:
  __device__ Primitives(int tid, int nthreads, struct mcclConnInfo* recvConn, struct mcclConnInfo* sendConn,
                        const void* inputBuf, void* outputBuf, uint64_t redOpArg, int group, int /*slicePerChunk*/,
                        int /*stepPerSlice*/)
      : tid(tid),
        nthreads(nthreads),
        group(group),
        recvConn(recvConn),
        sendConn(sendConn),
        userInput((const T*)inputBuf),
        userOutput((T*)outputBuf) {
    redOp.arg = redOpArg;
    struct mcclConnInfo* c = recvConn ? recvConn : sendConn;
    stepLines = c ? c->llStepSize / (int)sizeof(union mcclLLFifoLine) : 0;
    if (recvConn) {
      recvBuff = (union mcclLLFifoLine*)recvConn->buffs[MCCL_PROTO_LL];
      recvStep = recvConn->step;
      if (tid == 0) {
        recvConnHeadPtr = recvConn->head;
        recvConnHead = recvConn->step;
      }
    }
    if (sendConn) {
      sendBuff = (union mcclLLFifoLine*)sendConn->buffs[MCCL_PROTO_LL];
      sendStep = sendConn->step;
      if (tid == nthreads - WARP_SIZE) {
        sendConnHeadPtr = sendConn->head;
        sendConnHeadCache = ld_volatile_global(sendConnHeadPtr);
        sendConnHead = sendConn->step;
        sendConnFifo = sendConn->connFifo;
      }
    }
    barrier();
  }

  __device__ ~Primitives() {
    if (sendConnHeadPtr) sendConn->step = sendConnHead;
    if (recvConnHeadPtr) recvConn->step = recvConnHead;
    barrier();
  }

  __device__ bool aborted() const { return (flags & Aborted) != 0; }
  // Elements one step's slot holds.
  __device__ int chunkElems() const { return stepLines * EltPerLine; }

  __device__ void send(int64_t inpIx, int eltN) { LLGenericOp<0, 1, mcclPrimsInput, -1>(inpIx, -1, eltN, false); }
  __device__ void recv(int64_t outIx, int eltN, bool postOp = false) {
    LLGenericOp<1, 0, -1, mcclPrimsOutput>(-1, outIx, eltN, postOp);
  }
  __device__ void copySend(int64_t inpIx, int64_t outIx, int eltN, bool postOp = false) {
    LLGenericOp<0, 1, mcclPrimsInput, mcclPrimsOutput>(inpIx, outIx, eltN, postOp);
  }
  __device__ void recvCopySend(int64_t outIx, int eltN, bool postOp = false) {
    LLGenericOp<1, 1, -1, mcclPrimsOutput>(-1, outIx, eltN, postOp);
  }
  __device__ void recvReduceSend(int64_t inpIx, int eltN) {
    LLGenericOp<1, 1, mcclPrimsInput, -1>(inpIx, -1, eltN, false);
  }
  __device__ void recvReduceCopy(int64_t inpIx, int64_t outIx, int eltN, bool postOp = false) {
    LLGenericOp<1, 0, mcclPrimsInput, mcclPrimsOutput>(inpIx, outIx, eltN, postOp);
  }
  __device__ void recvReduceCopySend(int64_t inpIx, int64_t outIx, int eltN, bool postOp = false) {
    LLGenericOp<1, 1, mcclPrimsInput, mcclPrimsOutput>(inpIx, outIx, eltN, postOp);
  }
};

#endif
