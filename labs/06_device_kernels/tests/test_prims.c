// Lab 06 kernels in one process: a producer kernel on one device and a consumer kernel on another,
// connected by a local pair over SHM and over P2P, for both protocols. Sizes from 1 byte up (none of
// them a multiple of a slot, of 16 bytes or of the element size, some on misaligned buffers; 256 MiB on
// the GPU, less on the sim), every byte checked against a seeded pattern with the rest of the
// destination still poison; every public op in a chain of three endpoints; every type x reduction
// against a CPU reference; step counters that wrap at 2^64; abort and mcclDevWait's timeout; and bad
// work descriptions refused before anything is launched.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mccl_alloc.h"
#include "mccl_checks.h"
#include "mccl_devconn.h"
#include "mccl_param.h"
#include "mccl_prims.h"
#include "mccl_test.h"
#include "mccl_elt.h"
#include "prims_test_util.h"

// A launch that should take milliseconds is declared lost after this long (then aborted, so the
// test fails instead of hanging). Generous: the sim on 2 shared cores, under ASan, is slow.
#define PT_LOST_MS 120000

// ---- a link: one pair, the device copies of its connections, a launcher per end ------------------
typedef struct {
  struct mcclDevPair* pair;
  int nch;
  struct mcclConnInfo* sendConns;  // ends[0].send on ends[0]'s device
  struct mcclConnInfo* recvConns;  // ends[1].recv on ends[1]'s device
  ptLauncher snd, rcv;
  volatile uint32_t* abortH;  // one flag for both ends: a lost launch aborts its partner too
  uint32_t* abortD;
} ptLink;

static mcclResult_t linkOpen(ptLink* l, int devS, int devR, int nch, mcclDevTransport_t which, uint64_t initialStep) {
  memset(l, 0, sizeof(*l));
  l->nch = nch;
  MCCLCHECK(mcclDevPairLocalCreate(devS, devR, nch, MCCL_DEVPAIR_SEND, which, initialStep, &l->pair));
  CUDACHECK(cudaSetDevice(devS));
  MCCLCHECK(mcclDevConnCreate(l->pair->ends[0].send, nch, &l->sendConns));
  CUDACHECK(cudaSetDevice(devR));
  MCCLCHECK(mcclDevConnCreate(l->pair->ends[1].recv, nch, &l->recvConns));
  MCCLCHECK(ptLauncherInit(&l->snd, devS));
  MCCLCHECK(ptLauncherInit(&l->rcv, devR));
  MCCLCHECK(mcclDevAbortFlagCreate(&l->abortH, &l->abortD));
  return mcclSuccess;
}

static mcclResult_t linkClose(ptLink* l) {
  mcclResult_t res = mcclSuccess, r;
  ptLauncherFree(&l->snd);
  ptLauncherFree(&l->rcv);
  if ((r = mcclDevConnFree(l->sendConns)) != mcclSuccess) res = r;
  if ((r = mcclDevConnFree(l->recvConns)) != mcclSuccess) res = r;
  if ((r = mcclDevAbortFlagFree(l->abortH)) != mcclSuccess) res = r;
  if ((r = mcclDevPairLocalFree(l->pair)) != mcclSuccess) res = r;
  memset(l, 0, sizeof(*l));
  return res;
}

// One message: the consumer (recv, or recvReduceCopy with its own src) on the receiving device, the
// producer (send) on the sending device, launched in that order, both waited for.
static mcclResult_t linkMove(ptLink* l, int proto, int dtype, size_t count, const void* src, void* dst,
                             struct mcclDevWork* recvWork, int chunkSteps) {
  struct mcclDevWork s = ptWork(mcclDevOpSend, proto, dtype, mcclSum, count, l->nch);
  s.src = src;
  s.sendConns = l->sendConns;
  s.chunkSteps = chunkSteps;
  struct mcclDevWork r = ptWork(mcclDevOpRecv, proto, dtype, mcclSum, count, l->nch);
  if (recvWork) r = *recvWork;
  r.dst = dst;
  r.recvConns = l->recvConns;
  r.chunkSteps = chunkSteps;
  MCCLCHECK(ptLaunch(&l->rcv, &r, l->abortD, ptThreads()));
  MCCLCHECK(ptLaunch(&l->snd, &s, l->abortD, ptThreads()));
  ptLauncher* both[2] = {&l->rcv, &l->snd};
  return ptWaitAll(both, 2, l->abortH, PT_LOST_MS);
}

// Both ends' steps, read back from the device copies, equal `want` on every channel.
static int linkStepsAre(ptLink* l, const uint64_t* want) {
  if (mcclDevConnReadStep(l->pair->ends[0].send, l->nch, l->sendConns) != mcclSuccess) return 0;
  if (mcclDevConnReadStep(l->pair->ends[1].recv, l->nch, l->recvConns) != mcclSuccess) return 0;
  for (int c = 0; c < l->nch; c++) {
    if (l->pair->ends[0].send[c].conn.step != want[c] || l->pair->ends[1].recv[c].conn.step != want[c]) {
      fprintf(stderr, "# channel %d: send step %llu, recv step %llu, expected %llu\n", c,
              (unsigned long long)l->pair->ends[0].send[c].conn.step,
              (unsigned long long)l->pair->ends[1].recv[c].conn.step, (unsigned long long)want[c]);
      return 0;
    }
  }
  return 1;
}

// ---- 1. producer -> consumer, 1 B ... 256 MiB ------------------------------------------------------
// Bytes moved per size, for each protocol. A SIMPLE slot is MCCL_BUFFSIZE / MCCL_STEPS = 512 KiB, an LL
// slot carries 32 KiB of data; the sizes straddle both, and none is a multiple of 16. The GPU runs
// the full range; the sim (2 shared cores, a host thread per GPU thread) stops at 16 MiB for SIMPLE
// and 2 MiB for LL, which still spans several FIFO wraps of each.
static const size_t simpleSizes[] = {1,
                                     3,
                                     15,
                                     17,
                                     255,
                                     4097,
                                     65537,
                                     (512 << 10) - 1,
                                     (512 << 10) + 1,
                                     (3 << 20) + 5,
                                     (16 << 20) + 7,
                                     (64 << 20) + 11,
                                     (256 << 20) - 3,
                                     256 << 20};
static const size_t llSizes[] = {1,
                                 7,
                                 9,
                                 4095,
                                 (32 << 10) - 1,
                                 (32 << 10) + 9,
                                 100003,
                                 (1 << 20) + 1,
                                 (2 << 20) + 3,
                                 (64 << 20) - 5,
                                 (256 << 20) - 1,
                                 256 << 20};
// LL128: a slot of the default MCCL_LL128_BUFFSIZE carries 450 KiB of data (240 slices of 1920 bytes); the
// sizes end mid-line, mid-slice and mid-slot.
static const size_t ll128Sizes[] = {1,
                                    15,
                                    121,
                                    1919,
                                    1921,
                                    100003,
                                    (450 << 10) - 1,
                                    (450 << 10) + 1,
                                    (1 << 20) + 7,
                                    (2 << 20) + 3,
                                    (64 << 20) - 5,
                                    256 << 20};
static size_t maxBytes(int proto) {
  return PT_ON_SIM ? (proto == MCCL_PROTO_SIMPLE ? (17 << 20) : (3 << 20)) : (256 << 20);
}

