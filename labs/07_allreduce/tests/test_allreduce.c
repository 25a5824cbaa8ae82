// Lab 07 allreduce in one process driving up to 4 devices (mcclLabCommInitAll; 4 on sim, the GPUs
// present on a GPU host), checked against the CPU reference of ar_test_util.h: every path (ring
// SIMPLE, ring LL, one-shot with LL, two-shot; one-shot with SIMPLE where there are 2 ranks, and on
// 2 of the devices in a test of its own), every dtype x op, in place and out of place, awkward counts,
// one-shot's split over blocks, 1000 back-to-back calls with changing sizes and paths, a CUDA graph
// replayed 100 times (GPU only), and an abort while a kernel waits for a peer that never calls.
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "ar_test_util.h"
#include "mccl_alloc.h"
#include "mccl_test.h"

#define MAXDEV 4

static int nRanksHere(void) {
  return mcclTestDeviceCount() < MAXDEV ? mcclTestDeviceCount() : MAXDEV;
}

// The driver opens fds and starts threads of its own the first time: count from after.
static void warmUp(int n) {
  for (int d = 0; d < n; d++) {
    cudaSetDevice(d);
    void* p = NULL;
    if (mcclMemAlloc(&p, 1) == mcclSuccess) mcclMemFree(p);
  }
  cudaSetDevice(0);
}

struct arRank {
  mcclLabComm* comm;
  void *send, *recv;  // device, `bytes` each, both registered windows
  mcclLabWindow *sendWin, *recvWin;
  cudaStream_t stream;
  mcclResult_t res;
};
struct arSet {
  int n;
  size_t bytes;
  struct arRank r[MAXDEV];
  void* host;  // bytes of host staging
};

static size_t regBytes;
static void* registerBoth(void* p) {
  struct arRank* a = (struct arRank*)p;
  cudaSetDevice(a->comm->cudaDev);
  a->res = mcclLabWindowRegister(a->comm, a->send, regBytes, &a->sendWin);
  if (a->res == mcclSuccess) a->res = mcclLabWindowRegister(a->comm, a->recv, regBytes, &a->recvWin);
  return NULL;
}

// n communicators (devices 0..n-1), each with a send and a recv buffer of `bytes` registered as
// windows (collective: one thread per rank) and a stream.
static void setUp(struct arSet* s, int n, int nChannels, size_t bytes) {
  memset(s, 0, sizeof(*s));
  s->n = n;
  s->bytes = bytes;
  mcclLabComm* comms[MAXDEV] = {NULL};
  EXPECT_OK(mcclLabCommInitAll(comms, n, NULL, nChannels, mcclLocalTransports));
  for (int i = 0; i < n; i++) {
    struct arRank* r = &s->r[i];
    r->comm = comms[i];
    EXPECT_CUDA_OK(cudaSetDevice(r->comm->cudaDev));
    EXPECT_OK(mcclMemAlloc(&r->send, bytes));
    EXPECT_OK(mcclMemAlloc(&r->recv, bytes));
    EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking));
  }
  pthread_t th[MAXDEV];
  regBytes = bytes;
  for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, registerBoth, &s->r[i]);
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < n; i++) EXPECT_OK(s->r[i].res);
  s->host = malloc(bytes);
  EXPECT_TRUE(s->host != NULL);
}

static void tearDown(struct arSet* s) {
  for (int i = 0; i < s->n; i++) {
    struct arRank* r = &s->r[i];
    if (r->comm == NULL) continue;
    cudaSetDevice(r->comm->cudaDev);
    if (r->stream) EXPECT_CUDA_OK(cudaStreamDestroy(r->stream));
    if (r->sendWin) EXPECT_OK(mcclLabWindowDeregister(r->comm, r->sendWin));
    if (r->recvWin) EXPECT_OK(mcclLabWindowDeregister(r->comm, r->recvWin));
    if (r->send) EXPECT_OK(mcclMemFree(r->send));
    if (r->recv) EXPECT_OK(mcclMemFree(r->recv));
  }
  for (int i = 0; i < s->n; i++) EXPECT_OK(mcclLabCommDestroy(s->r[i].comm));
  free(s->host);
  memset(s, 0, sizeof(*s));
}

