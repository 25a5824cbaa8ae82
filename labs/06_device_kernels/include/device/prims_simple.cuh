// Lab 06 device code: the SIMPLE protocol (NCCL 2.28.9 src/device/prims_simple.h).
//
// Data travels in the receiver's FIFO: MCCL_STEPS slots of stepSize bytes. The sender waits until
// the receiver's head leaves it a free slot, writes the slot, and publishes tail = step; the
// receiver waits until tail covers its step, reads the slot, and returns the slot with head = step.
// Four threads of the block hold those jobs (the roles):
//   WaitRecv  (thread 0)              spins on the peer's tail, then points the workers at the slot;
//   WaitSend  (thread 1)              spins on the peer's head, then points the workers at the slot
//                                     (and describes it in connFifo[slot]: its size, where its data is);
//   PostRecv  (thread nthreads-2)     after the workers are done, stores head = step (frees the slot);
//   PostSend  (thread nthreads-1)     after the workers are done, fences and stores tail = step.
// Workers (the first nworkers threads; the last warp is left out of the copy when the block has at
// least 3 warps and sends, so the send fence overlaps the next copy) move the data.
//
// Over P2P (conn->dataOffsets) a sender places a slice as many bytes into its slot as its user buffer lies past
// a 16-byte boundary, and says so in connFifo (MCCL_MODE_OFFSET, as NCCL's NET shared buffers do): a buffer
// off by one element then meets a FIFO off by the same bytes, and the copy loop's aligned 16-byte body moves
// both (reduce_kernel.cuh), where slot-aligned data would go in packs of one element. Every slice leaves
// MCCL_SIMPLE_SHIFT_ROOM bytes of its slots free for that, whatever the transport (MCCL_SIMPLE_SLICE_DATA,
// mccl_prims.h), so the two ends of every connection cut chunks into the same slices.
#ifndef MCCL_DEVICE_PRIMS_SIMPLE_CUH_
#define MCCL_DEVICE_PRIMS_SIMPLE_CUH_

// With at least this many threads and a send peer, one warp leaves the workers to post (NCCL's
// NCCL_SIMPLE_EXTRA_GROUP_IF_NTHREADS_GE).
#define MCCL_SIMPLE_EXTRA_GROUP_IF_NTHREADS_GE (3 * WARP_SIZE)
// 16-byte packs each worker moves per trip of the copy loop (NCCL's COLL_UNROLL).
#define MCCL_SIMPLE_UNROLL 4
#define MCCL_SIMPLE_MIN_SLICE_BYTES 32768  // genericOp's floor on a slice (below)

template <typename T, typename RedOp>
class Primitives<T, RedOp, ProtoSimple> {
  static constexpr int RoleWaitRecv = 0x04, RoleWaitSend = 0x08, RolePostSend = 0x10, RolePostRecv = 0x20,
                       Aborted = 0x40, ConnFifoEnabled = 0x100;
  const int tid;       // within the group
  const int nthreads;  // the group's threads (whole warps)
  const int group;     // barrier numbers and shared slot pointers of its own (common.cuh)
  int nworkers;
  int flags;
  int nrecv, nsend;
  const int slicePerChunk, stepPerSlice;
  int stepSize;  // elements of T per FIFO slot
  int sliceMax;  // elements of T a slice holds: its slots, less MCCL_SIMPLE_SHIFT_ROOM where it may be shifted
  uint64_t step;
  struct mcclConnInfo* conn = NULL;      // the connection this thread's role acts on
  struct mcclConnFifo* connFifo = NULL;  // WaitSend / WaitRecv: slot descriptions (a proxy's, a P2P shift)
  T* connEltsFifo = NULL;                // WaitRecv / WaitSend: the FIFO
  bool dataOffsets = false;              // WaitRecv / WaitSend: slices may start past their slot (P2P)
  uint64_t* connStepPtr = NULL;          // the counter this role spins on or publishes
  uint64_t connStepCache = 0;            // last value read from *connStepPtr
  const T* userInput;
  T* userOutput;
  RedOp redOp;