static void moveBytes(mcclDevTransport_t which, int proto) {
  int n = mcclTestDeviceCount();
  if (n < 2) SKIP("needs 2 devices");
  if (which == mcclDevTransportP2p && !mcclCuMemEnable()) SKIP("cuMem not supported: no P2P");
  const size_t* sizes = proto == MCCL_PROTO_LL ? llSizes : proto == MCCL_PROTO_LL128 ? ll128Sizes : simpleSizes;
  int nsizes = proto == MCCL_PROTO_LL      ? (int)(sizeof(llSizes) / sizeof(llSizes[0]))
               : proto == MCCL_PROTO_LL128 ? (int)(sizeof(ll128Sizes) / sizeof(ll128Sizes[0]))
                                           : (int)(sizeof(simpleSizes) / sizeof(simpleSizes[0]));
  const size_t cap = maxBytes(proto), guard = 64;
  const int nch = 2;
  ptLink l;
  EXPECT_OK(linkOpen(&l, 0, 1, nch, which, 0));
  size_t bufBytes = cap + 2 * guard;
  unsigned char* want = malloc(bufBytes);
  unsigned char* got = malloc(bufBytes);
  void *src = NULL, *dst = NULL;
  EXPECT_CUDA_OK(cudaSetDevice(0));
  EXPECT_CUDA_OK(cudaMalloc(&src, bufBytes));
  EXPECT_CUDA_OK(cudaSetDevice(1));
  EXPECT_CUDA_OK(cudaMalloc(&dst, bufBytes));
  EXPECT_TRUE(want && got);
  uint64_t seed = mcclTestRand();
  uint64_t steps[2] = {0, 0};
  int ran = 0;
  for (int i = 0; i < nsizes; i++) {
    size_t bytes = sizes[i];
    if (bytes > cap) continue;
    // Small sizes alternate between aligned buffers and buffers 1 and 3 bytes off (the copy loop's
    // narrowest packs); the big ones stay aligned (the 16-byte packs). Section 3b tries every offset.
    size_t so = (i & 1) && bytes <= (1 << 20) ? 1 : 0, dOff = (i & 1) && bytes <= (1 << 20) ? 3 : 0;
    ptFill(want, bytes, seed + i);
    EXPECT_CUDA_OK(cudaSetDevice(0));
    EXPECT_CUDA_OK(mcclTestCopyToDevice((char*)src + so, want, bytes));
    EXPECT_CUDA_OK(cudaSetDevice(1));
    EXPECT_CUDA_OK(mcclTestMemset(dst, PT_POISON, dOff + bytes + guard));
    int64_t t0 = (int64_t)mcclClockUs();
    EXPECT_OK(linkMove(&l, proto, mcclUint8, bytes, (char*)src + so, (char*)dst + dOff, NULL, 0));
    int64_t us = (int64_t)mcclClockUs() - t0;
    EXPECT_EQ(*l.rcv.statusH, mcclDevStatusDone);
    EXPECT_EQ(*l.snd.statusH, mcclDevStatusDone);
    EXPECT_CUDA_OK(cudaSetDevice(1));
    EXPECT_CUDA_OK(cudaMemcpy(got, dst, dOff + bytes + guard, cudaMemcpyDeviceToHost));
    size_t nbad = 0;
    int64_t bad = ptCompare(got + dOff, want, bytes, &nbad);
    if (bad >= 0)
      mcclTestFailAt(__FILE__, __LINE__, "%zu bytes: %zu bytes differ, first at %lld: expected 0x%02x, got 0x%02x",
                     bytes, nbad, (long long)bad, want[bad], got[dOff + bad]);
    for (size_t k = 0; k < dOff && bad < 0; k++)
      if (got[k] != PT_POISON) mcclTestFailAt(__FILE__, __LINE__, "%zu bytes: byte %zu before dst written", bytes, k);
    for (size_t k = 0; k < guard && bad < 0; k++)
      if (got[dOff + bytes + k] != PT_POISON)
        mcclTestFailAt(__FILE__, __LINE__, "%zu bytes: byte %zu past the end of dst written", bytes, k);
    if (mcclTestStopped()) break;
    for (int c = 0; c < nch; c++)
      steps[c] =
          ptStepAfter(steps[c], proto, &l.pair->ends[0].send[c].conn, bytes, nch, c, MCCL_DEV_DEFAULT_CHUNKSTEPS);
    if (!linkStepsAre(&l, steps)) mcclTestFailAt(__FILE__, __LINE__, "%zu bytes: steps (see stderr)", bytes);
    if (mcclTestStopped()) break;
    if (bytes >= (1 << 20)) printf("#   %zu bytes in %.1f ms\n", bytes, us / 1000.0);
    ran++;
  }
  cudaSetDevice(0);
  cudaFree(src);
  cudaSetDevice(1);
  cudaFree(dst);
  free(want);
  free(got);
  EXPECT_OK(linkClose(&l));
  CHECK_STOPPED();
  EXPECT_GE(ran, 8);
}

static void moveShmSimple(void) {
  moveBytes(mcclDevTransportShm, MCCL_PROTO_SIMPLE);
}
static void moveShmLL(void) {
  moveBytes(mcclDevTransportShm, MCCL_PROTO_LL);
}
static void moveP2pSimple(void) {
  moveBytes(mcclDevTransportP2p, MCCL_PROTO_SIMPLE);
}
static void moveP2pLL(void) {
  moveBytes(mcclDevTransportP2p, MCCL_PROTO_LL);
}
static void moveP2pLL128(void) {
  moveBytes(mcclDevTransportP2p, MCCL_PROTO_LL128);
}

// Only a pair over NVLink gets an LL128 FIFO. SHM has none (host memory promises no 128-byte line
// delivery), nor has P2P between devices without NVLink (no native atomics between them: PCIe; the sim
// poses such a pair with MCCL_SIM_NVLINK=0, a GPU host with NVLink between devices 0 and 1 leaves that
// part out). An LL128 launch on either ends as aborted on both sides at once, with nothing stored.
static void ll128WithoutNvlinkAborts(void) {
  if (mcclTestDeviceCount() < 2) SKIP("needs 2 devices");
  int nvlinkPair = 0;
  if (!PT_ON_SIM && cudaDeviceGetP2PAttribute(&nvlinkPair, cudaDevP2PAttrNativeAtomicSupported, 0, 1) != cudaSuccess)
    nvlinkPair = 1;  // unknown: leave the P2P part out
  const size_t bytes = 1000;
  void *src = NULL, *dst = NULL;
  unsigned char got[1000];
  EXPECT_CUDA_OK(cudaSetDevice(0));
  EXPECT_CUDA_OK(cudaMalloc(&src, bytes));
  EXPECT_CUDA_OK(cudaSetDevice(1));
  EXPECT_CUDA_OK(cudaMalloc(&dst, bytes));
  for (int pcie = 0; pcie < 2 && !mcclTestStopped(); pcie++) {
    if (pcie && (nvlinkPair || !mcclCuMemEnable())) continue;
    if (pcie && PT_ON_SIM) setenv("MCCL_SIM_NVLINK", "0", 1);  // read as the connections are set up
    ptLink l;
    EXPECT_OK(linkOpen(&l, 0, 1, 1, pcie ? mcclDevTransportP2p : mcclDevTransportShm, 0));
    unsetenv("MCCL_SIM_NVLINK");
    CHECK_STOPPED();
    EXPECT_TRUE(l.pair->ends[0].send[0].conn.buffs[MCCL_PROTO_LL128] == NULL);
    EXPECT_TRUE(l.pair->ends[1].recv[0].conn.buffs[MCCL_PROTO_LL128] == NULL);
    EXPECT_EQ(l.pair->ends[0].send[0].conn.ll128StepSize, 0);
    EXPECT_TRUE(l.pair->ends[0].send[0].conn.buffs[MCCL_PROTO_SIMPLE] != NULL);
    EXPECT_CUDA_OK(mcclTestMemset(dst, PT_POISON, bytes));
    mcclResult_t r = linkMove(&l, MCCL_PROTO_LL128, mcclUint8, bytes, src, dst, NULL, 0);
    EXPECT_RES(r, mcclInternalError);
    EXPECT_EQ(*l.rcv.statusH, mcclDevStatusAborted);
    EXPECT_EQ(*l.snd.statusH, mcclDevStatusAborted);
    EXPECT_CUDA_OK(cudaSetDevice(1));
    EXPECT_CUDA_OK(cudaMemcpy(got, dst, bytes, cudaMemcpyDeviceToHost));
    size_t touched = 0;
    for (size_t i = 0; i < bytes; i++) touched += got[i] != PT_POISON;
    EXPECT_EQ(touched, 0);
    EXPECT_OK(linkClose(&l));
  }
  cudaSetDevice(0);
  cudaFree(src);
  cudaSetDevice(1);
  cudaFree(dst);
}

// ---- 2. every public op: a chain of three endpoints --------------------------------------------
// A (device 0) -> B (device 1) -> C (device 2, or device 0 again on a 2-GPU host). A runs send or
// copySend, B one of the middle ops, C recv or recvReduceCopy, all on int32 with the reduction of the
// case; each has its own input (a, b, c). The reference follows the data: B reduces its own b with
// what arrives (b op a), C the same with what B sent. Integers wrap (computed unsigned).
typedef struct {
  int opA, opB, opC, redop, postB, postC;
  uint64_t argB, argC;
} chainCase;

static const chainCase chainCases[] = {
    {mcclDevOpSend, mcclDevOpRecvCopySend, mcclDevOpRecv, mcclSum, 0, 0, 0, 0},
    {mcclDevOpCopySend, mcclDevOpRecvReduceSend, mcclDevOpRecvReduceCopy, mcclSum, 0, 0, 0, 0},
    {mcclDevOpSend, mcclDevOpRecvReduceCopySend, mcclDevOpRecv, mcclProd, 0, 0, 0, 0},
    {mcclDevOpCopySend, mcclDevOpRecvReduceCopySend, mcclDevOpRecvReduceCopy, mcclAvg, 0, 1, 3, 3},
    {mcclDevOpSend, mcclDevOpRecvReduceCopySend, mcclDevOpRecv, mcclAvg, 1, 0, 2, 2},  // postOp: dst and send both
    {mcclDevOpSend, mcclDevOpRecvReduceSend, mcclDevOpRecvReduceCopy, mcclMax, 0, 0, 0, 0},
    {mcclDevOpCopySend, mcclDevOpRecvCopySend, mcclDevOpRecvReduceCopy, mcclMin, 0, 0, 0, 0},
};