static const char* dtName(mcclDataType_t t) {
  return mcclTypeName(t);
}

// Input of every rank for one call at element offset `slot` of its buffers (in place: the recv
// buffer), the output poisoned (0xa5) so an element the kernel misses shows.
static void fillInputs(struct arSet* s, mcclDataType_t t, mcclRedOp_t op, size_t count, size_t slot, int inPlace,
                       uint64_t seed) {
  size_t es = mcclTypeSize(t), bytes = count * es;
  for (int i = 0; i < s->n; i++) {
    struct arRank* r = &s->r[i];
    EXPECT_CUDA_OK(cudaSetDevice(r->comm->cudaDev));
    if (!inPlace) {
      memset(s->host, 0xa5, bytes);
      EXPECT_CUDA_OK(mcclTestCopyToDevice((char*)r->recv + slot * es, s->host, bytes));
    }
    arFill(s->host, t, op, count, r->comm->rank, seed);
    EXPECT_CUDA_OK(mcclTestCopyToDevice((char*)(inPlace ? r->recv : r->send) + slot * es, s->host, bytes));
  }
}

static void launchAll(struct arSet* s, mcclDataType_t t, mcclRedOp_t op, size_t count, size_t slot, int inPlace) {
  size_t es = mcclTypeSize(t);
  for (int i = 0; i < s->n; i++) {
    struct arRank* r = &s->r[i];
    EXPECT_CUDA_OK(cudaSetDevice(r->comm->cudaDev));
    void* out = (char*)r->recv + slot * es;
    const void* in = inPlace ? out : (const void*)((char*)r->send + slot * es);
    EXPECT_OK(mcclLabAllReduce(in, out, count, t, op, r->comm, r->stream));
  }
}

static void syncAll(struct arSet* s) {
  for (int i = 0; i < s->n; i++) {
    EXPECT_CUDA_OK(cudaSetDevice(s->r[i].comm->cudaDev));
    EXPECT_CUDA_OK(cudaStreamSynchronize(s->r[i].stream));
  }
}

static void checkAll(struct arSet* s, const char* what, mcclDataType_t t, mcclRedOp_t op, size_t count, size_t slot,
                     uint64_t seed) {
  size_t es = mcclTypeSize(t);
  char why[160];
  for (int i = 0; i < s->n; i++) {
    struct arRank* r = &s->r[i];
    EXPECT_CUDA_OK(cudaSetDevice(r->comm->cudaDev));
    EXPECT_CUDA_OK(cudaMemcpy(s->host, (char*)r->recv + slot * es, count * es, cudaMemcpyDeviceToHost));
    if (arCheck(s->host, t, op, count, s->n, seed, why, sizeof(why))) {
      mcclTestFailAt(__FILE__, __LINE__, "%s %s %s count %zu: rank %d: %s", what, dtName(t), mcclOpName(op), count,
                     r->comm->rank, why);
      return;
    }
  }
}

// One allreduce on every rank along `path` at element offset `slot` of the buffers, checked on every
// rank. A path that does not run on this many ranks is left out.
static void runAt(struct arSet* s, const struct arPath* path, mcclDataType_t t, mcclRedOp_t op, size_t count,
                  size_t slot, int inPlace, uint64_t seed) {
  if (!arPathRuns(path, s->n)) return;
  arForce(path->algo, path->proto);
  fillInputs(s, t, op, count, slot, inPlace, seed);
  CHECK_STOPPED();
  launchAll(s, t, op, count, slot, inPlace);
  CHECK_STOPPED();
  syncAll(s);
  CHECK_STOPPED();
  checkAll(s, path->name, t, op, count, slot, seed);
}
static void runOne(struct arSet* s, const struct arPath* path, mcclDataType_t t, mcclRedOp_t op, size_t count,
                   int inPlace, uint64_t seed) {
  runAt(s, path, t, op, count, 0, inPlace, seed);
}