  // Groups are whole warps: barrier_sync / barrier_red_or reconverge the caller's warp (a role lane may
  // come back from waitPeer apart from its warp) before the aligned barrier (common/include/mccl_device.h).
  __device__ __forceinline__ void barrier() { barrier_sync(MCCL_BAR_GROUP - group, nthreads); }
  __device__ __forceinline__ void subBarrier() {
    if (nworkers == nthreads) {
      barrier();
    } else {
      barrier_sync(MCCL_BAR_GROUP - group - 1, nworkers);
    }
  }
  // The group agrees on an abort: any thread that saw the flag makes every thread see it.
  __device__ __forceinline__ bool barrierAny(int vote) {
    return barrier_red_or(vote != 0, MCCL_BAR_GROUP - group, nthreads);
  }
  // The same among the workers only (subBarrier with a vote).
  __device__ __forceinline__ bool subBarrierAny(int vote) {
    if (nworkers == nthreads) return barrierAny(vote);
    return barrier_red_or(vote != 0, MCCL_BAR_GROUP - group - 1, nworkers);
  }

  // "volatile is faster than acquire" (NCCL): the data loads that follow are volatile too, so none
  // of them can be served from a stale L1 line.
  __device__ __forceinline__ uint64_t loadStepValue(uint64_t* ptr) { return ld_volatile_global(ptr); }

  // Where the data of the slot at `step` starts, for the waiter that has just been granted it. A sender
  // describes the slot in connFifo (its size, for a proxy; over P2P where it put the data: shiftBytes past the
  // slot's start); a receiver reads where its P2P sender put it, after its wait, like the data (volatile).
  __device__ __forceinline__ void* slotData(bool isSendNotRecv, int nelts, int shiftBytes) {
    const int slot = (int)(step % MCCL_STEPS);
    int64_t at = (int64_t)slot * stepSize * (int64_t)sizeof(T);  // bytes into the FIFO
    if (isSendNotRecv && (flags & ConnFifoEnabled)) {
      connFifo[slot].size = (int64_t)nelts * (int64_t)sizeof(T);
      if (dataOffsets) {  // the offset only where it says something: a receiver reads it under MCCL_MODE_OFFSET
        at += shiftBytes;
        if (shiftBytes) connFifo[slot].offset = (int)at;
        connFifo[slot].mode = shiftBytes ? MCCL_MODE_OFFSET : MCCL_MODE_NORMAL;
      }
    }
    if (!isSendNotRecv && dataOffsets && (int)ld_volatile_global((uint32_t*)&connFifo[slot].mode) == MCCL_MODE_OFFSET)
      at = (int)ld_volatile_global((uint32_t*)&connFifo[slot].offset);
    return (char*)connEltsFifo + at;
  }

  // waitPeer and postPeer are not inlined (NCCL force-inlines them): one call per slice costs
  // nothing next to the slice's copy, and a debugger stopped in them sees `this` and the role's
  // counters (lab.gdb breaks here on the sim; inlined at -O2 they were optimized out).
  // shiftBytes: where a sender would start the slice in its slot (its user buffer's offset past 16 bytes).
  template <int Recv, int Send, int Src, int Dst>
  __device__ __noinline__ void waitPeer(int nelts, int shiftBytes) {
    // EXERCISE(06.waitPeer) STUB: MCCL_EXERCISE_DEVICE_STUB("06.waitPeer", flags, Aborted); return;
    const bool isSendNotRecv = (Send && Recv) ? (flags & RoleWaitSend) : Send;
    if ((flags & (Recv * RoleWaitRecv)) || (flags & (Send * RoleWaitSend))) {
      struct mcclSpin spins;
      // A sender may run MCCL_STEPS ahead of the receiver's head; a receiver waits for tail.
      while (mcclStepDiff(step + stepPerSlice, connStepCache + (isSendNotRecv ? MCCL_STEPS : 0)) > 0) {
        connStepCache = loadStepValue(connStepPtr);
        if (mcclCheckAbort(flags, Aborted, spins)) break;
      }
      if (mcclShmem.work.trace)
        printf("  [%s block %d thread %d] %s: waited for %s >= %llu, saw %s = %llu\n",
               mcclDevOpNameDev(mcclShmem.work.op), (int)blockIdx.x, (int)threadIdx.x,
               isSendNotRecv ? "WaitSend" : "WaitRecv", isSendNotRecv ? "head+MCCL_STEPS" : "tail",
               (unsigned long long)(step + stepPerSlice), isSendNotRecv ? "head" : "tail",
               (unsigned long long)connStepCache);
      void** ptrs = isSendNotRecv ? (mcclShmem.groups[group].dsts + Dst) : (mcclShmem.groups[group].srcs + Src);
      ptrs[0] = slotData(isSendNotRecv, nelts, shiftBytes);
      step += stepPerSlice;
    }
    // END EXERCISE(06.waitPeer)
  }