static int32_t refI32(int redop, int32_t x, int32_t y) {
  switch (redop) {
    case mcclSum:
    case mcclAvg:
      return (int32_t)((uint32_t)x + (uint32_t)y);
    case mcclProd:
      return (int32_t)((uint32_t)x * (uint32_t)y);
    case mcclMax:
      return x < y ? y : x;
    default:
      return x < y ? x : y;
  }
}
static int32_t postI32(int redop, int32_t x, uint64_t arg) {
  return redop == mcclAvg ? x / (int32_t)arg : x;
}

static int opHasSrc(int op) {
  return op == mcclDevOpSend || op == mcclDevOpCopySend || op >= mcclDevOpRecvReduceSend;
}
static int opHasDst(int op) {
  return op != mcclDevOpSend && op != mcclDevOpRecvReduceSend;
}
static int opReduces(int op) {
  return op >= mcclDevOpRecvReduceSend;
}

static void chainOps(int proto) {
  int n = mcclTestDeviceCount();
  if (n < 2) SKIP("needs 2 devices");
  const int devA = 0, devB = 1, devC = n >= 3 ? 2 : 0, nch = 2;
  // One hop over SHM, the other over P2P (when the backend can), as a ring mixes them.
  ptLink ab, bc;
  EXPECT_OK(linkOpen(&ab, devA, devB, nch, mcclDevTransportShm, 0));
  EXPECT_OK(linkOpen(&bc, devB, devC, nch, mcclCuMemEnable() ? mcclDevTransportP2p : mcclDevTransportShm, 0));
  ptLauncher* lA = &ab.snd;
  ptLauncher* lB = &ab.rcv;
  ptLauncher* lC = &bc.rcv;
  const size_t counts[] = {1, 13, 4099, 70001, 300007, (size_t)10 << 20};
  size_t maxCount = PT_ON_SIM ? (proto == MCCL_PROTO_LL ? 70001 : 300007) : ((size_t)10 << 20);
  size_t bytes = maxCount * sizeof(int32_t);
  int32_t *h[3], *hd[3], *want[3];
  void *src[3], *dst[3];
  int devs[3] = {devA, devB, devC};
  for (int e = 0; e < 3; e++) {
    h[e] = malloc(bytes);
    hd[e] = malloc(bytes);
    want[e] = malloc(bytes);
    EXPECT_TRUE(h[e] && hd[e] && want[e]);
    EXPECT_CUDA_OK(cudaSetDevice(devs[e]));
    EXPECT_CUDA_OK(cudaMalloc(&src[e], bytes));
    EXPECT_CUDA_OK(cudaMalloc(&dst[e], bytes));
    for (size_t i = 0; i < maxCount; i++) h[e][i] = (int32_t)mcclTestRand();
    EXPECT_CUDA_OK(mcclTestCopyToDevice(src[e], h[e], bytes));
  }
  uint64_t stepsAB[2] = {0, 0}, stepsBC[2] = {0, 0};
  for (size_t k = 0; k < sizeof(chainCases) / sizeof(chainCases[0]) && !mcclTestStopped(); k++) {
    const chainCase* cc = &chainCases[k];
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]) && !mcclTestStopped(); ci++) {
      size_t count = counts[ci];
      if (count > maxCount) continue;
      // Under a sanitizer the counts of several FIFO rounds run for half the cases (mcclTestSampled).
      if (count >= 70001 && !mcclTestSampled((uint64_t)(k * 8 + ci), 2)) continue;
      for (int e = 0; e < 3; e++) {
        EXPECT_CUDA_OK(cudaSetDevice(devs[e]));
        EXPECT_CUDA_OK(mcclTestMemset(dst[e], PT_POISON, count * sizeof(int32_t)));
      }
      struct mcclDevWork wA = ptWork(cc->opA, proto, mcclInt32, cc->redop, count, nch);
      struct mcclDevWork wB = wA, wC = wA;
      wB.op = cc->opB;
      wC.op = cc->opC;
      wA.src = src[0];
      wA.dst = opHasDst(cc->opA) ? dst[0] : NULL;
      wA.sendConns = ab.sendConns;
      wB.src = opHasSrc(cc->opB) ? src[1] : NULL;
      wB.dst = opHasDst(cc->opB) ? dst[1] : NULL;
      wB.recvConns = ab.recvConns;
      wB.sendConns = bc.sendConns;
      wB.postOp = cc->postB;
      wB.redOpArg = cc->argB;
      wC.src = opHasSrc(cc->opC) ? src[2] : NULL;
      wC.dst = dst[2];
      wC.recvConns = bc.recvConns;
      wC.postOp = cc->postC;
      wC.redOpArg = cc->argC;
      // The copy ops (A's, recvCopySend, recv) take no reduction: mcclSum, as the header asks.
      if (!opReduces(wA.op)) wA.redop = mcclSum;
      if (!opReduces(wB.op)) wB.redop = mcclSum;
      if (!opReduces(wC.op)) wC.redop = mcclSum;
      EXPECT_OK(ptLaunch(lC, &wC, ab.abortD, ptThreads()));
      EXPECT_OK(ptLaunch(lB, &wB, ab.abortD, ptThreads()));
      EXPECT_OK(ptLaunch(lA, &wA, ab.abortD, ptThreads()));
      ptLauncher* all[3] = {lC, lB, lA};
      EXPECT_OK(ptWaitAll(all, 3, ab.abortH, PT_LOST_MS));
      // The reference.
      for (size_t i = 0; i < count; i++) {
        int32_t a = h[0][i], b = h[1][i], c = h[2][i], sent;
        if (cc->opB == mcclDevOpRecvCopySend)
          sent = a;
        else
          sent = refI32(cc->redop, b, a);
        if (cc->postB) sent = postI32(cc->redop, sent, cc->argB);
        want[0][i] = a;
        want[1][i] = sent;
        want[2][i] = cc->opC == mcclDevOpRecv ? sent : refI32(cc->redop, c, sent);
        if (cc->postC) want[2][i] = postI32(cc->redop, want[2][i], cc->argC);
      }
      for (int e = 0; e < 3; e++) {
        int op = e == 0 ? cc->opA : e == 1 ? cc->opB : cc->opC;
        if (!opHasDst(op)) continue;
        EXPECT_CUDA_OK(cudaSetDevice(devs[e]));
        EXPECT_CUDA_OK(cudaMemcpy(hd[e], dst[e], count * sizeof(int32_t), cudaMemcpyDeviceToHost));
        size_t nbad = 0;
        int64_t bad = ptCompare(hd[e], want[e], count * sizeof(int32_t), &nbad);
        if (bad >= 0) {
          size_t i = (size_t)bad / sizeof(int32_t);
          mcclTestFailAt(__FILE__, __LINE__,
                         "%s -> %s -> %s (%s), %zu elements: endpoint %c element %zu is %d, expected %d",
                         mcclDevOpName(cc->opA), mcclDevOpName(cc->opB), mcclDevOpName(cc->opC), mcclOpName(cc->redop),
                         count, 'A' + e, i, hd[e][i], want[e][i]);
          break;
        }
      }
      for (int c = 0; c < nch; c++) {
        stepsAB[c] = ptStepAfter(stepsAB[c], proto, &ab.pair->ends[0].send[c].conn, count * 4, nch, c,
                                 MCCL_DEV_DEFAULT_CHUNKSTEPS);
        stepsBC[c] = ptStepAfter(stepsBC[c], proto, &bc.pair->ends[0].send[c].conn, count * 4, nch, c,
                                 MCCL_DEV_DEFAULT_CHUNKSTEPS);
      }
      if (!mcclTestStopped() && !(linkStepsAre(&ab, stepsAB) && linkStepsAre(&bc, stepsBC)))
        mcclTestFailAt(__FILE__, __LINE__, "case %zu, %zu elements: steps (see stderr)", k, count);
    }
  }
  for (int e = 0; e < 3; e++) {
    cudaSetDevice(devs[e]);
    cudaFree(src[e]);
    cudaFree(dst[e]);
    free(h[e]);
    free(hd[e]);
    free(want[e]);
  }
  EXPECT_OK(linkClose(&ab));
  EXPECT_OK(linkClose(&bc));
}

static void chainSimple(void) {
  chainOps(MCCL_PROTO_SIMPLE);
}
static void chainLL(void) {
  chainOps(MCCL_PROTO_LL);
}

// ---- 3. every type x reduction against a CPU reference -----------------------------------------
// Reference for element i: out = post?(x op y) with x the receiver's own input, y what arrived,
// computed as the kernel does (reduce_kernel.cuh): integers in unsigned arithmetic, 16-bit floats in
// float and rounded back once per operation.
#define REF_INT(T, U)                                  \
  do {                                                 \
    T x = ((const T*)xs)[i], y = ((const T*)ys)[i], r; \
    switch (redop) {                                   \
      case mcclSum:                                    \
      case mcclAvg:                                    \
        r = (T)(U)((U)x + (U)y);                       \
        break;                                         \
      case mcclProd:                                   \
        r = (T)(U)((U)x * (U)y);                       \
        break;                                         \
      case mcclMax:                                    \
        r = x < y ? y : x;                             \
        break;                                         \
      default:                                         \
        r = x < y ? x : y;                             \
        break;                                         \
    }                                                  \
    if (post && redop == mcclAvg) r = (T)(r / (T)arg); \
    ((T*)out)[i] = r;                                  \
  } while (0)