// Every path x dtype x op, in place and out of place, on a count that is odd and not a multiple of
// the vector widths (default FIFO sizes; one channel: on sim every kernel thread is a host thread).
static void everyTypeAndOp(void) {
  int n = nRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no windows");
  struct arSet s;
  setUp(&s, n, 1, 4096);
  for (int p = 0; p < AR_NPATHS && !mcclTestStopped(); p++)
    for (int t = 0; t < mcclNumTypes && !mcclTestStopped(); t++)
      for (int op = 0; op < mcclNumOps && !mcclTestStopped(); op++)
        if (mcclTestSampled((uint64_t)((p * mcclNumTypes + t) * mcclNumOps + op), 4))
          runOne(&s, &arPaths[p], (mcclDataType_t)t, (mcclRedOp_t)op, 203, (p + t + op) & 1,
                 mcclTestSeed() + (uint64_t)t);
  arForce(NULL, NULL);
  tearDown(&s);
}

// Counts 0, 1, odd, prime, not divisible by ranks x channels x vector width, and large enough for
// several rounds of the ring loop with small FIFOs; in place and out of place; every path; three
// channels, so the channels' parts are uneven too.
static void awkwardCounts(void) {
  const int nChannels = 3;
  int n = nRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no windows");
  warmUp(n);
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads(), shm0 = mcclTestCountShm();
  arSmallFifos(1);
  static const size_t counts[] = {0, 1, 2, 3, 7, 31, 131, 1021, 4099, 12289};
  struct arSet s;
  setUp(&s, n, nChannels, 12289 * 8);
  const mcclDataType_t types[] = {mcclInt8, mcclFloat32, mcclFloat64, mcclBfloat16};
  int k = 0;
  for (int p = 0; p < AR_NPATHS && !mcclTestStopped(); p++)
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]) && !mcclTestStopped(); c++)
      for (int inPlace = 0; inPlace < 2 && !mcclTestStopped(); inPlace++, k++)
        if (mcclTestSampled((uint64_t)k, 3))
          runOne(&s, &arPaths[p], types[k % 4], k % 3 ? mcclSum : mcclAvg, counts[c], inPlace,
                 mcclTestSeed() + (uint64_t)k);
  // count 0 leaves the output alone
  if (!mcclTestStopped()) {
    memset(s.host, 0x5a, 64);
    for (int i = 0; i < n; i++) {
      EXPECT_CUDA_OK(cudaSetDevice(s.r[i].comm->cudaDev));
      EXPECT_CUDA_OK(mcclTestCopyToDevice(s.r[i].recv, s.host, 64));
    }
    for (int p = 0; p < AR_NPATHS; p++) {
      if (!arPathRuns(&arPaths[p], n)) continue;
      arForce(arPaths[p].algo, arPaths[p].proto);
      launchAll(&s, mcclFloat32, mcclSum, 0, 0, 0);
      syncAll(&s);
    }
    unsigned char back[64], want[64];
    memset(want, 0x5a, 64);
    for (int i = 0; i < n; i++) {
      EXPECT_CUDA_OK(cudaSetDevice(s.r[i].comm->cudaDev));
      EXPECT_CUDA_OK(cudaMemcpy(back, s.r[i].recv, 64, cudaMemcpyDeviceToHost));
      EXPECT_MEM_EQ(back, want, 64);
    }
  }
  arForce(NULL, NULL);
  arSmallFifos(0);
  tearDown(&s);
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_EQ(mcclTestCountShm(), shm0);
}

// One-shot's split over blocks (MCCL_ONESHOT_BLOCK_BYTES): 16 bytes a block (every block two lines),
// 24 (a block's lines end mid-word of a wider type), the default, and values below 16 (the default
// again), with four channels so up to four blocks share a call; counts from one element to more
// lines than blocks times threads, every 8-byte line shape (1-, 2-, 4- and 8-byte types).
static void oneShotBlocks(void) {
  int n = nRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no windows");
  struct arSet s;
  setUp(&s, n, 4, 3001 * 8);
  static const char* const perBlock[] = {"16", "24", NULL, "0", "-5"};
  static const size_t counts[] = {1, 3, 5, 17, 63, 257, 3001};
  const mcclDataType_t types[] = {mcclInt8, mcclFloat16, mcclFloat32, mcclFloat64};
  int k = 0;
  for (size_t b = 0; b < sizeof(perBlock) / sizeof(perBlock[0]) && !mcclTestStopped(); b++) {
    if (perBlock[b])
      setenv("MCCL_ONESHOT_BLOCK_BYTES", perBlock[b], 1);
    else
      unsetenv("MCCL_ONESHOT_BLOCK_BYTES");
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]) && !mcclTestStopped(); c++, k++)
      if (mcclTestSampled((uint64_t)k, 3))
        runOne(&s, &arPaths[2], types[k % 4], k % 2 ? mcclSum : mcclMax, counts[c], k & 1,
               mcclTestSeed() + (uint64_t)k);
  }
  unsetenv("MCCL_ONESHOT_BLOCK_BYTES");
  arForce(NULL, NULL);
  tearDown(&s);
}

