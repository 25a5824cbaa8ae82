// Lab 07's other ring collectives (Broadcast, Reduce, AllGather, ReduceScatter) in one process
// driving up to 4 devices (mcclLabCommInitAll; 4 on sim), checked on every rank against the CPU
// reference (enq_test_util.h): every dtype x op of the reducing ones, every root of the rooted
// ones, both protocols, in place and out of place, counts 0, 1, odd, prime and not divisible by
// ranks x channels over several rounds of small FIFOs, over SHM too, one rank, the argument checks,
// and nothing leaked.
#include <stdlib.h>
#include <string.h>
#include "enq_test_util.h"
#include "mccl_alloc.h"
#include "mccl_test.h"

// The protocol of the calls that follow (NULL: the size decides).
// LL128 last: the SHM runs take the first two (SHM has no LL128 FIFO).
static const char* const protos[3] = {"simple", "ll", "ll128"};

// One call on every rank, made alone (launched on all before any wait), checked on every rank.
static void runOne(struct enqSet* s, const struct enqCall* c) {
  enqSetRun(s, c, 1, s->bytes, 0, 0);
}

// Reduce and ReduceScatter: every dtype x op, alternating the protocol, in/out of place and the
// root, on an odd count (one channel: on sim every kernel thread is a host thread).
static void everyTypeAndOp(void) {
  int n = enqRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  struct enqSet s;
  enqSetUp(&s, n, 1, 203 * 8 * ENQ_MAXDEV);
  int k = 0;
  for (int f = mcclFuncReduce; f <= mcclFuncReduceScatter && !mcclTestStopped();
       f += mcclFuncReduceScatter - mcclFuncReduce)
    for (int t = 0; t < mcclNumTypes && !mcclTestStopped(); t++)
      for (int op = 0; op < mcclNumOps && !mcclTestStopped(); op++, k++) {
        if (!mcclTestSampled((uint64_t)k, 3)) continue;
        arForce(NULL, protos[k % 3]);
        struct enqCall c = {
            f, (mcclDataType_t)t, (mcclRedOp_t)op, 0, 203, k % n, (k >> 1) & 1, mcclTestSeed() + (uint64_t)k};
        runOne(&s, &c);
      }
  arForce(NULL, NULL);
  enqTearDown(&s);
}

// Broadcast and Reduce from every root, both protocols, in and out of place.
static void everyRoot(void) {
  int n = enqRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  struct enqSet s;
  enqSetUp(&s, n, 2, 1001 * 4);
  int k = 0;
  for (int f = mcclFuncBroadcast; f <= mcclFuncReduce && !mcclTestStopped(); f++)
    for (int root = 0; root < n && !mcclTestStopped(); root++)
      for (int p = 0; p < 3 && !mcclTestStopped(); p++, k++) {
        arForce(NULL, protos[p]);
        struct enqCall c = {f,
                            f == mcclFuncBroadcast ? mcclFloat16 : mcclInt32,
                            k % 3 ? mcclSum : mcclAvg,
                            0,
                            1001,
                            root,
                            k & 1,
                            mcclTestSeed() + (uint64_t)k};
        runOne(&s, &c);
      }
  arForce(NULL, NULL);
  enqTearDown(&s);
}