#define REF_FLOAT(T)                                   \
  do {                                                 \
    T x = ((const T*)xs)[i], y = ((const T*)ys)[i], r; \
    switch (redop) {                                   \
      case mcclSum:                                    \
      case mcclAvg:                                    \
        r = x + y;                                     \
        break;                                         \
      case mcclProd:                                   \
        r = x * y;                                     \
        break;                                         \
      case mcclMax:                                    \
        r = x < y ? y : x;                             \
        break;                                         \
      default:                                         \
        r = x < y ? x : y;                             \
        break;                                         \
    }                                                  \
    if (post && redop == mcclAvg) r = r / (T)arg;      \
    ((T*)out)[i] = r;                                  \
  } while (0)
// 16-bit and 8-bit floats: the exact result of two of the type's values, rounded as the kernel rounds
// it (mcclEltOpResult: once; fp8 through half as NCCL).
#define REF_SMALL()                                                        \
  do {                                                                     \
    double x = mcclEltGet(t, xs, i), y = mcclEltGet(t, ys, i), r;          \
    switch (redop) {                                                       \
      case mcclSum:                                                        \
      case mcclAvg:                                                        \
        r = mcclEltOpResult(t, x + y);                                     \
        break;                                                             \
      case mcclProd:                                                       \
        r = mcclEltOpResult(t, x * y);                                     \
        break;                                                             \
      case mcclMax:                                                        \
        r = x < y ? y : x;                                                 \
        break;                                                             \
      default:                                                             \
        r = x < y ? x : y;                                                 \
        break;                                                             \
    }                                                                      \
    if (post && redop == mcclAvg) r = mcclEltOpResult(t, r / (double)arg); \
    mcclEltSet(t, out, i, r);                                              \
  } while (0)

static void refReduce(int dtype, int redop, int post, uint64_t arg, const void* xs, const void* ys, void* out,
                      size_t count) {
  const mcclDataType_t t = (mcclDataType_t)dtype;
  for (size_t i = 0; i < count; i++) {
    switch (dtype) {
      case mcclInt8:
        REF_INT(int8_t, uint32_t);
        break;
      case mcclUint8:
        REF_INT(uint8_t, uint32_t);
        break;
      case mcclInt32:
        REF_INT(int32_t, uint32_t);
        break;
      case mcclUint32:
        REF_INT(uint32_t, uint32_t);
        break;
      case mcclInt64:
        REF_INT(int64_t, uint64_t);
        break;
      case mcclUint64:
        REF_INT(uint64_t, uint64_t);
        break;
      case mcclFloat16:
        REF_SMALL();
        break;
      case mcclFloat32:
        REF_FLOAT(float);
        break;
      case mcclFloat64:
        REF_FLOAT(double);
        break;
      default:  // bfloat16, fp8
        REF_SMALL();
        break;
    }
  }
}

// Inputs: integers take every bit pattern (so sums and products wrap); floats are multiples of 1/4
// in [-64, 64] (16-bit floats: [-16, 16]; fp8: [-4, 4] E4M3, [-2, 2] E5M2), exactly representable, so
// that every difference between the kernel and the reference comes from the operation itself, not from
// the inputs.
static void fillType(int dtype, void* p, size_t count) {
  const mcclDataType_t t = (mcclDataType_t)dtype;
  for (size_t i = 0; i < count; i++) {
    uint64_t r = mcclTestRand();
    switch (dtype) {
      case mcclFloat16:
      case mcclBfloat16:
        mcclEltSet(t, p, i, (double)((int)(r % 129) - 64) / 4);
        break;
      case mcclFloat8e4m3:
        mcclEltSet(t, p, i, (double)((int)(r % 33) - 16) / 4);
        break;
      case mcclFloat8e5m2:
        mcclEltSet(t, p, i, (double)((int)(r % 17) - 8) / 4);
        break;
      case mcclFloat32:
        ((float*)p)[i] = (float)((int)(r % 513) - 256) / 4;
        break;
      case mcclFloat64:
        ((double*)p)[i] = (double)((int)(r % 513) - 256) / 4;
        break;
      default:
        memcpy((char*)p + i * mcclTypeSize(dtype), &r, mcclTypeSize(dtype));
        break;
    }
  }
}

// The bound: integers exact. float32/float64: exact (bitwise): each result is one IEEE operation
// (x + y, x * y, a comparison, or (x + y) / n as two) rounded once to nearest, on the GPU (no fused
// or fast-math division in this code) as on the host. 16- and 8-bit floats: within 1 ulp: the kernel
// divides in float and rounds that (twice for fp8), the reference rounds the exact quotient, and a
// GPU's native 16-bit arithmetic may round a sum or product directly.
static int64_t smallKey(uint32_t u, int bits) {
  const uint32_t sign = 1u << (bits - 1);
  return (u & sign) ? -(int64_t)(u & (sign - 1)) : (int64_t)(u & (sign - 1));
}
static int64_t firstOutOfBound(int dtype, const void* got, const void* want, size_t count) {
  for (size_t i = 0; i < count; i++) {
    if (dtype == mcclFloat16 || dtype == mcclBfloat16) {
      int64_t d = smallKey(((const uint16_t*)got)[i], 16) - smallKey(((const uint16_t*)want)[i], 16);
      if (d > 1 || d < -1) return (int64_t)i;
    } else if (dtype == mcclFloat8e4m3 || dtype == mcclFloat8e5m2) {
      int64_t d = smallKey(((const uint8_t*)got)[i], 8) - smallKey(((const uint8_t*)want)[i], 8);
      if (d > 1 || d < -1) return (int64_t)i;
    } else {
      size_t s = mcclTypeSize(dtype);
      if (memcmp((const char*)got + i * s, (const char*)want + i * s, s) != 0) return (int64_t)i;
    }
  }
  return -1;
}

static void reduceTypes(int proto) {
  int n = mcclTestDeviceCount();
  if (n < 2) SKIP("needs 2 devices");
  const int nch = 2;
  // Elements per launch: not a multiple of any pack (16 / size), more than one LL slot for 8-byte
  // types on the GPU; the sim keeps it short (100 launches of two kernels).
  const size_t count = PT_ON_SIM ? 2053 : 70001;
  const size_t bytes = count * 8;
  ptLink l;
  EXPECT_OK(linkOpen(&l, 0, 1, nch, proto == MCCL_PROTO_LL128 ? mcclDevTransportP2p : mcclDevTransportAuto, 0));
  void *a = malloc(bytes), *b = malloc(bytes), *got = malloc(bytes), *want = malloc(bytes);
  EXPECT_TRUE(a && b && got && want);
  void *srcA = NULL, *srcB = NULL, *dst = NULL;
  EXPECT_CUDA_OK(cudaSetDevice(0));
  EXPECT_CUDA_OK(cudaMalloc(&srcA, bytes));
  EXPECT_CUDA_OK(cudaSetDevice(1));
  EXPECT_CUDA_OK(cudaMalloc(&srcB, bytes));
  EXPECT_CUDA_OK(cudaMalloc(&dst, bytes));
  for (int dtype = 0; dtype < mcclNumTypes && !mcclTestStopped(); dtype++) {
    size_t tb = count * mcclTypeSize(dtype);
    fillType(dtype, a, count);
    fillType(dtype, b, count);
    EXPECT_CUDA_OK(cudaSetDevice(0));
    EXPECT_CUDA_OK(mcclTestCopyToDevice(srcA, a, tb));
    EXPECT_CUDA_OK(cudaSetDevice(1));
    EXPECT_CUDA_OK(mcclTestCopyToDevice(srcB, b, tb));
    for (int redop = 0; redop < mcclNumOps && !mcclTestStopped(); redop++) {
      if (!mcclTestSampled((uint64_t)(dtype * mcclNumOps + redop), 3)) continue;
      // avg divides by redOpArg where postOp is set (2, 3 or 4 here); the other operations' post
      // step is the identity, tried with postOp on for every other type.
      int post = redop == mcclAvg || (dtype & 1);
      uint64_t arg = redop == mcclAvg ? 2 + (uint64_t)(dtype % 3) : 0;
      EXPECT_CUDA_OK(cudaSetDevice(1));
      EXPECT_CUDA_OK(mcclTestMemset(dst, PT_POISON, tb));
      struct mcclDevWork r = ptWork(mcclDevOpRecvReduceCopy, proto, dtype, redop, count, nch);
      r.src = srcB;
      r.postOp = post;
      r.redOpArg = arg;
      EXPECT_OK(linkMove(&l, proto, dtype, count, srcA, dst, &r, 0));
      EXPECT_CUDA_OK(cudaSetDevice(1));
      EXPECT_CUDA_OK(cudaMemcpy(got, dst, tb, cudaMemcpyDeviceToHost));
      refReduce(dtype, redop, post, arg, b, a, want, count);
      int64_t bad = firstOutOfBound(dtype, got, want, count);
      if (bad >= 0) {
        uint64_t g = 0, w = 0, x = 0, y = 0;
        size_t s = mcclTypeSize(dtype);
        memcpy(&g, (char*)got + bad * s, s);
        memcpy(&w, (char*)want + bad * s, s);
        memcpy(&x, (char*)b + bad * s, s);
        memcpy(&y, (char*)a + bad * s, s);
        mcclTestFailAt(__FILE__, __LINE__,
                       "%s %s%s: element %lld of %zu: inputs 0x%llx, 0x%llx: expected 0x%llx, got 0x%llx (raw bits)",
                       mcclTypeName(dtype), mcclOpName(redop), post ? " (postOp)" : "", (long long)bad, count,
                       (unsigned long long)x, (unsigned long long)y, (unsigned long long)w, (unsigned long long)g);
      }
    }
  }
  cudaSetDevice(0);
  cudaFree(srcA);
  cudaSetDevice(1);
  cudaFree(srcB);
  cudaFree(dst);
  free(a);
  free(b);
  free(got);
  free(want);
  EXPECT_OK(linkClose(&l));
}