// Windows whose buffers start off a 16-byte boundary, as nccl-tests -u passes them: send and recv equally
// off on every rank (two-shot then moves 16-byte packs after a head), or off by different amounts (each
// element alone); every path, in and out of place, counts that end mid-pack.
static void unalignedWindows(void) {
  int n = nRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no windows");
  const size_t count = 1021;
  struct arSet s;
  setUp(&s, n, 2, count * 8 + 16);
  static const struct {
    size_t sendOff, recvOff;
    mcclDataType_t t;
  } offs[] = {{1, 1, mcclInt8},    {4, 4, mcclFloat32}, {6, 6, mcclBfloat16},
              {8, 8, mcclFloat64}, {3, 9, mcclUint8},   {4, 12, mcclInt32}};
  const int noffs = (int)(sizeof(offs) / sizeof(offs[0]));
  int k = 0;
  for (int p = 0; p < AR_NPATHS && !mcclTestStopped(); p++)
    for (int o = 0; o < noffs && !mcclTestStopped(); o++, k++) {
      if (!mcclTestSampled((uint64_t)k, 2)) continue;  // a sanitizer build: a seeded half of path x offset
      // The same windows, the buffers moved inside them.
      struct arSet moved = s;
      moved.bytes = s.bytes - 16;
      for (int i = 0; i < n; i++) {
        moved.r[i].send = (char*)s.r[i].send + offs[o].sendOff;
        moved.r[i].recv = (char*)s.r[i].recv + offs[o].recvOff;
      }
      runOne(&moved, &arPaths[p], offs[o].t, k % 3 ? mcclSum : mcclAvg, count, k & 1, mcclTestSeed() + (uint64_t)k);
    }
  arForce(NULL, NULL);
  tearDown(&s);
}

// The ring over SHM connections (MCCL_P2P_DISABLE=1) too.
static void shmRing(void) {
  int n = nRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no windows");
  setenv("MCCL_P2P_DISABLE", "1", 1);
  arSmallFifos(1);
  struct arSet s;
  setUp(&s, n, 2, 5003 * 4);
  if (!mcclTestStopped()) EXPECT_EQ(s.r[0].comm->transport[0], TRANSPORT_SHM);
  for (int p = 0; p < 2 && !mcclTestStopped(); p++) {
    runOne(&s, &arPaths[p], mcclInt32, mcclSum, 5003, 0, mcclTestSeed());
    runOne(&s, &arPaths[p], mcclFloat16, mcclMax, 977, 1, mcclTestSeed() + 1);
  }
  arForce(NULL, NULL);
  unsetenv("MCCL_P2P_DISABLE");
  arSmallFifos(0);
  tearDown(&s);
}

