// Lab 06 device code: the LL128 protocol (NCCL 2.28.9 src/device/prims_ll128.h).
//
// LL puts a flag beside every 8 bytes, so half of what crosses the link is flags. LL128 puts one flag
// word in every 128-byte line: 15 words of data, then the flag (120 of 128 bytes carry data). That is
// only safe because of a hardware promise: when a warp stores 16 bytes per lane, NVLink delivers each
// 128-byte line of that store whole, so a reader that sees a line's flag also sees the other 120 bytes
// of the same store. PCIe (a P2P pair without NVLink, and SHM's host memory) and a network (NET) make no
// such promise; only P2P connections over NVLink carry an LL128 FIFO (mccl_conn.h, p2p.c), and lab 07
// never picks LL128 on another path.
//
// Work is done by warps. A slice is one warp's 16 lines (MCCL_LL128_SLICE_BYTES = 2 KiB of FIFO, 1920
// bytes of data): each lane stores four 16-byte pieces, lanes 8k..8k+7 fill one line, and lane 8k+7,
// the flag lane, puts the flag in its line's last word. The slice's data is contiguous in the user
// buffer, so lanes load it with 16-byte loads; a flag lane carries 8 bytes fewer per line, so it loads
// one 16-byte piece for every two lines and spreads it over both (dataUnit, below).
//
// A receiving warp loads its lines, and the flag lanes compare their flags with the step's; the warp
// votes (__any_sync) and reloads until no flag lane waits. Credit works as in SIMPLE and LL: one
// thread waits for the receiver's head before a step (WaitSend: thread 0) and one returns the slot
// after it (PostRecv: the first lane of the last warp).
//
// The sim's lanes are threads, with no 128-byte store: storeLL128 (common/include/mccl_device.h) stores
// the data, meets the warp, then stores the flag, so the sim runs the same protocol with the ordering
// made explicit. What it cannot show is a GPU without the guarantee: there a line could arrive torn.
#ifndef MCCL_DEVICE_PRIMS_LL128_CUH_
#define MCCL_DEVICE_PRIMS_LL128_CUH_

// ---- aligned 16-byte packs around a slice that starts off a 16-byte boundary --------------------
// A slice of `bytes` bytes that starts m bytes past base (16-byte aligned) lies in the aligned packs base + 16j;
// pack j holds the slice's bytes [16j - m, 16j - m + 16). These load or store one of them: one vector access
// where the pack lies inside the slice, only the slice's bytes where it does not (the others load as zero),
// since the bytes around a slice may be another block's, or past the end of the allocation.
__device__ __forceinline__ mcclU128 mcclLoadSlicePack(const char* base, int64_t j, int m, int64_t bytes) {
  const int64_t first = 16 * j - m;
  if (first >= 0 && first + 16 <= bytes) {
    uint64_t w0, w1;
    load128((const uint64_t*)(base + 16 * j), w0, w1);
    return ((mcclU128)w1 << 64) | w0;
  }
  const int64_t lo = first > 0 ? first : 0, hi = first + 16 < bytes ? first + 16 : bytes;
  return lo < hi ? mcclLoadBytes(base + m + lo, (int)(hi - lo)) << (8 * (lo - first)) : 0;
}
__device__ __forceinline__ void mcclStoreSlicePack(char* base, int64_t j, int m, int64_t bytes, mcclU128 v) {
  const int64_t first = 16 * j - m;
  if (first >= 0 && first + 16 <= bytes) {
    store128((uint64_t*)(base + 16 * j), (uint64_t)v, (uint64_t)(v >> 64));
    return;
  }
  const int64_t lo = first > 0 ? first : 0, hi = first + 16 < bytes ? first + 16 : bytes;
  if (lo < hi) mcclStoreBytes(base + m + lo, v >> (8 * (lo - first)), (int)(hi - lo));
}
// v as the lane `src` of this warp holds it (every lane of the warp calls it).
__device__ __forceinline__ mcclU128 mcclShflU128(mcclU128 v, int src) {
  const uint64_t lo = __shfl_sync(0xffffffffu, (uint64_t)v, src);
  const uint64_t hi = __shfl_sync(0xffffffffu, (uint64_t)(v >> 64), src);
  return ((mcclU128)hi << 64) | lo;
}