static void reduceTypesSimple(void) {
  reduceTypes(MCCL_PROTO_SIMPLE);
}
static void reduceTypesLL(void) {
  reduceTypes(MCCL_PROTO_LL);
}
static void reduceTypesLL128(void) {
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no P2P");
  reduceTypes(MCCL_PROTO_LL128);
}

// ---- 3b. buffers that start anywhere --------------------------------------------------------------
// A user buffer may start at any byte (a view into a tensor), and the sender's, the receiver's input and
// its output each at another: the copy loop splits off an unaligned head and tail and moves the rest in
// 16-byte packs, or in packs of one element where the pointers disagree; LL and LL128 take their misaligned
// pieces in aligned parts. A
// send into a recvReduceCopy (the sum), on every protocol: bytes with the source at every offset 0..15 and
// the receiver's input and output at others (out of place) or one buffer (in place); bfloat16 and float64
// at whole-element offsets. Sizes end mid-pack and mid-line; every byte outside the output stays as it was.
typedef struct {
  int dtype;
  int srcOff, inOff, dstOff, inPlace;  // bytes past a 16-byte boundary; in place: inOff = dstOff, one buffer
} offsetCase;

static void offsetsRun(ptLink* l, int proto, const offsetCase* oc, size_t count, void* srcA, void* bufB, void* bufD,
                       size_t cap, unsigned char* a, unsigned char* b, unsigned char* want, unsigned char* got) {
  const size_t es = mcclTypeSize(oc->dtype), bytes = count * es;
  fillType(oc->dtype, a, count);
  fillType(oc->dtype, b, count);
  refReduce(oc->dtype, mcclSum, 0, 0, b, a, want, count);
  EXPECT_CUDA_OK(cudaSetDevice(0));
  EXPECT_CUDA_OK(mcclTestCopyToDevice((char*)srcA + oc->srcOff, a, bytes));
  EXPECT_CUDA_OK(cudaSetDevice(1));
  EXPECT_CUDA_OK(mcclTestMemset(bufD, PT_POISON, cap));
  void* in = oc->inPlace ? (char*)bufD + oc->dstOff : (char*)bufB + oc->inOff;
  EXPECT_CUDA_OK(mcclTestCopyToDevice(in, b, bytes));
  struct mcclDevWork r = ptWork(mcclDevOpRecvReduceCopy, proto, oc->dtype, mcclSum, count, l->nch);
  r.src = in;
  EXPECT_OK(linkMove(l, proto, oc->dtype, count, (char*)srcA + oc->srcOff, (char*)bufD + oc->dstOff, &r, 0));
  EXPECT_EQ(*l->rcv.statusH, mcclDevStatusDone);
  EXPECT_CUDA_OK(cudaSetDevice(1));
  EXPECT_CUDA_OK(cudaMemcpy(got, bufD, cap, cudaMemcpyDeviceToHost));
  const int64_t bad = firstOutOfBound(oc->dtype, got + oc->dstOff, want, count);
  if (bad >= 0)
    mcclTestFailAt(__FILE__, __LINE__, "%s %s, src +%d, input +%d, output +%d%s, %zu elements: element %lld is wrong",
                   mcclProtoName(proto), mcclTypeName(oc->dtype), oc->srcOff, oc->inOff, oc->dstOff,
                   oc->inPlace ? " (in place)" : "", count, (long long)bad);
  for (size_t i = 0; i < cap && bad < 0; i++)
    if ((i < (size_t)oc->dstOff || i >= oc->dstOff + bytes) && got[i] != PT_POISON) {
      mcclTestFailAt(__FILE__, __LINE__,
                     "%s %s, src +%d, output +%d%s, %zu elements: byte %zu outside the output written",
                     mcclProtoName(proto), mcclTypeName(oc->dtype), oc->srcOff, oc->dstOff,
                     oc->inPlace ? " (in place)" : "", count, i);
      break;
    }
}

static void offsets(int proto) {
  if (mcclTestDeviceCount() < 2) SKIP("needs 2 devices");
  if (proto == MCCL_PROTO_LL128 && !mcclCuMemEnable()) SKIP("cuMem not supported: no P2P");
  const size_t bytesMax = 4099, cap = bytesMax + 32;
  ptLink l;
  EXPECT_OK(linkOpen(&l, 0, 1, 2, mcclCuMemEnable() ? mcclDevTransportP2p : mcclDevTransportShm, 0));
  unsigned char *a = malloc(cap), *b = malloc(cap), *want = malloc(cap), *got = malloc(cap);
  EXPECT_TRUE(a && b && want && got);
  void *srcA = NULL, *bufB = NULL, *bufD = NULL;
  EXPECT_CUDA_OK(cudaSetDevice(0));
  EXPECT_CUDA_OK(cudaMalloc(&srcA, cap));
  EXPECT_CUDA_OK(cudaSetDevice(1));
  EXPECT_CUDA_OK(cudaMalloc(&bufB, cap));
  EXPECT_CUDA_OK(cudaMalloc(&bufD, cap));
  // Bytes: every source offset, in place and out of place. The wider types: every whole-element offset.
  const int dtypes[] = {mcclUint8, mcclBfloat16, mcclFloat64};
  for (size_t t = 0; t < sizeof(dtypes) / sizeof(dtypes[0]) && !mcclTestStopped(); t++) {
    const int es = (int)mcclTypeSize(dtypes[t]);
    for (int so = 0; so < 16 && !mcclTestStopped(); so += es) {
      for (int inPlace = 0; inPlace < 2 && !mcclTestStopped(); inPlace++) {
        if (es == 2 && inPlace != ((so / 2) & 1)) continue;  // bfloat16: each offset once, the two forms in turn
        offsetCase oc = {dtypes[t], so, (so * 5 + 1) % 16 / es * es, (so * 7 + 3) % 16 / es * es, inPlace};
        if (inPlace) oc.inOff = oc.dstOff;
        // Four sizes in turn, each past a warp's LL128 slice (1920 bytes) and ending mid-pack, the last
        // slice's data ending in its first (twice), second or third group of stores; for bytes, every offset
        // 0..15 comes at each of the three buffers.
        const size_t sizes[] = {1929, 2587, 3121, bytesMax};
        size_t count = sizes[(so / es) % 4] / (size_t)es;
        if (count * es % 16 == 0) count--;
        offsetsRun(&l, proto, &oc, count, srcA, bufB, bufD, cap, a, b, want, got);
      }
    }
  }
  cudaSetDevice(0);
  cudaFree(srcA);
  cudaSetDevice(1);
  cudaFree(bufB);
  cudaFree(bufD);
  free(a);
  free(b);
  free(want);
  free(got);
  EXPECT_OK(linkClose(&l));
}
static void offsetsSimple(void) {
  offsets(MCCL_PROTO_SIMPLE);
}
static void offsetsLL(void) {
  offsets(MCCL_PROTO_LL);
}
static void offsetsLL128(void) {
  offsets(MCCL_PROTO_LL128);
}