// 1000 calls back to back (200 in a sanitizer build: mcclTestSampling): sizes, paths (on more than
// 2 ranks one-shot with LL takes one-shot with SIMPLE's turns), ops, in/out of place all change from
// call to call, and the host waits only after every batch of 8 calls
// (each in its own slot of the buffers), so calls pipeline on the streams and any stale FIFO step,
// one-shot parity or barrier sequence number shows as a wrong result. Small FIFOs make the ring steps wrap often. On
// sim it runs on 2 ranks with one channel: every kernel thread is a host thread created per launch (up to 512 per
// block), and 1000 calls on 4 ranks take most of a minute on CI's 2 cores; the GPU runs all ranks.
#define BB_CALLS 1000
#define BB_BATCH 8
#define BB_MAXCOUNT 700
static const struct arPath* bbPath(int i, int n) {
  const struct arPath* path = &arPaths[i % AR_NPATHS];
  return arPathRuns(path, n) ? path : &arPaths[2];
}
static void backToBack(void) {
  int n = nRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no windows");
  if (MCCL_TEST_ON_SIM) n = 2;
  arSmallFifos(1);
  struct arSet s;
  setUp(&s, n, MCCL_TEST_ON_SIM ? 1 : 2, (size_t)BB_BATCH * BB_MAXCOUNT * 4);
  uint64_t seed = mcclTestSeed();
  size_t counts[BB_BATCH];
  const int calls = mcclTestSampling() ? BB_CALLS / 5 : BB_CALLS;  // sanitizers: 200 calls
  for (int base = 0; base < calls && !mcclTestStopped(); base += BB_BATCH) {
    for (int j = 0; j < BB_BATCH && !mcclTestStopped(); j++) {
      int i = base + j;
      counts[j] = (size_t)(arMix(seed + (uint64_t)i) % (BB_MAXCOUNT + 1));
      fillInputs(&s, mcclInt32, (mcclRedOp_t)(i / AR_NPATHS % mcclNumOps), counts[j], (size_t)j * BB_MAXCOUNT,
                 i % 3 == 0, seed + (uint64_t)i);
    }
    for (int j = 0; j < BB_BATCH && !mcclTestStopped(); j++) {
      int i = base + j;
      const struct arPath* path = bbPath(i, n);
      arForce(path->algo, path->proto);
      launchAll(&s, mcclInt32, (mcclRedOp_t)(i / AR_NPATHS % mcclNumOps), counts[j], (size_t)j * BB_MAXCOUNT,
                i % 3 == 0);
    }
    if (mcclTestStopped()) break;
    syncAll(&s);
    for (int j = 0; j < BB_BATCH && !mcclTestStopped(); j++) {
      int i = base + j;
      char what[48];
      snprintf(what, sizeof(what), "call %d (%s)", i, bbPath(i, n)->name);
      checkAll(&s, what, mcclInt32, (mcclRedOp_t)(i / AR_NPATHS % mcclNumOps), counts[j], (size_t)j * BB_MAXCOUNT,
               seed + (uint64_t)i);
    }
  }
  arForce(NULL, NULL);
  arSmallFifos(0);
  tearDown(&s);
}

// One-shot with SIMPLE on 2 of the devices (it runs on 2 ranks only): every dtype x op, in place and
// out of place, on counts from one element to the largest it takes (MCCL_ONESHOT_SIMPLE_MAX_BYTES),
// blocks with nothing to do (fewer 16-byte packs than blocks), buffers one element off 16-byte
// alignment (the element-wise path), and calls pipelined on the streams with one-shot's LL and
// two-shot in between, whose scratch and parities it shares the signal area with.
static void oneShotSimple(void) {
  if (mcclTestDeviceCount() < 2) SKIP("needs 2 devices");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no windows");
  const struct arPath* simple = &arPaths[4];
  const size_t maxCount = MCCL_ONESHOT_SIMPLE_MAX_BYTES / 4;  // float32 / int32 at the limit
  struct arSet s;
  setUp(&s, 2, MCCL_TEST_ON_SIM ? 2 : 8, (maxCount + 16) * 4);
  uint64_t seed = mcclTestSeed();
  int k = 0;
  for (int t = 0; t < mcclNumTypes && !mcclTestStopped(); t++)
    for (int op = 0; op < mcclNumOps && !mcclTestStopped(); op++, k++)
      if (mcclTestSampled((uint64_t)k, 3))
        runOne(&s, simple, (mcclDataType_t)t, (mcclRedOp_t)op, 1001 + (size_t)t, k & 1, seed + (uint64_t)k);
  static const size_t counts[] = {1, 3, 64, 4099, 65537, 1 << 18, (1 << 20) - 5, 1 << 20};
  for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]) && !mcclTestStopped(); c++, k++) {
    EXPECT_TRUE(counts[c] <= maxCount);
    if (counts[c] > 65537 && !mcclTestSampled((uint64_t)k, 2)) continue;  // a sanitizer build: one of the large
    runOne(&s, simple, k & 1 ? mcclFloat32 : mcclInt32, k % 3 ? mcclSum : mcclMax, counts[c], c & 1,
           seed + (uint64_t)k);
  }
  for (int inPlace = 0; inPlace < 2 && !mcclTestStopped(); inPlace++, k++)  // one element past 16-byte alignment
    runAt(&s, simple, mcclFloat16, mcclSum, 50001, 1, inPlace, seed + (uint64_t)k);
  // Pipelined: 24 calls without a host wait, one-shot SIMPLE / LL / two-shot in turn, each in its own slot.
  enum { kCalls = 24, kCount = 3001 };
  for (int i = 0; i < kCalls && !mcclTestStopped(); i++)
    fillInputs(&s, mcclInt32, mcclSum, kCount, (size_t)i * kCount, 0, seed + 1000 + (uint64_t)i);
  const struct arPath* turn[3] = {simple, &arPaths[2], &arPaths[3]};
  for (int i = 0; i < kCalls && !mcclTestStopped(); i++) {
    arForce(turn[i % 3]->algo, turn[i % 3]->proto);
    launchAll(&s, mcclInt32, mcclSum, kCount, (size_t)i * kCount, 0);
  }
  if (!mcclTestStopped()) syncAll(&s);  // a failed setUp leaves no communicators
  for (int i = 0; i < kCalls && !mcclTestStopped(); i++) {
    char what[48];
    snprintf(what, sizeof(what), "pipelined call %d (%s)", i, turn[i % 3]->name);
    checkAll(&s, what, mcclInt32, mcclSum, kCount, (size_t)i * kCount, seed + 1000 + (uint64_t)i);
  }
  arForce(NULL, NULL);
  tearDown(&s);
}