// Every collective, both protocols, in and out of place, on counts 0, 1, odd, prime and not
// divisible by ranks x channels (3 channels: uneven parts); small FIFOs, so the larger counts take
// several rounds of the chunk loop. Then count 0 leaves every output alone, and nothing leaked.
static void awkwardCounts(void) {
  int n = enqRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  mcclTestWarmUp();  // before the leak baseline: run alone, the case must see what it sees after others
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads(), shm0 = mcclTestCountShm();
  static const size_t counts[] = {0, 1, 7, 131, 1021, 4099};
  static const mcclDataType_t types[] = {mcclInt8, mcclFloat32, mcclFloat64, mcclBfloat16, mcclUint32};
  arSmallFifos(1);
  struct enqSet s;
  enqSetUp(&s, n, 3, 4099 * 8 * ENQ_MAXDEV);
  int k = 0;
  for (int f = mcclFuncBroadcast; f <= mcclFuncReduceScatter && !mcclTestStopped(); f++)
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]) && !mcclTestStopped(); ci++)
      for (int p = 0; p < 3 && !mcclTestStopped(); p++, k++) {
        if (!mcclTestSampled((uint64_t)k, 2)) continue;
        arForce(NULL, protos[p]);
        struct enqCall c = {f,     types[k % 5], k % 3 ? mcclSum : mcclAvg,   0, counts[ci],
                            k % n, (k >> 1) & 1, mcclTestSeed() + (uint64_t)k};
        runOne(&s, &c);
      }
  // count 0: nothing launched, nothing written
  if (!mcclTestStopped()) {
    unsigned char back[64], want[64];
    memset(want, 0x5a, sizeof(want));
    for (int i = 0; i < n; i++) {
      EXPECT_CUDA_OK(cudaSetDevice(s.comm[i]->cudaDev));
      EXPECT_CUDA_OK(mcclTestCopyToDevice(s.recv[i], want, sizeof(want)));
      EXPECT_OK(mcclLabBroadcast(s.send[i], s.recv[i], 0, mcclFloat32, 0, s.comm[i], s.stream[i]));
      EXPECT_OK(mcclLabReduce(s.send[i], s.recv[i], 0, mcclFloat32, mcclSum, 0, s.comm[i], s.stream[i]));
      EXPECT_OK(mcclLabAllGather(s.send[i], s.recv[i], 0, mcclFloat32, s.comm[i], s.stream[i]));
      EXPECT_OK(mcclLabReduceScatter(s.send[i], s.recv[i], 0, mcclFloat32, mcclSum, s.comm[i], s.stream[i]));
      EXPECT_CUDA_OK(cudaStreamSynchronize(s.stream[i]));
      EXPECT_CUDA_OK(cudaMemcpy(back, s.recv[i], sizeof(back), cudaMemcpyDeviceToHost));
      EXPECT_MEM_EQ(back, want, sizeof(want));
    }
  }
  arForce(NULL, NULL);
  arSmallFifos(0);
  enqTearDown(&s);
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_EQ(mcclTestCountShm(), shm0);
}

// Every collective over SHM connections (MCCL_P2P_DISABLE=1), both protocols.
static void shmRing(void) {
  int n = enqRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  setenv("MCCL_P2P_DISABLE", "1", 1);
  arSmallFifos(1);
  struct enqSet s;
  enqSetUp(&s, n, 2, 3001 * 4 * ENQ_MAXDEV);
  if (!mcclTestStopped()) EXPECT_EQ(s.comm[0]->transport[0], TRANSPORT_SHM);
  for (int f = mcclFuncBroadcast; f <= mcclFuncReduceScatter && !mcclTestStopped(); f++)
    for (int p = 0; p < 2 && !mcclTestStopped(); p++) {
      arForce(NULL, protos[p]);
      struct enqCall c = {f, mcclInt32, mcclMax, 0, 3001, (f + p) % n, p, mcclTestSeed() + (uint64_t)f};
      runOne(&s, &c);
    }
  // LL128 forced on SHM: refused before anything is launched, on every rank, by every collective; the
  // communicator goes on working.
  arForce(NULL, "ll128");
  for (int r = 0; r < n && !mcclTestStopped(); r++) {
    EXPECT_CUDA_OK(cudaSetDevice(s.comm[r]->cudaDev));
    EXPECT_EQ(s.comm[r]->ll128Ok, 0);
    EXPECT_RES(mcclLabAllReduce(s.send[r], s.recv[r], 64, mcclInt32, mcclSum, s.comm[r], s.stream[r]),
               mcclInvalidUsage);
    EXPECT_RES(mcclLabAllGather(s.send[r], s.recv[r], 64, mcclInt32, s.comm[r], s.stream[r]), mcclInvalidUsage);
    EXPECT_RES(mcclLabBroadcast(s.send[r], s.recv[r], 64, mcclInt32, 0, s.comm[r], s.stream[r]), mcclInvalidUsage);
  }
  arForce(NULL, protos[0]);
  if (!mcclTestStopped()) {
    struct enqCall c = {mcclFuncAllReduce, mcclInt32, mcclSum, 0, 3001, 0, 0, mcclTestSeed() + 99};
    runOne(&s, &c);
  }
  arForce(NULL, NULL);
  unsetenv("MCCL_P2P_DISABLE");
  arSmallFifos(0);
  enqTearDown(&s);
}