  template <int Recv, int Send>
  __device__ __noinline__ void postPeer(bool dataStored) {
    if (flags & (Recv * RolePostRecv | Send * RolePostSend)) {
      step += stepPerSlice;
      if (flags & Aborted) return;
      // The workers' stores into the peer's FIFO must be visible before the new tail is.
      if (Send && (flags & RolePostSend) && (dataStored || (flags & ConnFifoEnabled))) fence_acq_rel_sys();
      st_relaxed_sys_global(connStepPtr, step);
      if (mcclShmem.work.trace)
        printf("  [%s block %d thread %d] %s: published %s = %llu\n", mcclDevOpNameDev(mcclShmem.work.op),
               (int)blockIdx.x, (int)threadIdx.x, (flags & RolePostSend) ? "PostSend" : "PostRecv",
               (flags & RolePostSend) ? "tail" : "head", (unsigned long long)step);
    }
  }

  // One chunk: SlicePerChunk slices, each waited for, copied/reduced by the workers, then posted.
  template <int Recv, int Send, int SrcBuf, int DstBuf>
  __device__ __forceinline__ void genericOp(int64_t srcIx, int64_t dstIx, int nelem, bool postOp) {
    constexpr int Src = SrcBuf != -1;
    constexpr int Dst = DstBuf != -1;
    nelem = nelem < 0 ? 0 : nelem;
    // Slices shrink for small chunks, down to 1/32 of a slice (NCCL) but not below 32 KiB
    // (MCCL_SIMPLE_MIN_SLICE_BYTES) or the whole slice: with NCCL's 4 MiB FIFO the two floors are the
    // same; with our 1 MiB default, 1/32 alone would cut a ring's 16 KiB chunk into two 8 KiB slices,
    // each paying a step's wait and post for half the data, which slows the mid-size collectives. NCCL
    // rounds slices to 16 elements; here to 256 bytes, so a sender moving bytes and a receiver
    // reducing typed elements cut a chunk at the same places (the floor is in bytes too).
    int sliceSize = sliceMax;
    const int sliceQuantum = 256 / (int)sizeof(T);
    const int minSlice = max(sliceSize / 32, min(sliceSize, MCCL_SIMPLE_MIN_SLICE_BYTES / (int)sizeof(T)));
    sliceSize = max((int)mcclDivUp((int64_t)nelem, (int64_t)sliceQuantum * slicePerChunk) * sliceQuantum, minSlice);
    int slice = 0;
    int offset = 0;
    // One loop over the chunk's slices for every thread, so each barrier is one instruction that the
    // whole group reaches from the same place (a GPU requires it: bar.red reached from two code
    // locations is reported by compute-sanitizer's synccheck and can hang the GPU). NCCL writes the
    // empty slices as a second loop; only the workers wait, copy and meet at the workers' barrier.
    do {
      sliceSize = sliceSize < nelem - offset ? sliceSize : nelem - offset;
      if (tid < nworkers) {
        if (tid == 0 && sliceSize > 0) {
          if (Src)
            mcclShmem.groups[group].srcs[0] =
                (void*)((SrcBuf == mcclPrimsInput ? userInput : userOutput) + srcIx + offset);
          if (Dst)
            mcclShmem.groups[group].dsts[0] =
                (void*)((DstBuf == mcclPrimsInput ? (T*)userInput : userOutput) + dstIx + offset);
        }
        // A sender shifts the slice to its user buffer's offset past 16 bytes, in whole elements.
        int shiftBytes = 0;
        if (Send && sliceMax < stepSize * stepPerSlice && (Src || Dst)) {
          const T* user = Src ? (SrcBuf == mcclPrimsInput ? userInput : userOutput) + srcIx + offset
                              : (DstBuf == mcclPrimsInput ? (T*)userInput : userOutput) + dstIx + offset;
          shiftBytes = (int)((uintptr_t)user & 15);
          if (shiftBytes % (int)sizeof(T)) shiftBytes = 0;
        }
        waitPeer<Recv, Send, Src, Dst>(sliceSize, shiftBytes);
        // A waiter that gave up on abort pointed the workers at a slot that is not theirs: the workers
        // agree at this barrier and copy nothing (NCCL: workSize = ncclShmem.aborted ? 0 : sliceSize;
        // here the barrier's OR carries it, so no shared flag is written by several threads at once).
        if (subBarrierAny(flags & Aborted)) flags |= Aborted;
        if (sliceSize > 0 && !(flags & Aborted)) {
          // The user's input (srcs[0] when Src) joins the reduction through the operation's pre step
          // (PreMulSum's scalar), once, on the rank that owns it (NCCL's PreOpSrcs).
          mcclReduceCopy<MCCL_SIMPLE_UNROLL, T, RedOp, Recv + Src, Send + Dst, Src>(
              tid, nworkers, redOp, postOp, mcclShmem.groups[group].srcs, mcclShmem.groups[group].dsts, sliceSize);
        }
      }
      if (barrierAny(flags & Aborted)) flags |= Aborted;  // the posters wait here for the workers' copy
      postPeer<Recv, Send>(0 < sliceSize);
      offset += sliceSize;
      slice += 1;
    } while (slice < slicePerChunk && !(flags & Aborted));
  }