// ---- CUDA graphs (BACKEND=cuda; the sim has no graphs) ---------------------------------------------
// The graph API is looked up at run time (mcclTestGraphApiLoad), so this file links against the sim, which
// does not implement it.

static void graphReplay(void) {
  if (MCCL_TEST_ON_SIM) SKIP("the sim backend has no CUDA graphs");
  int n = nRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no windows");
  mcclTestGraphApi ga;
  if (!mcclTestGraphApiLoad(&ga)) SKIP("the CUDA runtime's graph API is not available");
  const size_t count = 3001;
  struct arSet s;
  setUp(&s, n, 2, count * 4);
  for (int p = 0; p < AR_NPATHS && !mcclTestStopped(); p++) {
    if (!arPathRuns(&arPaths[p], n)) continue;
    arForce(arPaths[p].algo, arPaths[p].proto);
    cudaGraphExec_t exec[MAXDEV] = {NULL};
    for (int i = 0; i < n && !mcclTestStopped(); i++) {
      struct arRank* r = &s.r[i];
      cudaGraph_t g = NULL;
      EXPECT_CUDA_OK(cudaSetDevice(r->comm->cudaDev));
      EXPECT_CUDA_OK(ga.beginCapture(r->stream, cudaStreamCaptureModeRelaxed));
      EXPECT_OK(mcclLabAllReduce(r->send, r->recv, count, mcclFloat32, mcclSum, r->comm, r->stream));
      EXPECT_CUDA_OK(ga.endCapture(r->stream, &g));
      EXPECT_CUDA_OK(ga.instantiate(&exec[i], g, 0));
      EXPECT_CUDA_OK(ga.destroy(g));
    }
    for (int rep = 0; rep < 100 && !mcclTestStopped(); rep++) {
      uint64_t seed = mcclTestSeed() + (uint64_t)(p * 1000 + rep);
      fillInputs(&s, mcclFloat32, mcclSum, count, 0, 0, seed);  // a new input before every replay
      for (int i = 0; i < n && !mcclTestStopped(); i++) {
        EXPECT_CUDA_OK(cudaSetDevice(s.r[i].comm->cudaDev));
        EXPECT_CUDA_OK(ga.launch(exec[i], s.r[i].stream));
      }
      syncAll(&s);
      char what[48];
      snprintf(what, sizeof(what), "%s graph replay %d", arPaths[p].name, rep);
      checkAll(&s, what, mcclFloat32, mcclSum, count, 0, seed);
    }
    for (int i = 0; i < n; i++)
      if (exec[i]) {
        cudaSetDevice(s.r[i].comm->cudaDev);
        EXPECT_CUDA_OK(ga.execDestroy(exec[i]));
      }
  }
  arForce(NULL, NULL);
  tearDown(&s);
}