// The set's buffers moved off their 16-byte boundaries for call k (the set itself stays as it was): each rank's
// send and recv buffers by 1..15 bytes, whole elements of es bytes, a different amount per rank and side, or
// (same) one amount for every rank and both sides.
static struct enqSet offsetSet(const struct enqSet* s, int n, int k, size_t es, int same) {
  struct enqSet moved = *s;
  moved.bytes = s->bytes - 16;
  for (int r = 0; r < n; r++) {
    size_t so = same ? 2 + (size_t)k % 14 : 1 + (size_t)(k * 5 + r * 3) % 15;
    size_t ro = same ? so : 1 + (size_t)(k * 7 + r * 11 + 4) % 15;
    so = so < es ? es : so / es * es;
    ro = ro < es ? es : ro / es * es;
    moved.send[r] = (char*)s->send[r] + so;
    moved.recv[r] = (char*)s->recv[r] + ro;
  }
  return moved;
}

// Buffers that start anywhere, as a view into a tensor passes them: every ring collective (AllReduce forced
// onto the ring, and through one-shot; AllGather and ReduceScatter through one-shot with LL, and the ring's LL
// forced), each protocol, in and out of place, each rank's send and recv
// buffers off a 16-byte boundary by 1..15 bytes, a different amount per rank and side (whole elements of
// the wider types), on a count that ends mid-pack and mid-line. Small FIFOs: many slices, each split anew.
static void unalignedBuffers(void) {
  int n = enqRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  arSmallFifos(1);
  struct enqSet s;
  const size_t count = 1021;
  enqSetUp(&s, n, 2, (count * 8 + 16) * ENQ_MAXDEV);
  static const mcclDataType_t types[] = {mcclInt8, mcclBfloat16, mcclUint8, mcclFloat32, mcclFloat64};
  static const struct {
    int func;
    const char* algo;
  } calls[] = {{mcclFuncBroadcast, NULL},     {mcclFuncReduce, NULL},         {mcclFuncAllGather, NULL},
               {mcclFuncReduceScatter, NULL}, {mcclFuncAllReduce, "ring"},    {mcclFuncAllReduce, "oneshot"},
               {mcclFuncAllGather, "ring"},   {mcclFuncReduceScatter, "ring"}};
  int k = 0;
  for (size_t f = 0; f < sizeof(calls) / sizeof(calls[0]) && !mcclTestStopped(); f++)
    for (int p = 0; p < 3 && !mcclTestStopped(); p++)
      for (int inPlace = 0; inPlace < 2 && !mcclTestStopped(); inPlace++, k++) {
        if (calls[f].algo && strcmp(calls[f].algo, "oneshot") == 0 && (p == 2 || (p == 0 && n > 2))) continue;
        // AllGather and ReduceScatter: with LL the table takes one-shot, so the ring's LL is forced apart.
        if (calls[f].algo && calls[f].func != mcclFuncAllReduce && p != 1) continue;
        const mcclDataType_t t = types[k % 5];
        struct enqSet moved = offsetSet(&s, n, k, mcclTypeSize(t), 0);
        arForce(calls[f].algo, protos[p]);
        struct enqCall c = {calls[f].func, t,       k % 3 ? mcclSum : mcclAvg,   0, count,
                            k % n,         inPlace, mcclTestSeed() + (uint64_t)k};
        enqSetRun(&moved, &c, 1, moved.bytes, 0, 0);
      }
  arForce(NULL, NULL);
  arSmallFifos(0);
  enqTearDown(&s);
}