template <typename T, typename RedOp>
class Primitives<T, RedOp, ProtoLL128> {
  static constexpr int Aborted = 0x40;
  static constexpr unsigned FullWarp = 0xffffffffu;
  // Words a lane carries per slice: four 16-byte pieces (NCCL's NCCL_LL128_SHMEM_ELEMS_PER_THREAD).
  static constexpr int WordPerThread = MCCL_LL128_ELEMS_PER_SLICE_THREAD;
  static constexpr int WireWordPerSlice = WARP_SIZE * WordPerThread;  // 256 words, 16 lines
  static constexpr int EltPerWord = (int)(sizeof(uint64_t) / sizeof(T));
  static constexpr int EltPer16B = 2 * EltPerWord;
  // Data of one slice: every word but the 16 flags.
  static constexpr int DataEltPerSlice = (WireWordPerSlice - WireWordPerSlice / MCCL_LL128_LINEELEMS) * EltPerWord;

  const int tid;        // within the group
  const int nthreads;   // the group's threads (whole warps)
  const int group;      // its barrier (common.cuh)
  const int wid;        // lane in the warp
  const int warp;       // warp in the group
  const bool flagLane;  // the last lane of each eight: its second word of a line is the flag
  int flags = 0;
  int stepWords = 0;  // 8-byte words per FIFO slot
  uint64_t* recvBuff = NULL;
  uint64_t* sendBuff = NULL;
  uint64_t recvStep = 0, sendStep = 0;  // every thread: the step whose slot it reads / writes
  uint64_t* recvConnHeadPtr = NULL;     // PostRecv: the sender's head
  uint64_t recvConnHead = 0;
  uint64_t* sendConnHeadPtr = NULL;  // WaitSend: the receiver's head, read here
  uint64_t sendConnHeadCache = 0;
  uint64_t sendConnHead = 0;
  struct mcclConnFifo* sendConnFifo = NULL;
  struct mcclConnInfo* recvConn;
  struct mcclConnInfo* sendConn;
  const T* userInput;
  T* userOutput;
  RedOp redOp;

  __device__ __forceinline__ bool barrierAny(int vote) {
    return barrier_red_or(vote != 0, MCCL_BAR_GROUP - group, nthreads);
  }
  __device__ __forceinline__ uint64_t* recvPtr() { return recvBuff + (recvStep % MCCL_STEPS) * stepWords; }
  __device__ __forceinline__ uint64_t* sendPtr() { return sendBuff + (sendStep % MCCL_STEPS) * stepWords; }

  // WaitSend: a free slot in the receiver's FIFO, then (for a proxy) the step's size. The group agrees on
  // an abort seen here. Not inlined, as LL's: once per step, and gdb sees its state.
  __device__ __noinline__ void waitSend(int nbytes) {
    if (sendConnHeadPtr) {
      struct mcclSpin spins;
      while (mcclStepDiff(sendConnHead + 1, sendConnHeadCache + MCCL_STEPS) > 0) {
        sendConnHeadCache = ld_volatile_global(sendConnHeadPtr);
        if (mcclCheckAbort(flags, Aborted, spins)) break;
      }
      if (mcclShmem.work.trace)
        printf("  [%s block %d thread %d] LL128 WaitSend: slot of step %llu is free (head %llu)\n",
               mcclDevOpNameDev(mcclShmem.work.op), (int)blockIdx.x, (int)threadIdx.x, (unsigned long long)sendConnHead,
               (unsigned long long)sendConnHeadCache);
      if (sendConnFifo) sendConnFifo[sendConnHead % MCCL_STEPS].size = nbytes;
      sendConnHead += 1;
    }
    if (barrierAny(flags & Aborted)) flags |= Aborted;
  }

  // PostRecv: every warp has read its lines of the step; return the slot.
  __device__ void postRecv() {
    if (recvConnHeadPtr) {
      recvConnHead += 1;
      if (!(flags & Aborted)) st_relaxed_sys_global(recvConnHeadPtr, recvConnHead);
      if (mcclShmem.work.trace)
        printf("  [%s block %d thread %d] LL128 PostRecv: published head = %llu\n", mcclDevOpNameDev(mcclShmem.work.op),
               (int)blockIdx.x, (int)threadIdx.x, (unsigned long long)recvConnHead);
    }
  }