  __device__ void loadRecvConn(struct mcclConnInfo* c) {
    conn = c;
    step = mcclRoundUpSteps(c->step, (uint64_t)slicePerChunk * stepPerSlice);
    if (flags & RolePostRecv) {
      connStepPtr = c->head;
      st_relaxed_sys_global(connStepPtr, step);  // return the credits of the slots skipped by rounding up
    }
    if (flags & RoleWaitRecv) {
      connStepPtr = c->tail;
      connStepCache = loadStepValue(connStepPtr);
      connEltsFifo = (T*)c->buffs[MCCL_PROTO_SIMPLE];
      connFifo = c->connFifo;
      dataOffsets = c->dataOffsets && connFifo != NULL;
    }
  }
  __device__ void loadSendConn(struct mcclConnInfo* c) {
    conn = c;
    step = mcclRoundUpSteps(c->step, (uint64_t)slicePerChunk * stepPerSlice);
    if (flags & RolePostSend) connStepPtr = c->tail;
    if (flags & RoleWaitSend) {
      connStepPtr = c->head;
      connStepCache = loadStepValue(connStepPtr);
      connEltsFifo = (T*)c->buffs[MCCL_PROTO_SIMPLE];
      connFifo = c->connFifo;
      if (connFifo != NULL) flags |= ConnFifoEnabled;
      dataOffsets = c->dataOffsets && connFifo != NULL;
    }
  }