// SIMPLE's shifted slices (prims_simple.cuh): with the default FIFOs a P2P sender starts each slice as many
// bytes into its slot as its user buffer lies past 16 bytes. Every ring collective, in and out of place, over
// many slices: the buffers off by the same bytes on every rank (the receiver's buffer meets the FIFO on the
// same grid), then by a different amount per rank and side (it does not: the receiver reads the sender's
// offset from connFifo and copies across the two grids).
static void shiftedSlices(void) {
  int n = enqRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  struct enqSet s;
  const size_t count = MCCL_TEST_ON_SIM ? 60001 : 1500001;
  enqSetUp(&s, n, 2, (count * 4 + 16) * ENQ_MAXDEV);
  static const mcclDataType_t types[] = {mcclBfloat16, mcclFloat32, mcclInt8, mcclFloat64};
  static const int funcs[] = {mcclFuncBroadcast, mcclFuncReduce, mcclFuncAllGather, mcclFuncReduceScatter,
                              mcclFuncAllReduce};
  arForce("ring", "simple");
  int k = 0;
  for (int same = 1; same >= 0 && !mcclTestStopped(); same--)
    for (size_t f = 0; f < sizeof(funcs) / sizeof(funcs[0]) && !mcclTestStopped(); f++)
      for (int inPlace = 0; inPlace < 2 && !mcclTestStopped(); inPlace++, k++) {
        const mcclDataType_t t = types[k % 4];
        const size_t es = mcclTypeSize(t);
        if (!mcclTestSampled((uint64_t)k, 2)) continue;  // a sanitizer build: a seeded half
        struct enqSet moved = offsetSet(&s, n, k, es, same);
        struct enqCall c = {funcs[f], t,       k % 3 ? mcclSum : mcclAvg,   0, count / es * 2,
                            k % n,    inPlace, mcclTestSeed() + (uint64_t)k};
        enqSetRun(&moved, &c, 1, moved.bytes, 0, 0);
      }
  arForce(NULL, NULL);
  enqTearDown(&s);
}

// A ring with a P2P edge between devices without NVLink (PCIe: no native atomics between them) has no
// LL128 FIFO: MCCL_PROTO=ll128 is refused on every rank, naming the path, and the other protocols run. The
// sim poses every pair as PCIe with MCCL_SIM_NVLINK=0 (read as the connections are set up); a GPU host whose
// devices 0 and 1 are linked by NVLink skips.
static void ll128NeedsNvlink(void) {
  int n = enqRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  if (n > enqDevices()) SKIP("ranks share a device (MCCL_TEST_RANKS_PER_GPU): no link between them to pose as PCIe");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no P2P");
  int nvlinkPair = 1;
  if (!MCCL_TEST_ON_SIM) {
    if (cudaDeviceGetP2PAttribute(&nvlinkPair, cudaDevP2PAttrNativeAtomicSupported, 0, 1) != cudaSuccess) {
      (void)cudaGetLastError();
      SKIP("cudaDeviceGetP2PAttribute failed");
    }
    if (nvlinkPair) SKIP("devices 0 and 1 are linked by NVLink: no PCIe pair here");
  }
  setenv("MCCL_SIM_NVLINK", "0", 1);
  struct enqSet s;
  enqSetUp(&s, n, 2, 1021 * 4 * ENQ_MAXDEV);
  unsetenv("MCCL_SIM_NVLINK");
  CHECK_STOPPED();
  EXPECT_EQ(s.comm[0]->transport[0], TRANSPORT_P2P);
  arForce(NULL, "ll128");
  for (int r = 0; r < n && !mcclTestStopped(); r++) {
    EXPECT_CUDA_OK(cudaSetDevice(s.comm[r]->cudaDev));
    EXPECT_EQ(s.comm[r]->ll128Ok, 0);
    EXPECT_EQ(s.comm[r]->noLl128Transport, TRANSPORT_P2P);
    EXPECT_RES(mcclLabAllReduce(s.send[r], s.recv[r], 64, mcclInt32, mcclSum, s.comm[r], s.stream[r]),
               mcclInvalidUsage);
    EXPECT_RES(mcclLabReduceScatter(s.send[r], s.recv[r], 16, mcclInt32, mcclSum, s.comm[r], s.stream[r]),
               mcclInvalidUsage);
  }
  for (int p = 0; p < 2 && !mcclTestStopped(); p++) {
    arForce(NULL, protos[p]);
    struct enqCall c = {mcclFuncAllGather, mcclInt32, mcclSum, 0, 1021, 0, p, mcclTestSeed() + (uint64_t)p};
    runOne(&s, &c);
  }
  arForce(NULL, NULL);
  enqTearDown(&s);
}