// ---- abort ------------------------------------------------------------------------------------------
struct aborter {
  mcclLabComm* comm;
  int ms;
};
static void* abortLater(void* p) {
  struct aborter* a = (struct aborter*)p;
  struct timespec ts = {0, (long)a->ms * 1000000L};
  nanosleep(&ts, NULL);
  mcclLabCommAbort(a->comm);
  return NULL;
}

// Rank 0 calls, rank 1 never does: rank 0's kernel waits for its peer until another thread aborts
// the communicator. The stream then completes, the kernel reports the abort in the communicator's
// status word, the communicator refuses further calls, and destroying both frees everything (fds,
// threads, /dev/shm, mappings). One channel and one block: on sim each of a block's waiting threads
// yields MCCL_SPINS_BEFORE_CHECK_ABORT times before it reads the flag, so the LL and one-shot kernels
// (256 threads) take seconds there to see it.
static void abortPath(const struct arPath* path) {
  if (mcclTestDeviceCount() < 2) SKIP("needs 2 devices");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no windows");
  warmUp(2);
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads(), shm0 = mcclTestCountShm();
  long maps0 = mcclTestCountMaps("minccl-sim");
  struct arSet s;
  setUp(&s, 2, 1, 64 << 10);
  CHECK_STOPPED();
  arForce(path->algo, path->proto);
  struct arRank* r = &s.r[0];
  EXPECT_CUDA_OK(cudaSetDevice(r->comm->cudaDev));
  struct aborter ab = {r->comm, 200};
  pthread_t th;
  pthread_create(&th, NULL, abortLater, &ab);
  EXPECT_EQ(*r->comm->status, 0);  // no kernel aborted yet
  EXPECT_OK(mcclLabAllReduce(r->send, r->recv, 1000, mcclFloat32, mcclSum, r->comm, r->stream));
  EXPECT_CUDA_OK(cudaStreamSynchronize(r->stream));  // the kernel ended: it saw the abort
  pthread_join(th, NULL);
  EXPECT_EQ(*r->comm->status, mcclDevStatusAborted);  // and said so in the communicator's status word
  EXPECT_EQ(*s.r[1].comm->status, 0);                 // rank 1 launched nothing
  EXPECT_RES(mcclLabAllReduce(r->send, r->recv, 16, mcclFloat32, mcclSum, r->comm, r->stream), mcclInvalidUsage);
  arForce(NULL, NULL);
  tearDown(&s);
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_EQ(mcclTestCountShm(), shm0);
  if (MCCL_TEST_ON_SIM) EXPECT_EQ(mcclTestCountMaps("minccl-sim"), maps0);
}
static void abortRingSimple(void) {
  abortPath(&arPaths[0]);
}
static void abortRingLL(void) {
  abortPath(&arPaths[1]);
}
static void abortOneShot(void) {
  abortPath(&arPaths[2]);
}
static void abortTwoShot(void) {
  abortPath(&arPaths[3]);
}
static void abortOneShotSimple(void) {
  abortPath(&arPaths[4]);
}

// One device: the result is the input (avg divides by 1), in place and out of place.
static void oneRank(void) {
  if (mcclTestDeviceCount() < 1) SKIP("no CUDA device");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no windows");
  struct arSet s;
  setUp(&s, 1, 2, 1000 * 8);
  for (int k = 0; k < 4 && !mcclTestStopped(); k++)
    runOne(&s, &arPaths[0], k & 1 ? mcclFloat64 : mcclUint8, k & 2 ? mcclAvg : mcclProd, 999, k & 1, mcclTestSeed());
  arForce(NULL, NULL);
  tearDown(&s);
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(everyTypeAndOp), MCCL_TEST_CASE(awkwardCounts), MCCL_TEST_CASE(oneShotBlocks),
               MCCL_TEST_CASE(unalignedWindows), MCCL_TEST_CASE(shmRing), MCCL_TEST_CASE(backToBack),
               MCCL_TEST_CASE(graphReplay), MCCL_TEST_CASE(abortRingSimple), MCCL_TEST_CASE(abortRingLL),
               MCCL_TEST_CASE(abortOneShot), MCCL_TEST_CASE(abortTwoShot), MCCL_TEST_CASE(abortOneShotSimple),
               MCCL_TEST_CASE(oneShotSimple), MCCL_TEST_CASE(oneRank))