// A self-check of the reference's conversions (so a wrong reference cannot hide a wrong kernel).
static void referenceConversions(void) {
  uint16_t h[1];
  uint8_t b[1];
  const struct {
    mcclDataType_t t;
    double v;
    uint32_t bits;
  } cases[] = {
      {mcclFloat16, 1.0, 0x3c00},
      {mcclFloat16, -2.5, 0xc100},
      {mcclFloat16, 65504.0, 0x7bff},
      {mcclFloat16, 65520.0, 0x7c00},                 // rounds to infinity
      {mcclFloat16, 1.0 + 1.0 / 2048, 0x3c00},        // a tie: to even
      {mcclFloat16, 1.0 + 3.0 / 2048, 0x3c02},        // a tie: to even (up)
      {mcclFloat16, 5.9604644775390625e-08, 0x0001},  // 2^-24, the smallest subnormal
      {mcclBfloat16, 1.0, 0x3f80},
      {mcclBfloat16, 1.0 + 1.0 / 256, 0x3f80},  // tie to even
      {mcclBfloat16, 1.0 + 3.0 / 256, 0x3f82},
      {mcclBfloat16, -2.5, 0xc020},
      {mcclFloat8e4m3, 1.0, 0x38},
      {mcclFloat8e4m3, 448.0, 0x7e},
      {mcclFloat8e4m3, 1000.0, 0x7e},     // saturates (NCCL's __NV_SATFINITE)
      {mcclFloat8e4m3, -0.015625, 0x88},  // 2^-6: the smallest normal, negative
      {mcclFloat8e5m2, 1.0, 0x3c},
      {mcclFloat8e5m2, 57344.0, 0x7b},
      {mcclFloat8e5m2, 1e6, 0x7b},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    if (mcclTypeSize(cases[i].t) == 2) {
      mcclEltSet(cases[i].t, h, 0, cases[i].v);
      EXPECT_EQ(h[0], cases[i].bits);
    } else {
      mcclEltSet(cases[i].t, b, 0, cases[i].v);
      EXPECT_EQ(b[0], cases[i].bits);
    }
  }
  h[0] = 0x0001;
  EXPECT_TRUE(mcclEltGet(mcclFloat16, h, 0) == 5.9604644775390625e-08);
  for (int t = 0; t < mcclNumTypes; t++) {
    if (!mcclEltIsFloat((mcclDataType_t)t) || t == mcclFloat32 || t == mcclFloat64) continue;
    for (int k = -8; k <= 8; k++) {
      uint8_t buf[2];
      mcclEltSet((mcclDataType_t)t, buf, 0, (double)k / 4);
      EXPECT_TRUE(mcclEltGet((mcclDataType_t)t, buf, 0) == (double)k / 4);
    }
  }
}

// ---- 4. step counters that wrap ----------------------------------------------------------------
// Connections that start 5 steps before 2^64: messages of both protocols (one after the other on
// the same connections, as NCCL picks a protocol per operation) carry the counters across the wrap;
// every byte arrives and both ends' steps are where the chunk arithmetic puts them.
static void stepsWrap(mcclDevTransport_t which) {
  int n = mcclTestDeviceCount();
  if (n < 2) SKIP("needs 2 devices");
  if (which == mcclDevTransportP2p && !mcclCuMemEnable()) SKIP("cuMem not supported: no P2P");
  const int nch = 2;
  const uint64_t first = UINT64_MAX - 5;
  struct {
    int proto;
    size_t bytes;
  } msgs[] = {{MCCL_PROTO_LL, 1},           {MCCL_PROTO_LL, 100003},      {MCCL_PROTO_LL, 300007},
              {MCCL_PROTO_SIMPLE, 17},      {MCCL_PROTO_SIMPLE, 5000011}, {MCCL_PROTO_LL, 70001},
              {MCCL_PROTO_SIMPLE, 1234567}, {MCCL_PROTO_LL, 33}};
  const int nmsgs = (int)(sizeof(msgs) / sizeof(msgs[0]));
  // Over P2P, every other LL message goes as LL128 (SHM has no LL128 FIFO).
  if (which == mcclDevTransportP2p)
    for (int k = 1; k < nmsgs; k += 3)
      if (msgs[k].proto == MCCL_PROTO_LL) msgs[k].proto = MCCL_PROTO_LL128;
  for (int lead = 0; lead < 2 && !mcclTestStopped(); lead++) {
    // lead 0: LL crosses the wrap first; lead 1: SIMPLE does (the list rotated to its SIMPLE messages).
    ptLink l;
    EXPECT_OK(linkOpen(&l, 0, 1, nch, which, first));
    size_t cap = 5000011;
    unsigned char *want = malloc(cap), *got = malloc(cap);
    void *src = NULL, *dst = NULL;
    EXPECT_TRUE(want && got);
    EXPECT_CUDA_OK(cudaSetDevice(0));
    EXPECT_CUDA_OK(cudaMalloc(&src, cap));
    EXPECT_CUDA_OK(cudaSetDevice(1));
    EXPECT_CUDA_OK(cudaMalloc(&dst, cap));
    uint64_t steps[2] = {first, first};
    int wrapped = 0;
    for (int k = 0; k < nmsgs && !mcclTestStopped(); k++) {
      int m = lead == 0 ? k : (k + 3) % nmsgs;
      size_t nb = msgs[m].bytes;
      int proto = msgs[m].proto;
      ptFill(want, nb, mcclTestRand());
      EXPECT_CUDA_OK(cudaSetDevice(0));
      EXPECT_CUDA_OK(mcclTestCopyToDevice(src, want, nb));
      EXPECT_CUDA_OK(cudaSetDevice(1));
      EXPECT_CUDA_OK(mcclTestMemset(dst, PT_POISON, nb));
      EXPECT_OK(linkMove(&l, proto, mcclUint8, nb, src, dst, NULL, 0));
      EXPECT_CUDA_OK(cudaMemcpy(got, dst, nb, cudaMemcpyDeviceToHost));
      size_t nbad = 0;
      int64_t bad = ptCompare(got, want, nb, &nbad);
      if (bad >= 0)
        mcclTestFailAt(__FILE__, __LINE__, "message %d (%s, %zu bytes) from step %llu: %zu bytes differ, first at %lld",
                       m, mcclProtoName(proto), nb, (unsigned long long)steps[0], nbad, (long long)bad);
      for (int c = 0; c < nch; c++) {
        uint64_t next =
            ptStepAfter(steps[c], proto, &l.pair->ends[0].send[c].conn, nb, nch, c, MCCL_DEV_DEFAULT_CHUNKSTEPS);
        if (next < steps[c]) wrapped = 1;
        steps[c] = next;
      }
      if (!mcclTestStopped() && !linkStepsAre(&l, steps))
        mcclTestFailAt(__FILE__, __LINE__, "message %d: steps (see stderr)", m);
    }
    cudaSetDevice(0);
    cudaFree(src);
    cudaSetDevice(1);
    cudaFree(dst);
    free(want);
    free(got);
    EXPECT_OK(linkClose(&l));
    EXPECT_TRUE(wrapped);
    EXPECT_TRUE(steps[0] < 1000 && steps[1] < 1000);  // well past the wrap, not stuck before it
  }
}

static void stepsWrapShm(void) {
  stepsWrap(mcclDevTransportShm);
}
static void stepsWrapP2p(void) {
  stepsWrap(mcclDevTransportP2p);
}

// ---- 5. abort while a kernel spins, and mcclDevWait's timeout -----------------------------------
// The CUDA driver and the sim open fds and maps of their own at first use: take baselines after.
static void warmUp(void) {
  void* p = NULL;
  if (mcclCuMemAlloc(&p, NULL, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1) == mcclSuccess) mcclCuMemFree(p);
  ptLink l;
  if (linkOpen(&l, 0, 1, 1, mcclDevTransportShm, 0) == mcclSuccess) {
    struct mcclDevWork w = ptWork(mcclDevOpRecv, MCCL_PROTO_LL, mcclUint8, mcclSum, 0, 1);
    w.recvConns = l.recvConns;
    if (ptLaunch(&l.rcv, &w, l.abortD, ptThreads()) == mcclSuccess) ptWait(&l.rcv, l.abortH, PT_LOST_MS);
  }
  linkClose(&l);
}

// Abort bound: a waiter reads the flag once every MCCL_SPINS_BEFORE_CHECK_ABORT spins; on the GPU
// that is microseconds, and the test allows 10 ms from the store to the kernel being done. On the sim
// every spin is a sched_yield on 2 shared cores: 2 s where one thread per block spins (SIMPLE: the
// WaitRecv or WaitSend thread; an LL sender's WaitSend thread). An LL receiver has every thread spin
// on its own line, each counting its own 10000 spins (2 blocks x 64 threads x 10000 yields): seconds
// on a loaded machine, so 10 s there. An LL128 receiver's warps spin too, meeting at a warp vote each round.
static int64_t abortBoundUs(int proto, int allThreadsSpin) {
  if (!PT_ON_SIM) return 10000;
  return proto != MCCL_PROTO_SIMPLE && allThreadsSpin ? 10000000 : 2000000;
}