// The table's LL128 band (tuning.def: AllGather on 2 ranks between the LL and LL128 cut-overs): with no protocol
// forced, a 2 MiB AllGather runs LL128 where the ring is P2P over NVLink and SIMPLE where it is not (the sim
// posing PCIe with MCCL_SIM_NVLINK=0), never refused, correct in place and out of place either way. Which
// protocol the table names is test_comm's to check; here, that both rings carry it.
static void tableLl128Band(void) {
  if (enqRanksHere() < 2) SKIP("needs 2 devices");
  if (enqDevices() < 2) SKIP("ranks share a device (MCCL_TEST_RANKS_PER_GPU): no link between them to pose as PCIe");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no P2P");
  const size_t count = 256 << 10;  // int32 per rank: 2 MiB gathered on 2 ranks
  for (int nvlink = 1; nvlink >= (MCCL_TEST_ON_SIM ? 0 : 1) && !mcclTestStopped(); nvlink--) {
    if (!nvlink) setenv("MCCL_SIM_NVLINK", "0", 1);
    struct enqSet s;
    enqSetUp(&s, 2, 2, count * 4 * ENQ_MAXDEV);
    unsetenv("MCCL_SIM_NVLINK");
    if (MCCL_TEST_ON_SIM && !mcclTestStopped()) EXPECT_EQ(s.comm[0]->ll128Ok, nvlink);
    arForce(NULL, NULL);
    for (int inPlace = 0; inPlace < 2 && !mcclTestStopped(); inPlace++) {
      struct enqCall c = {
          mcclFuncAllGather, mcclInt32, mcclSum, 0, count, 0, inPlace, mcclTestSeed() + (uint64_t)inPlace};
      runOne(&s, &c);
    }
    enqTearDown(&s);
  }
}

// MCCL_THREAD_THRESHOLDS (NCCL's channel loop): a ring call of B bytes (the larger buffer) runs on the most
// channels C of the communicator's 4 with B >= C x threads x threshold (LL's threshold times the ranks),
// one at least, and launches that many blocks; a group of two ring calls launches what they want together.
// Unset, or a value that is not three integers: all 4. The data is checked every time.
static void threadThresholds(void) {
  const int n = enqRanksHere() < 4 ? enqRanksHere() : 4;
  if (n < 2) SKIP("needs 2 devices");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no P2P");
  setenv("MCCL_THREAD_THRESHOLDS", "8 8 64", 1);  // read when the communicators are created
  mcclParamResetAll();
  struct enqSet s;
  enqSetUp(&s, n, 4, 128 << 10);
  CHECK_STOPPED();
  for (int i = 0; i < n; i++) {
    EXPECT_EQ(s.comm[i]->threadThresholds[MCCL_PROTO_LL], 8 * n);
    EXPECT_EQ(s.comm[i]->threadThresholds[MCCL_PROTO_SIMPLE], 64);
  }
  // LL: 256 threads x 8 x n bytes a channel; SIMPLE: 512 x 64 = 32 KiB.
  const size_t llPer = (size_t)256 * 8 * (size_t)n, simplePer = (size_t)512 * 64;
  static const struct {
    int func;
    const char* proto;
    size_t bytes;  // the larger buffer
  } cases[] = {
      {mcclFuncAllGather, "ll", 4096},        {mcclFuncAllGather, "ll", 8192 * 4},
      {mcclFuncAllGather, "ll", 64 << 10},    {mcclFuncBroadcast, "ll", 1024},
      {mcclFuncReduceScatter, "ll", 20480},   {mcclFuncReduce, "simple", 32 << 10},
      {mcclFuncReduce, "simple", 96 << 10},   {mcclFuncAllGather, "simple", 128 << 10},
      {mcclFuncAllReduce, "ll", 3 << 10},     {mcclFuncBroadcast, "simple", 77},
  };
  for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]) && !mcclTestStopped(); k++) {
    if (!mcclTestSampled(k, 3)) continue;  // a sanitizer build runs a third of them
    arForce("ring", cases[k].proto);
    const int gathers = cases[k].func == mcclFuncAllGather || cases[k].func == mcclFuncReduceScatter;
    const size_t count = cases[k].bytes / 4 / (gathers ? (size_t)n : 1);
    const size_t bytes = count * 4 * (gathers ? (size_t)n : 1);
    const size_t per = cases[k].proto[0] == 'l' ? llPer : simplePer;
    const int want = bytes / per < 1 ? 1 : bytes / per > 4 ? 4 : (int)(bytes / per);
    struct enqCall c = {cases[k].func, mcclInt32, mcclSum, 0, count, (int)(k % (size_t)n), (int)(k & 1),
                        mcclTestSeed() + k};
    runOne(&s, &c);
    for (int i = 0; i < n; i++) EXPECT_EQ(s.comm[i]->lastBlocks, want);
  }
  // Two AllGathers in one group, with SIMPLE: about 16 KiB and 48 KiB gathered want 1 channel each (2
  // blocks); 64 KiB and 32 KiB want 2 and 1 (3 blocks, shared out by bytes).
  arForce("ring", "simple");
  for (int big = 0; big < 2 && !mcclTestStopped(); big++) {
    const size_t c0 = (big ? 64 << 10 : 16 << 10) / 4 / (size_t)n, c1 = (big ? 32 << 10 : 48 << 10) / 4 / (size_t)n;
    struct enqCall g[2] = {{mcclFuncAllGather, mcclInt32, mcclSum, 0, c0, 0, 0, mcclTestSeed()},
                           {mcclFuncAllGather, mcclInt32, mcclSum, 0, c1, 0, 0, mcclTestSeed() + 1}};
    enqSetRun(&s, g, 2, 64 << 10, 1, 1);
    const size_t w0 = c0 * 4 * (size_t)n / simplePer, w1 = c1 * 4 * (size_t)n / simplePer;
    const int want = (int)((w0 < 1 ? 1 : w0) + (w1 < 1 ? 1 : w1));
    for (int i = 0; i < n; i++) EXPECT_EQ(s.comm[i]->lastBlocks, want > 4 ? 4 : want);
  }
  enqTearDown(&s);
  // Unset, and values that are not three non-negative integers (a warning): thresholds of 0, every channel.
  static const char* const other[] = {NULL, "8 8", "8 8 64 1", "8 -1 64", "x"};
  for (size_t v = 0; v < sizeof(other) / sizeof(other[0]) && !mcclTestStopped(); v++) {
    if (other[v])
      setenv("MCCL_THREAD_THRESHOLDS", other[v], 1);
    else
      unsetenv("MCCL_THREAD_THRESHOLDS");
    arForce("ring", "ll");
    enqSetUp(&s, 2, 4, 4096);
    for (int i = 0; i < 2 && s.comm[i]; i++)
      for (int p = 0; p < 3; p++) EXPECT_EQ(s.comm[i]->threadThresholds[p], 0);
    struct enqCall c = {mcclFuncAllGather, mcclInt32, mcclSum, 0, 128, 0, 0, mcclTestSeed() + v};
    runOne(&s, &c);
    for (int i = 0; i < 2 && s.comm[i]; i++) EXPECT_EQ(s.comm[i]->lastBlocks, 4);
    enqTearDown(&s);
  }
  unsetenv("MCCL_THREAD_THRESHOLDS");
  arForce(NULL, NULL);
}