 public:
  // recvConn / sendConn: the block's connections (device memory), NULL for none. Every thread of
  // the group constructs the object: tid counts from 0 within the group, nthreads is the group's size
  // (whole warps, >= 2 * the number of connections); group (0 when the whole block is one group)
  // picks its barriers and shared slots.
  __device__ Primitives(int tid, int nthreads, struct mcclConnInfo* recvConn, struct mcclConnInfo* sendConn,
                        const void* inputBuf, void* outputBuf, uint64_t redOpArg, int group, int slicePerChunk,
                        int stepPerSlice)
      : tid(tid),
        nthreads(nthreads),
        group(group),
        flags(0),
        slicePerChunk(slicePerChunk),
        stepPerSlice(stepPerSlice),
        userInput((const T*)inputBuf),
        userOutput((T*)outputBuf) {
    redOp.arg = redOpArg;
    nrecv = recvConn != NULL;
    nsend = sendConn != NULL;
    nworkers = nthreads - (nsend > 0 && nthreads >= MCCL_SIMPLE_EXTRA_GROUP_IF_NTHREADS_GE ? WARP_SIZE : 0);
    struct mcclConnInfo* c = recvConn ? recvConn : sendConn;
    stepSize = c ? c->stepSize / (int)sizeof(T) : 0;
    sliceMax = MCCL_SIMPLE_SLICE_DATA(stepSize * stepPerSlice * (int)sizeof(T)) / (int)sizeof(T);
    if (tid < nrecv)
      flags |= RoleWaitRecv;
    else if (tid < nrecv + nsend)
      flags |= RoleWaitSend;
    else if (nthreads - nsend <= tid)
      flags |= RolePostSend;
    else if (nthreads - nrecv - nsend <= tid)
      flags |= RolePostRecv;
    if (flags & (RoleWaitRecv | RolePostRecv)) loadRecvConn(recvConn);
    if (flags & (RoleWaitSend | RolePostSend)) loadSendConn(sendConn);
    if (mcclShmem.work.trace && (flags & (RoleWaitRecv | RoleWaitSend | RolePostRecv | RolePostSend)))
      printf("  [%s block %d thread %d] role %s, starting at step %llu\n", mcclDevOpNameDev(mcclShmem.work.op),
             (int)blockIdx.x, (int)threadIdx.x,
             (flags & RoleWaitRecv)   ? "WaitRecv"
             : (flags & RoleWaitSend) ? "WaitSend"
             : (flags & RolePostRecv) ? "PostRecv"
                                      : "PostSend",
             (unsigned long long)step);
    barrier();
  }

  // Save the step for the next operation on the connection (only the posters advance it past
  // the data they published), then let no thread leave before that is done.
  __device__ ~Primitives() {
    if (flags & (RolePostSend | RolePostRecv)) conn->step = step;
    barrier();
  }

  __device__ bool aborted() const { return (flags & Aborted) != 0; }
  // Elements one chunk holds: what a caller passes per call to fill chunkSteps slots.
  __device__ int chunkElems() const { return sliceMax * slicePerChunk; }

  __device__ void send(int64_t inpIx, int eltN) { genericOp<0, 1, mcclPrimsInput, -1>(inpIx, -1, eltN, false); }
  __device__ void recv(int64_t outIx, int eltN, bool postOp = false) {
    genericOp<1, 0, -1, mcclPrimsOutput>(-1, outIx, eltN, postOp);
  }
  __device__ void copySend(int64_t inpIx, int64_t outIx, int eltN, bool postOp = false) {
    genericOp<0, 1, mcclPrimsInput, mcclPrimsOutput>(inpIx, outIx, eltN, postOp);
  }
  __device__ void recvCopySend(int64_t outIx, int eltN, bool postOp = false) {
    genericOp<1, 1, -1, mcclPrimsOutput>(-1, outIx, eltN, postOp);
  }
  __device__ void recvReduceSend(int64_t inpIx, int eltN) {
    genericOp<1, 1, mcclPrimsInput, -1>(inpIx, -1, eltN, false);
  }
  __device__ void recvReduceCopy(int64_t inpIx, int64_t outIx, int eltN, bool postOp = false) {
    genericOp<1, 0, mcclPrimsInput, mcclPrimsOutput>(inpIx, outIx, eltN, postOp);
  }
  __device__ void recvReduceCopySend(int64_t inpIx, int64_t outIx, int eltN, bool postOp = false) {
    genericOp<1, 1, mcclPrimsInput, mcclPrimsOutput>(inpIx, outIx, eltN, postOp);
  }
};

#endif