// One kernel spins forever: a receiver with no sender, or a sender with more than the FIFO holds
// and no receiver. Set the abort flag, time the kernel's exit, then free everything: fds, maps and
// the /dev/shm files the connections used are gone (prims_test_util.h says why not a directory count).
static void abortSpinning(mcclDevTransport_t which) {
  int n = mcclTestDeviceCount();
  if (n < 2) SKIP("needs 2 devices");
  if (which == mcclDevTransportP2p && !mcclCuMemEnable()) SKIP("cuMem not supported: no P2P");
  warmUp();
  int fds0 = mcclTestCountFds();
  long maps0 = mcclTestCountMaps("minccl-sim"), shmMaps0 = mcclTestCountMaps("/dev/shm");
  ptShmSet shm = {0};
  // Small LL128 slots (one warp slice each), so a sender reaches its credit wait after a few stores, not
  // after filling eight default slots (seconds of warp barriers on a loaded sim under TSan).
  setenv("MCCL_LL128_BUFFSIZE", "16384", 1);
  mcclParamResetAll();
  for (int proto = 0; proto < MCCL_NUM_PROTOCOLS; proto++) {
    if (proto == MCCL_PROTO_LL128 && which != mcclDevTransportP2p) continue;  // ll128WithoutNvlinkAborts
    for (int sender = 0; sender < 2; sender++) {
      ptLink l;
      EXPECT_OK(linkOpen(&l, 0, 1, 2, which, 0));
      ptShmRecord(&shm);
      // More than MCCL_STEPS slots of the protocol: a sender blocks on the credit.
      const struct mcclConnInfo* c0 = &l.pair->ends[0].send[0].conn;
      const int slot = proto == MCCL_PROTO_LL      ? c0->llStepSize
                       : proto == MCCL_PROTO_LL128 ? c0->ll128StepSize
                                                   : c0->stepSize;
      size_t bytes = 3 * (size_t)MCCL_STEPS * (size_t)slot;
      ptLauncher* me = sender ? &l.snd : &l.rcv;
      void* buf = NULL;
      EXPECT_CUDA_OK(cudaSetDevice(me->dev));
      EXPECT_CUDA_OK(cudaMalloc(&buf, bytes));
      struct mcclDevWork w = ptWork(sender ? mcclDevOpSend : mcclDevOpRecv, proto, mcclUint8, mcclSum, bytes, 2);
      if (sender) {
        w.src = buf;
        w.sendConns = l.sendConns;
      } else {
        w.dst = buf;
        w.recvConns = l.recvConns;
      }
      EXPECT_OK(ptLaunch(me, &w, l.abortD, ptThreads()));
      usleep(50 * 1000);  // let it reach its spin loop
      cudaError_t running = cudaStreamQuery(me->stream);
      int statusBefore = *me->statusH;
      int64_t t0 = (int64_t)mcclClockUs();
      __atomic_store_n(l.abortH, 1, __ATOMIC_RELEASE);
      mcclResult_t r = ptWait(me, NULL, 0);
      int64_t us = (int64_t)mcclClockUs() - t0;
      EXPECT_CUDA(running, cudaErrorNotReady);  // it was still spinning when the flag went up
      EXPECT_EQ(statusBefore, mcclDevStatusRunning);
      printf("#   %s %s %s: aborted after %.3f ms\n", which == mcclDevTransportP2p ? "P2P" : "SHM",
             mcclProtoName(proto), sender ? "sender" : "receiver", us / 1000.0);
      EXPECT_RES(r, mcclInternalError);
      EXPECT_EQ(*me->statusH, mcclDevStatusAborted);
      EXPECT_LE(us, abortBoundUs(proto, !sender));
      EXPECT_CUDA_OK(cudaFree(buf));
      EXPECT_OK(linkClose(&l));
    }
  }
  unsetenv("MCCL_LL128_BUFFSIZE");
  mcclParamResetAll();
  EXPECT_EQ(mcclTestCountFds(), fds0);
  const char* left = NULL;
  if (ptShmLeft(&shm, NULL, &left) != 0) mcclTestFailAt(__FILE__, __LINE__, "%s is still in /dev/shm", left);
  CHECK_STOPPED();
  if (which == mcclDevTransportShm) EXPECT_GT(shm.n, 0);  // the check saw the SHM connections' files
  if (!MCCL_TEST_SANITIZER_MAPS) EXPECT_EQ(mcclTestCountMaps("minccl-sim"), maps0);
  EXPECT_EQ(mcclTestCountMaps("/dev/shm"), shmMaps0);
}

static void abortSpinningShm(void) {
  abortSpinning(mcclDevTransportShm);
}
static void abortSpinningP2p(void) {
  abortSpinning(mcclDevTransportP2p);
}

// mcclDevWait's own deadline: a receiver that waits for nobody is aborted by the wait itself after
// timeoutMs, which returns mcclTimeout (not the mcclInternalError of someone else's abort).
static void waitTimesOut(void) {
  int n = mcclTestDeviceCount();
  if (n < 2) SKIP("needs 2 devices");
  for (int proto = 0; proto < MCCL_NUM_PROTOCOLS; proto++) {
    if (proto == MCCL_PROTO_LL128 && !mcclCuMemEnable()) continue;  // LL128 needs P2P
    ptLink l;
    EXPECT_OK(linkOpen(&l, 0, 1, 1, proto == MCCL_PROTO_LL128 ? mcclDevTransportP2p : mcclDevTransportAuto, 0));
    void* buf = NULL;
    EXPECT_CUDA_OK(cudaSetDevice(1));
    EXPECT_CUDA_OK(cudaMalloc(&buf, 4096));
    struct mcclDevWork w = ptWork(mcclDevOpRecv, proto, mcclFloat32, mcclSum, 1000, 1);
    w.dst = buf;
    w.recvConns = l.recvConns;
    EXPECT_OK(ptLaunch(&l.rcv, &w, l.abortD, ptThreads()));
    const int64_t timeoutMs = 200;
    int64_t t0 = (int64_t)mcclClockUs();
    EXPECT_RES(ptWait(&l.rcv, l.abortH, timeoutMs), mcclTimeout);
    int64_t us = (int64_t)mcclClockUs() - t0;
    printf("#   %s: mcclDevWait gave up after %.1f ms (timeout %lld ms)\n", mcclProtoName(proto), us / 1000.0,
           (long long)timeoutMs);
    EXPECT_GE(us, timeoutMs * 1000);
    EXPECT_LE(us, timeoutMs * 1000 + abortBoundUs(proto, 1) + (PT_ON_SIM ? 0 : 5000));
    EXPECT_EQ(*l.abortH, 1u);  // the wait set the flag
    EXPECT_EQ(*l.rcv.statusH, mcclDevStatusAborted);
    EXPECT_CUDA_OK(cudaStreamQuery(l.rcv.stream));
    EXPECT_CUDA_OK(cudaFree(buf));
    EXPECT_OK(linkClose(&l));
  }
}