// One device: each collective's output is its input (avg divides by 1), in place and out of place.
static void oneRank(void) {
  if (enqDevices() < 1) SKIP("no CUDA device");
  struct enqSet s;
  enqSetUp(&s, 1, 2, 999 * 8);
  for (int f = mcclFuncBroadcast; f <= mcclFuncReduceScatter && !mcclTestStopped(); f++)
    for (int k = 0; k < 2 && !mcclTestStopped(); k++) {
      struct enqCall c = {f, k ? mcclFloat64 : mcclUint8, k ? mcclAvg : mcclProd, 0, 999, 0, k, mcclTestSeed()};
      runOne(&s, &c);
    }
  enqTearDown(&s);
}

// Bad arguments: mcclInvalidArgument before anything is launched (the streams stay empty, the
// buffers untouched); an aborted communicator: mcclInvalidUsage.
static void argumentChecks(void) {
  int n = enqRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  struct enqSet s;
  enqSetUp(&s, 2, 1, 4096);
  CHECK_STOPPED();
  mcclLabComm* c = s.comm[0];
  void *in = s.send[0], *out = s.recv[0];
  cudaStream_t st = s.stream[0];
  EXPECT_CUDA_OK(cudaSetDevice(c->cudaDev));
  // NULL communicator
  EXPECT_RES(mcclLabBroadcast(in, out, 4, mcclInt32, 0, NULL, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabReduce(in, out, 4, mcclInt32, mcclSum, 0, NULL, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabAllGather(in, out, 4, mcclInt32, NULL, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabReduceScatter(in, out, 4, mcclInt32, mcclSum, NULL, st), mcclInvalidArgument);
  // dtype and op out of range
  EXPECT_RES(mcclLabBroadcast(in, out, 4, (mcclDataType_t)mcclNumTypes, 0, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabAllGather(in, out, 4, (mcclDataType_t)-1, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabReduce(in, out, 4, mcclInt32, (mcclRedOp_t)mcclNumOps, 0, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabReduceScatter(in, out, 4, mcclInt32, (mcclRedOp_t)-1, c, st), mcclInvalidArgument);
  // root out of range
  EXPECT_RES(mcclLabBroadcast(in, out, 4, mcclInt32, 2, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabBroadcast(in, out, 4, mcclInt32, -1, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabReduce(in, out, 4, mcclInt32, mcclSum, 2, c, st), mcclInvalidArgument);
  // counts whose buffers overflow a size_t (AllGather and ReduceScatter: times nRanks)
  EXPECT_RES(mcclLabBroadcast(in, out, SIZE_MAX / 2, mcclInt32, 0, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabAllGather(in, out, SIZE_MAX / 8 + 1, mcclInt32, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabReduceScatter(in, out, SIZE_MAX / 8 + 1, mcclInt32, mcclSum, c, st), mcclInvalidArgument);
  // NULL buffers where the rank uses them; NULL where it does not is fine (count 0 too)
  EXPECT_RES(mcclLabBroadcast(NULL, out, 4, mcclInt32, 0, c, st), mcclInvalidArgument);  // rank 0 is the root
  EXPECT_RES(mcclLabBroadcast(in, NULL, 4, mcclInt32, 1, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabReduce(NULL, out, 4, mcclInt32, mcclSum, 1, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabReduce(in, NULL, 4, mcclInt32, mcclSum, 0, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabAllGather(NULL, out, 4, mcclInt32, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabAllGather(in, NULL, 4, mcclInt32, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabReduceScatter(NULL, out, 4, mcclInt32, mcclSum, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabReduceScatter(in, NULL, 4, mcclInt32, mcclSum, c, st), mcclInvalidArgument);
  EXPECT_OK(mcclLabAllGather(NULL, NULL, 0, mcclInt32, c, st));
  // overlapping buffers that are not the in-place layout
  EXPECT_RES(mcclLabBroadcast((char*)out + 4, out, 4, mcclInt32, 0, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabReduce((char*)out + 4, out, 4, mcclInt32, mcclSum, 0, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabAllGather((char*)out + 16, out, 4, mcclInt32, c, st), mcclInvalidArgument);  // rank 0's block: +0
  EXPECT_RES(mcclLabReduceScatter(in, (char*)in + 16, 4, mcclInt32, mcclSum, c, st), mcclInvalidArgument);
  // a bad MCCL_PROTO
  arForce(NULL, "ll256");
  EXPECT_RES(mcclLabAllGather(in, out, 4, mcclInt32, c, st), mcclInvalidArgument);
  arForce(NULL, NULL);
  EXPECT_CUDA_OK(cudaStreamSynchronize(st));
  // an aborted communicator
  EXPECT_OK(mcclLabCommAbort(c));
  EXPECT_RES(mcclLabBroadcast(in, out, 4, mcclInt32, 0, c, st), mcclInvalidUsage);
  EXPECT_RES(mcclLabReduceScatter(in, out, 4, mcclInt32, mcclSum, c, st), mcclInvalidUsage);
  enqTearDown(&s);
}

// One-shot AllGather and ReduceScatter (oneshot.cuh): on 2, 3 and 4 ranks, ReduceScatter of every type with every
// built-in operation (mpi_enqueue's everyFunctionTypeOp adds PreMulSum) and AllGather of types of every width, on
// counts of one element, of lines that end mid-word, and of a rank's part that fills the scratch (256 KiB); in and
// out of place. With no algorithm forced the table sends them to the one-shot LL kernel, a byte more than the
// scratch holds (2 ranks) to the ring; a group of three AllGathers shares one launch, an AllGather and a
// ReduceScatter in one group take two (a launch's works are of one function); MCCL_ALGO=oneshot forces it on the
// scratch's last line, and MCCL_ALGO=ring keeps the ring.
static void oneShotGathers(void) {
  const int maxN = enqRanksHere() < 4 ? enqRanksHere() : 4;
  if (maxN < 2) SKIP("needs 2 devices");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no signal area");
  static const size_t counts[] = {1, 7, 1021};
  const size_t cap = MCCL_ONESHOT_MAX_BYTES;
  int k = 0;
  for (int n = 2; n <= maxN && !mcclTestStopped(); n++) {
    struct enqSet s;
    enqSetUp(&s, n, 2, (cap + 16) * (size_t)n * 3);
    if (s.comm[0] == NULL || s.comm[0]->signalWin == NULL) {
      enqTearDown(&s);
      SKIP("no signal area");
    }
    for (int f = mcclFuncAllGather; f <= mcclFuncReduceScatter && !mcclTestStopped(); f++)
      for (int t = 0; t < mcclNumTypes && !mcclTestStopped(); t++)
        for (int op = 0; op < (f == mcclFuncAllGather ? 1 : mcclNumOps) && !mcclTestStopped(); op++, k++) {
          if (f == mcclFuncAllGather && t != mcclInt8 && t != mcclFloat16 && t != mcclFloat32 && t != mcclFloat64)
            continue;
          if (!mcclTestSampled((uint64_t)k, 3)) continue;
          const size_t es = mcclTypeSize((mcclDataType_t)t);
          const int full = k % 4 == 3;  // a rank's part fills the scratch
          const size_t count = full ? cap / es : counts[k % 3];
          arForce(NULL, NULL);
          struct enqCall c = {
              f, (mcclDataType_t)t, (mcclRedOp_t)op, k & 1, count, 0, (k >> 1) & 1, mcclTestSeed() + (uint64_t)k};
          runOne(&s, &c);
          for (int i = 0; i < n; i++) EXPECT_EQ(s.comm[i]->lastKernel, MCCL_KERNEL_ONESHOT_LL);
        }
    for (int f = mcclFuncAllGather; f <= mcclFuncReduceScatter && n == 2 && !mcclTestStopped(); f++) {
      // A byte more than the scratch holds: the ring (on 2 ranks only: the sim's ring is slow at this size).
      struct enqCall c = {f, mcclUint8, mcclSum, 0, cap + 1, 0, f == mcclFuncAllGather, mcclTestSeed() + (uint64_t)f};
      runOne(&s, &c);
      for (int i = 0; i < n; i++) EXPECT_EQ(s.comm[i]->lastKernel, MCCL_KERNEL_GENERIC);
    }
    struct enqCall g[3] = {{mcclFuncAllGather, mcclFloat32, mcclSum, 0, 1000, 0, 0, mcclTestSeed()},
                           {mcclFuncAllGather, mcclBfloat16, mcclSum, 0, 3, 0, 1, mcclTestSeed() + 1},
                           {mcclFuncAllGather, mcclInt8, mcclSum, 0, 4097, 0, 0, mcclTestSeed() + 2}};
    enqSetRun(&s, g, 3, 64 << 10, 1, 1);
    for (int i = 0; i < n; i++) EXPECT_EQ(s.comm[i]->lastKernel, MCCL_KERNEL_ONESHOT_LL);
    g[1] = (struct enqCall){mcclFuncReduceScatter, mcclBfloat16, mcclMax, 0, 333, 0, 0, mcclTestSeed() + 3};
    enqSetRun(&s, g, 2, 64 << 10, 1, 2);
    // Forced both ways on the same inputs: one-shot on the scratch's last line, the ring on a small count.
    arForce("oneshot", NULL);
    struct enqCall c = {mcclFuncReduceScatter, mcclFloat32, mcclSum, 0, cap / 4, 0, 1, mcclTestSeed() + 4};
    runOne(&s, &c);
    for (int i = 0; i < n; i++) EXPECT_EQ(s.comm[i]->lastKernel, MCCL_KERNEL_ONESHOT_LL);
    arForce("ring", NULL);
    c.count = 1021;
    runOne(&s, &c);
    for (int i = 0; i < n; i++) EXPECT_EQ(s.comm[i]->lastKernel, MCCL_KERNEL_GENERIC);
    arForce(NULL, NULL);
    enqTearDown(&s);
  }
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(everyTypeAndOp), MCCL_TEST_CASE(everyRoot), MCCL_TEST_CASE(awkwardCounts),
               MCCL_TEST_CASE(shmRing), MCCL_TEST_CASE(unalignedBuffers), MCCL_TEST_CASE(shiftedSlices),
               MCCL_TEST_CASE(ll128NeedsNvlink), MCCL_TEST_CASE(tableLl128Band), MCCL_TEST_CASE(threadThresholds),
               MCCL_TEST_CASE(oneShotGathers), MCCL_TEST_CASE(oneRank), MCCL_TEST_CASE(argumentChecks))