  // Which 16-byte piece of the slice's data lane `wid` holds in its g-th store (g = 0..3, two pairs of
  // line groups). In an even group every lane holds a piece of its own: 32 pieces. In the odd group that
  // follows, the four flag lanes hold the second half of their even piece instead, so the other 28
  // lanes hold the next 28 pieces. 60 pieces per pair, 120 per slice.
  static __device__ __forceinline__ int dataUnit(int g, int wid) {
    return (g / 2) * 60 + ((g & 1) ? WARP_SIZE + wid - wid / 8 : wid);
  }
  __device__ __forceinline__ bool holdsUnit(int g) const { return !flagLane || (g & 1) == 0; }

  // One 16-byte piece of a slice whose user buffer is 16-byte aligned (the n elements left from src to the
  // slice's end, of which the piece takes at most 16 bytes): one vector access when whole; a partial last
  // piece goes as the naturally aligned pieces of mcclLoadBytes / mcclStoreBytes, so that no byte outside the
  // slice is touched (the neighbouring bytes are another warp's, or another buffer's).
  static __device__ __forceinline__ int unitBytes(int n) { return (n < EltPer16B ? n : EltPer16B) * (int)sizeof(T); }
  __device__ __forceinline__ void loadUnit(const T* src, int n, uint64_t& w0, uint64_t& w1) {
    if (n >= EltPer16B) {
      load128((const uint64_t*)src, w0, w1);
      return;
    }
    const mcclU128 v = mcclLoadBytes(src, unitBytes(n));
    w0 = (uint64_t)v;
    w1 = (uint64_t)(v >> 64);
  }
  __device__ __forceinline__ void storeUnit(T* dst, int n, uint64_t w0, uint64_t w1) {
    if (n >= EltPer16B) {
      store128((uint64_t*)dst, w0, w1);
      return;
    }
    mcclStoreBytes(dst, ((mcclU128)w1 << 64) | w0, unitBytes(n));
  }

  // A user buffer off a 16-byte boundary by m bytes (a view into a tensor, nccl-tests -u 1): every piece
  // straddles two aligned 16-byte packs of the buffer. NCCL stages such a slice in shared memory
  // (prims_ll128.h: loadRegsBegin's misaligned branch, storeRegs writing element by element); here the warp's
  // lanes trade packs with shuffles. The lane holding piece k loads the aligned pack P_k that starts m bytes
  // before its piece, and takes the m bytes it lacks from P_(k+1), which the lane holding piece k + 1 loaded.
  // Storing, the same lane builds the aligned pack that ends m bytes into piece k + 1 from its own piece and
  // that lane's. Every access inside the slice is one aligned vector; the packs cut by the slice's two ends go
  // as mcclLoadBytes / mcclStoreBytes of the bytes inside it.
  //
  // The lane whose g-th store holds the piece after this lane's g-th one: the next lane (skipping a flag lane
  // in an odd group), or lane 0 for group g's last piece, as lane 0 hands over its next group's value then.
  static __device__ __forceinline__ int nextHolder(int g, int wid) {
    if ((g & 1) == 0) return wid == WARP_SIZE - 1 ? 0 : wid + 1;
    if (wid % 8 == 7) return wid;  // a flag lane holds nothing in an odd group
    return wid == WARP_SIZE - 2 ? 0 : (wid % 8 == 6 ? wid + 2 : wid + 1);
  }
  // v[g] as held by nextHolder(g, wid): every lane hands over its own v[g], but lane 0 hands over v[g + 1] (the
  // piece after group g's last one). All lanes of the warp call it.
  __device__ __forceinline__ mcclU128 fromNextHolder(const mcclU128 (&v)[WordPerThread / 2], int g) {
    const mcclU128 mine = (wid == 0 && g + 1 < WordPerThread / 2) ? v[(g + 1) % (WordPerThread / 2)] : v[g];
    return mcclShflU128(mine, nextHolder(g, wid));
  }
  __device__ __forceinline__ void loadShifted(uint64_t (&regs)[WordPerThread], const T* src, int eltN, int m) {
    const int bytes = eltN * (int)sizeof(T), pieces = mcclDivUp(bytes, 16);
    const char* base = (const char*)src - m;
    mcclU128 p[WordPerThread / 2], after = 0;  // after: P_(k+1) of the slice's last piece, which no lane holds
#pragma unroll
    for (int g = 0; g < WordPerThread / 2; g++) {
      const int k = dataUnit(g, wid);
      p[g] = 0;
      if (holdsUnit(g) && k < pieces) {
        p[g] = mcclLoadSlicePack(base, k, m, bytes);
        if (k == pieces - 1) after = mcclLoadSlicePack(base, pieces, m, bytes);
      }
    }
#pragma unroll
    for (int g = 0; g < WordPerThread / 2; g++) {
      const mcclU128 next = fromNextHolder(p, g);
      const int k = dataUnit(g, wid);
      if (holdsUnit(g) && k < pieces) {
        const mcclU128 piece = (p[g] >> (8 * m)) | ((k == pieces - 1 ? after : next) << (8 * (16 - m)));
        regs[2 * g] = (uint64_t)piece;
        regs[2 * g + 1] = (uint64_t)(piece >> 64);
      }
    }
  }
  __device__ __forceinline__ void storeShifted(T* dst, const uint64_t (&regs)[WordPerThread], int eltN, int m) {
    const int bytes = eltN * (int)sizeof(T), pieces = mcclDivUp(bytes, 16);
    char* base = (char*)dst - m;
    mcclU128 v[WordPerThread / 2];
#pragma unroll
    for (int g = 0; g < WordPerThread / 2; g++) v[g] = ((mcclU128)regs[2 * g + 1] << 64) | regs[2 * g];
#pragma unroll
    for (int g = 0; g < WordPerThread / 2; g++) {
      const mcclU128 next = fromNextHolder(v, g);  // past the last piece: not data, cut off by mcclStoreSlicePack
      const int k = dataUnit(g, wid);
      if (holdsUnit(g) && k < pieces) {
        if (k == 0) mcclStoreSlicePack(base, 0, m, bytes, v[g] << (8 * m));
        mcclStoreSlicePack(base, k + 1, m, bytes, (v[g] >> (8 * (16 - m))) | (next << (8 * m)));
      }
    }
  }