// ---- 7. bad work descriptions ----------------------------------------------------------------------
// Each is a valid receive with one thing wrong. "Launches nothing" is checked where it can be seen:
// the abort flag is already set, so a receive that did run would leave at once and mark the status
// word aborted; it stays as the host set it, and the stream is idle and still usable afterwards.
static void launchBadInput(void) {
  int n = mcclTestDeviceCount();
  if (n < 1) SKIP("no CUDA device");
  struct mcclDevPair* p = NULL;
  EXPECT_OK(mcclDevPairLocalCreate(0, 0, 1, MCCL_DEVPAIR_SEND, mcclDevTransportAuto, 0, &p));
  EXPECT_CUDA_OK(cudaSetDevice(0));
  struct mcclConnInfo *rc = NULL, *sc = NULL;
  EXPECT_OK(mcclDevConnCreate(p->ends[1].recv, 1, &rc));
  EXPECT_OK(mcclDevConnCreate(p->ends[0].send, 1, &sc));
  ptLauncher l;
  EXPECT_OK(ptLauncherInit(&l, 0));
  volatile uint32_t* abortH = NULL;
  uint32_t* abortD = NULL;
  EXPECT_OK(mcclDevAbortFlagCreate(&abortH, &abortD));
  *abortH = 1;
  void *src = NULL, *dst = NULL;
  EXPECT_CUDA_OK(cudaMalloc(&src, 4096));
  EXPECT_CUDA_OK(cudaMalloc(&dst, 4096));
  struct mcclDevWork good = ptWork(mcclDevOpRecv, MCCL_PROTO_SIMPLE, mcclFloat32, mcclSum, 1000, 1);
  good.dst = dst;
  good.src = src;
  good.recvConns = rc;
  good.abortFlag = abortD;
  good.status = l.statusD;
  const int T = 64;  // a valid thread count
  struct {
    const char* what;
    struct mcclDevWork w;
    int nthreads;
  } bad[40];
  int nbad = 0;
#define BAD(desc, field, value, threads) \
  do {                                   \
    bad[nbad].what = desc;               \
    bad[nbad].w = good;                  \
    bad[nbad].w.field = value;           \
    bad[nbad].nthreads = threads;        \
    nbad++;                              \
  } while (0)
  BAD("op -1", op, -1, T);
  BAD("op past the last", op, mcclDevOpNum, T);
  BAD("proto -1", proto, -1, T);
  BAD("proto 3 (past LL128 and SIMPLE)", proto, MCCL_NUM_PROTOCOLS, T);
  BAD("dtype -1", dtype, -1, T);
  BAD("dtype past the last", dtype, mcclNumTypes, T);
  BAD("redop -1", redop, -1, T);
  BAD("redop past the last", redop, mcclNumOps, T);
  BAD("nchannels 0", nchannels, 0, T);
  BAD("nchannels -1", nchannels, -1, T);
  BAD("nchannels 65", nchannels, MCCL_DEV_MAX_CHANNELS + 1, T);
  BAD("count too large", count, (size_t)INT64_MAX, T);
  BAD("recv without recvConns", recvConns, NULL, T);
  BAD("recv without dst", dst, NULL, T);
  BAD("postOp on recv", postOp, 1, T);
  BAD("chunkSteps 3", chunkSteps, 3, T);
  BAD("chunkSteps 16 (> MCCL_STEPS)", chunkSteps, 2 * MCCL_STEPS, T);
  BAD("chunkSteps -4", chunkSteps, -4, T);
  BAD("sliceSteps 3", sliceSteps, 3, T);
  BAD("sliceSteps 8 > default chunkSteps 4", sliceSteps, 8, T);
  BAD("nthreads 33", op, mcclDevOpRecv, 33);
  BAD("nthreads 16", op, mcclDevOpRecv, 16);
  BAD("nthreads 1056", op, mcclDevOpRecv, MCCL_DEV_MAX_THREADS + 32);
  BAD("nthreads -64", op, mcclDevOpRecv, -64);
  // Other ops, each missing what it needs.
  struct mcclDevWork s = good;
  s.op = mcclDevOpSend;
  s.sendConns = sc;
  s.recvConns = NULL;
  BAD("send without sendConns", op, mcclDevOpSend, T);  // good has no sendConns
  bad[nbad - 1].w.recvConns = NULL;
  BAD("send without src", op, mcclDevOpSend, T);
  bad[nbad - 1].w = s;
  bad[nbad - 1].w.src = NULL;
  BAD("postOp on send", op, mcclDevOpSend, T);
  bad[nbad - 1].w = s;
  bad[nbad - 1].w.postOp = 1;
  BAD("postOp on copySend", op, mcclDevOpCopySend, T);
  bad[nbad - 1].w = s;
  bad[nbad - 1].w.op = mcclDevOpCopySend;
  bad[nbad - 1].w.postOp = 1;
  BAD("postOp on recvReduceSend (stores no output)", op, mcclDevOpRecvReduceSend, T);
  bad[nbad - 1].w = s;
  bad[nbad - 1].w.op = mcclDevOpRecvReduceSend;
  bad[nbad - 1].w.recvConns = good.recvConns;
  bad[nbad - 1].w.postOp = 1;
  BAD("copySend without dst", op, mcclDevOpCopySend, T);
  bad[nbad - 1].w = s;
  bad[nbad - 1].w.op = mcclDevOpCopySend;
  bad[nbad - 1].w.dst = NULL;
  BAD("postOp on recvCopySend", op, mcclDevOpRecvCopySend, T);
  bad[nbad - 1].w.sendConns = sc;
  bad[nbad - 1].w.postOp = 1;
  BAD("recvCopySend without sendConns", op, mcclDevOpRecvCopySend, T);
  BAD("recvReduceCopy without src", op, mcclDevOpRecvReduceCopy, T);
  bad[nbad - 1].w.src = NULL;
  BAD("recvReduceSend without sendConns", op, mcclDevOpRecvReduceSend, T);
  BAD("recvReduceCopySend without recvConns", op, mcclDevOpRecvReduceCopySend, T);
  bad[nbad - 1].w.sendConns = sc;
  bad[nbad - 1].w.recvConns = NULL;
  BAD("avg with redOpArg 0", op, mcclDevOpRecvReduceCopy, T);
  bad[nbad - 1].w.redop = mcclAvg;
  bad[nbad - 1].w.redOpArg = 0;
#undef BAD
  EXPECT_RES(mcclDevLaunch(NULL, T, l.stream), mcclInvalidArgument);
  // The kernel-function cache every launch uses.
  cudaFunction_t fn = NULL;
  EXPECT_RES(mcclDevGetFunction(0, NULL, &fn), mcclInvalidArgument);
  EXPECT_RES(mcclDevGetFunction(0, (const void*)launchBadInput, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclDevGetFunction(-1, (const void*)launchBadInput, &fn), mcclInvalidUsage);
  EXPECT_RES(mcclDevGetFunction(64, (const void*)launchBadInput, &fn), mcclInvalidUsage);
  EXPECT_TRUE(fn == NULL);
  // The dependent launch (lab 07's): refused before the driver sees it (so a stand-in function will do).
  uint64_t someArgs[2] = {0, 0};
  cudaFunction_t standIn = (cudaFunction_t)(uintptr_t)1;
  EXPECT_RES(mcclDevLaunchDependent(NULL, 1, 32, l.stream, someArgs, 16), mcclInvalidArgument);
  EXPECT_RES(mcclDevLaunchDependent(standIn, 1, 32, l.stream, NULL, 16), mcclInvalidArgument);
  EXPECT_RES(mcclDevLaunchDependent(standIn, 0, 32, l.stream, someArgs, 16), mcclInvalidArgument);
  EXPECT_RES(mcclDevLaunchDependent(standIn, 1, 0, l.stream, someArgs, 16), mcclInvalidArgument);
  EXPECT_RES(mcclDevLaunchDependent(standIn, 1, 1025, l.stream, someArgs, 16), mcclInvalidArgument);
  EXPECT_RES(mcclDevLaunchDependent(standIn, 1, 32, l.stream, someArgs, 0), mcclInvalidArgument);
  EXPECT_RES(mcclDevLaunchDependent(standIn, 1, 32, l.stream, someArgs, 6), mcclInvalidArgument);
  for (int i = 0; i < nbad; i++) {
    *(volatile int*)l.statusH = 77;
    mcclResult_t r = mcclDevLaunch(&bad[i].w, bad[i].nthreads, l.stream);
    if (r != mcclInvalidArgument) {
      mcclTestFailAt(__FILE__, __LINE__, "%s: expected mcclInvalidArgument, got %d (%s)", bad[i].what, r,
                     mcclGetErrorString(r));
      break;
    }
  }
  CHECK_STOPPED();
  EXPECT_CUDA_OK(cudaStreamSynchronize(l.stream));
  EXPECT_EQ(*l.statusH, 77);
  EXPECT_CUDA_OK(cudaGetLastError());
  // The edges that are valid: nthreads 0 (the default) and 32, 1024; count 0 without buffers; a
  // chunking of 8 x 8 and 1 x 1. The abort flag is down now and nobody sends: the receives with
  // data would spin, so they are launched with count 0 and return at once.
  *abortH = 0;
  struct mcclDevWork ok = good;
  ok.count = 0;
  ok.dst = NULL;
  ok.src = NULL;
  int threads[] = {0, 32, MCCL_DEV_MAX_THREADS};
  for (int i = 0; i < 3; i++) EXPECT_OK(ptLaunch(&l, &ok, abortD, threads[i]));
  ok.chunkSteps = MCCL_STEPS;
  ok.sliceSteps = MCCL_STEPS;
  EXPECT_OK(ptLaunch(&l, &ok, abortD, T));
  ok.chunkSteps = 1;
  ok.sliceSteps = 0;  // default: min(chunkSteps, 2)
  EXPECT_OK(ptLaunch(&l, &ok, abortD, T));
  EXPECT_OK(ptWait(&l, abortH, PT_LOST_MS));
  EXPECT_EQ(*l.statusH, mcclDevStatusDone);
  EXPECT_CUDA_OK(cudaFree(src));
  EXPECT_CUDA_OK(cudaFree(dst));
  EXPECT_OK(mcclDevAbortFlagFree(abortH));
  ptLauncherFree(&l);
  EXPECT_OK(mcclDevConnFree(rc));
  EXPECT_OK(mcclDevConnFree(sc));
  EXPECT_OK(mcclDevPairLocalFree(p));
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(moveShmSimple), MCCL_TEST_CASE(moveShmLL), MCCL_TEST_CASE(moveP2pSimple),
               MCCL_TEST_CASE(moveP2pLL), MCCL_TEST_CASE(moveP2pLL128), MCCL_TEST_CASE(offsetsSimple),
               MCCL_TEST_CASE(offsetsLL), MCCL_TEST_CASE(offsetsLL128), MCCL_TEST_CASE(ll128WithoutNvlinkAborts),
               MCCL_TEST_CASE(chainSimple), MCCL_TEST_CASE(chainLL), MCCL_TEST_CASE(referenceConversions),
               MCCL_TEST_CASE(reduceTypesSimple), MCCL_TEST_CASE(reduceTypesLL), MCCL_TEST_CASE(reduceTypesLL128),
               MCCL_TEST_CASE(stepsWrapShm), MCCL_TEST_CASE(stepsWrapP2p), MCCL_TEST_CASE(abortSpinningShm),
               MCCL_TEST_CASE(abortSpinningP2p), MCCL_TEST_CASE(waitTimesOut), MCCL_TEST_CASE(launchBadInput))