  // The slice's data into this lane's registers, laid out as the lines want them: regs[2g], regs[2g+1]
  // are the two words of the g-th store. A flag lane's even piece goes half into its even line, half
  // into the odd one (NCCL's loadRegsBegin / loadRegsFinish).
  __device__ __forceinline__ void loadRegs(uint64_t (&regs)[WordPerThread], const T* src, int eltN) {
    const int m = (int)((uintptr_t)src & 15);
    if (m != 0) {
      loadShifted(regs, src, eltN, m);
    } else {
#pragma unroll
      for (int g = 0; g < WordPerThread / 2; g++) {
        const int first = dataUnit(g, wid) * EltPer16B;
        if (holdsUnit(g) && first < eltN) loadUnit(src + first, eltN - first, regs[2 * g], regs[2 * g + 1]);
      }
    }
#pragma unroll
    for (int g = 1; g < WordPerThread / 2; g += 2)
      if (flagLane) regs[2 * g] = regs[2 * g - 1];
  }
  // The reverse: registers back into the user's buffer (NCCL's storeRegs).
  __device__ __forceinline__ void storeRegs(T* dst, uint64_t (&regs)[WordPerThread], int eltN) {
#pragma unroll
    for (int g = 1; g < WordPerThread / 2; g += 2)
      if (flagLane) regs[2 * g - 1] = regs[2 * g];
    const int m = (int)((uintptr_t)dst & 15);
    if (m != 0) {
      storeShifted(dst, regs, eltN, m);
      return;
    }
#pragma unroll
    for (int g = 0; g < WordPerThread / 2; g++) {
      const int first = dataUnit(g, wid) * EltPer16B;
      if (holdsUnit(g) && first < eltN) storeUnit(dst + first, eltN - first, regs[2 * g], regs[2 * g + 1]);
    }
  }

  // One slice of one warp: receive and reduce into regs (whose source words are loaded already), apply
  // the post step, send (NCCL's recvReduceSendCopy). Receiving, the warp loads its lines and its flag
  // lanes compare their flags with the step's; the warp votes each round, so its lanes leave together,
  // and reads the lines once more after the vote, so no lane keeps a load issued before its flag lane saw
  // the flag. A flag lane's second word of each store is not data: it is reduced like the rest and then
  // replaced by the flag.
  template <int Recv, int Send, int Src>
  __device__ __forceinline__ void recvReduceSendCopy(uint64_t (&v)[WordPerThread], int wireOffset, bool postOp) {
    // EXERCISE(06.ll128_slice) STUB: MCCL_EXERCISE_DEVICE_STUB("06.ll128_slice", flags, Aborted); return;
    __syncwarp();
    if (Src) {
#pragma unroll
      for (int u = 0; u < WordPerThread; u++) v[u] = mcclPreWord<T>(redOp, v[u]);
    }
    if (Recv) {
      const uint64_t* ptr = recvPtr() + wireOffset;
      const uint64_t flag = mcclLLFlag(recvStep);
      uint64_t vr[WordPerThread];
      struct mcclSpin spins;
      bool waiting;
      do {
        waiting = false;
#pragma unroll
        for (int u = 0; u < WordPerThread; u += 2) {
          load128(ptr + u * WARP_SIZE, vr[u], vr[u + 1]);
          waiting |= flagLane && vr[u + 1] != flag;
        }
        if (waiting && mcclCheckAbort(flags, Aborted, spins)) waiting = false;
      } while (__any_sync(FullWarp, waiting));
      if (__any_sync(FullWarp, flags & Aborted)) flags |= Aborted;
#pragma unroll
      for (int u = 0; u < WordPerThread; u += 2) load128(ptr + u * WARP_SIZE, vr[u], vr[u + 1]);
#pragma unroll
      for (int u = 0; u < WordPerThread; u++) v[u] = Src ? mcclReduceWord<T>(redOp, vr[u], v[u]) : vr[u];
    }
    if (postOp) {
#pragma unroll
      for (int u = 0; u < WordPerThread; u++) v[u] = mcclPostWord<T>(redOp, v[u]);
    }
    if (Send) {
      const uint64_t flag = mcclLLFlag(sendStep);
      uint64_t* ptr = sendPtr() + wireOffset;
#pragma unroll
      for (int u = 0; u < WordPerThread; u += 2)
        storeLL128(ptr + u * WARP_SIZE, v[u], flagLane ? flag : v[u + 1], flagLane);
    }
    // END EXERCISE(06.ll128_slice)
  }

  // One step: at most chunkElems() elements, cut into slices that the warps take in turn.
  template <int Recv, int Send, int SrcBuf, int DstBuf>
  __device__ void GenericOp(int64_t srcIx, int64_t dstIx, int nelem, bool postOp) {
    constexpr int Src = SrcBuf != -1;
    constexpr int Dst = DstBuf != -1;
    const T* srcPtr = Src ? (SrcBuf == mcclPrimsInput ? userInput : userOutput) + srcIx : NULL;
    T* dstPtr = Dst ? (DstBuf == mcclPrimsInput ? (T*)userInput : userOutput) + dstIx : NULL;
    nelem = nelem < 0 ? 0 : nelem;
    if (flags & Aborted) return;  // the same for every thread of the group
    const int nwarps = nthreads / WARP_SIZE;
    if (Send) waitSend(mcclDivUp(nelem, DataEltPerSlice) * WireWordPerSlice * (int)sizeof(uint64_t));
    int wireOffset = WireWordPerSlice * warp + 2 * wid;
    int left = nelem - DataEltPerSlice * warp;
    int64_t done = (int64_t)DataEltPerSlice * warp;
    while (left > 0 && !(flags & Aborted)) {
      const int eltInSlice = left < DataEltPerSlice ? left : DataEltPerSlice;
      uint64_t regs[WordPerThread] = {};
      if (Src) loadRegs(regs, srcPtr + done, eltInSlice);
      recvReduceSendCopy<Recv, Send, Src>(regs, wireOffset, postOp);
      if (Dst) storeRegs(dstPtr + done, regs, eltInSlice);
      wireOffset += WireWordPerSlice * nwarps;
      done += (int64_t)DataEltPerSlice * nwarps;
      left -= DataEltPerSlice * nwarps;
    }
    // Every warp is done with the slot (and agrees on an abort) before it is posted.
    if (barrierAny(flags & Aborted)) flags |= Aborted;
    if (Send) sendStep += 1;
    if (Recv) {
      recvStep += 1;
      postRecv();
    }
  }

 public:
  __device__ Primitives(int tid, int nthreads, struct mcclConnInfo* recvConn, struct mcclConnInfo* sendConn,
                        const void* inputBuf, void* outputBuf, uint64_t redOpArg, int group, int /*slicePerChunk*/,
                        int /*stepPerSlice*/)
      : tid(tid),
        nthreads(nthreads),
        group(group),
        wid(tid % WARP_SIZE),
        warp(tid / WARP_SIZE),
        flagLane(tid % 8 == 7),
        recvConn(recvConn),
        sendConn(sendConn),
        userInput((const T*)inputBuf),
        userOutput((T*)outputBuf) {
    redOp.arg = redOpArg;
    struct mcclConnInfo* c = recvConn ? recvConn : sendConn;
    stepWords = c ? c->ll128StepSize / (int)sizeof(uint64_t) : 0;
    if (recvConn) {
      recvBuff = (uint64_t*)recvConn->buffs[MCCL_PROTO_LL128];
      recvStep = recvConn->step;
      if (tid == nthreads - WARP_SIZE) {
        recvConnHeadPtr = recvConn->head;
        recvConnHead = recvConn->step;
      }
    }
    if (sendConn) {
      sendBuff = (uint64_t*)sendConn->buffs[MCCL_PROTO_LL128];
      sendStep = sendConn->step;
      if (tid == 0) {
        sendConnHeadPtr = sendConn->head;
        sendConnHeadCache = ld_volatile_global(sendConnHeadPtr);
        sendConnHead = sendConn->step;
        sendConnFifo = sendConn->connFifo;
      }
    }
    // A connection without an LL128 FIFO (SHM, NET, P2P over PCIe) has nothing to carry the lines: the launch ends as
    // aborted rather than storing through NULL. Lab 07 never plans LL128 on such a path.
    if ((recvConn && recvBuff == NULL) || (sendConn && sendBuff == NULL) || stepWords < WireWordPerSlice) {
      flags |= Aborted;
      if (tid == 0 && mcclShmem.work.trace)
        printf("  [%s block %d] LL128 on a connection without an LL128 FIFO: aborted\n",
               mcclDevOpNameDev(mcclShmem.work.op), (int)blockIdx.x);
    }
    barrier_sync(MCCL_BAR_GROUP - group, nthreads);
  }

  __device__ ~Primitives() {
    if (sendConnHeadPtr) sendConn->step = sendConnHead;
    if (recvConnHeadPtr) recvConn->step = recvConnHead;
    barrier_sync(MCCL_BAR_GROUP - group, nthreads);
  }

  __device__ bool aborted() const {
    return (flags & Aborted) != 0;
  }
  // Elements one step's slot holds: its whole slices' data.
  __device__ int chunkElems() const {
    return stepWords / WireWordPerSlice * DataEltPerSlice;
  }

  __device__ void send(int64_t inpIx, int eltN) {
    GenericOp<0, 1, mcclPrimsInput, -1>(inpIx, -1, eltN, false);
  }
  __device__ void recv(int64_t outIx, int eltN, bool postOp = false) {
    GenericOp<1, 0, -1, mcclPrimsOutput>(-1, outIx, eltN, postOp);
  }
  __device__ void copySend(int64_t inpIx, int64_t outIx, int eltN, bool postOp = false) {
    GenericOp<0, 1, mcclPrimsInput, mcclPrimsOutput>(inpIx, outIx, eltN, postOp);
  }
  __device__ void recvCopySend(int64_t outIx, int eltN, bool postOp = false) {
    GenericOp<1, 1, -1, mcclPrimsOutput>(-1, outIx, eltN, postOp);
  }
  __device__ void recvReduceSend(int64_t inpIx, int eltN) {
    GenericOp<1, 1, mcclPrimsInput, -1>(inpIx, -1, eltN, false);
  }
  __device__ void recvReduceCopy(int64_t inpIx, int64_t outIx, int eltN, bool postOp = false) {
    GenericOp<1, 0, mcclPrimsInput, mcclPrimsOutput>(inpIx, outIx, eltN, postOp);
  }
  __device__ void recvReduceCopySend(int64_t inpIx, int64_t outIx, int eltN, bool postOp = false) {
    GenericOp<1, 1, mcclPrimsInput, mcclPrimsOutput>(inpIx, outIx, eltN, postOp);
  }
};

#endif
