// Lab 07's enqueue layer across processes under mpirun (2, 3 and 4 ranks): every function (AllReduce,
// Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter) x every type x every operation
// (PreMulSum with a host and a device scalar included) x in place and out of place, at counts 1, 7, 1023,
// one whose bytes are not a multiple of 16 and a large one; AllReduce's every path with the operations
// that scale (avg, PreMulSum) on every type; groups of mixed calls. Each rank checks its own output against
// the CPU reference (enq_test_util.h); the harness combines the verdicts.
#include "ar_mpi_util.h"
#include "enq_test_util.h"
#include "mccl_test.h"
#include "mccl_test_mpi.h"

static void setUpOrSkip(struct arMpi* m, int nChannels, size_t bytes) {
  if (mcclTestMpiDevice() < 0) SKIP("no CUDA device");
  arMpiSetUp(m, nChannels, bytes, mcclLocalTransports);
}

// One call on this rank (every rank makes the same one), checked here.
static void runOne(struct arMpi* m, const struct enqCall* c) {
  enqRunOnRank(c, m->comm, m->send, m->recv, m->host, m->bytes, m->stream);
}

#define LARGE 70001
static const size_t counts[] = {1, 7, 1023, 4099, LARGE};
#define NCOUNTS 5

// Every function x type x operation (the functions that do not reduce: one each), the counts, in/out of
// place and the root rotating with the combination, the table choosing the algorithm and protocol. A
// sanitizer build runs a seeded half (mcclTestSampled).
static void everyFunctionTypeOp(void) {
  struct arMpi m;
  setUpOrSkip(&m, 2, enqBufferBytes(LARGE, mcclFloat64, mcclTestMpiSize()));
  int k = 0;
  for (int fi = 0; fi < ENQ_NFUNCS && !mcclTestMpiAnyStopped(); fi++) {
    const int f = enqFuncs[fi];
    for (int t = 0; t < mcclNumTypes && !mcclTestMpiAnyStopped(); t++) {
      const int nOps = enqReduces(f) ? AR_NUM_OPS + 1 : 1;  // the built-in ones, then PreMulSum host / device
      for (int o = 0; o < nOps && !mcclTestMpiAnyStopped(); o++, k++) {
        if (!mcclTestSampled((uint64_t)k, 2)) continue;
        struct enqCall c = {f,
                            (mcclDataType_t)t,
                            o < mcclNumOps ? (mcclRedOp_t)o : AR_PREMULSUM,
                            o == AR_NUM_OPS,
                            counts[(k / 2) % NCOUNTS],
                            k % mcclTestMpiSize(),
                            k & 1,
                            mcclTestSeed() + (uint64_t)k};
        runOne(&m, &c);
      }
    }
  }
  arMpiTearDown(&m);
}

// AllReduce on every path (ring SIMPLE / LL, one-shot LL, two-shot, one-shot SIMPLE on 2 ranks) with the
// operations whose pre or post step differs per path's code (avg, PreMulSum host and device) on every
// type, and sum on the rest of the count range.
static void allReducePaths(void) {
  struct arMpi m;
  setUpOrSkip(&m, 2, enqBufferBytes(LARGE, mcclFloat64, mcclTestMpiSize()));
  static const mcclRedOp_t ops[] = {mcclAvg, AR_PREMULSUM, AR_PREMULSUM, mcclSum};
  int k = 0;
  for (int p = 0; p < AR_NPATHS && !mcclTestMpiAnyStopped(); p++) {
    if (!arPathRuns(&arPaths[p], mcclTestMpiSize())) continue;
    if (strcmp(arPaths[p].algo, "twoshot") == 0 && m.sendWin == NULL) continue;  // no windows without cuMem
    arForce(arPaths[p].algo, arPaths[p].proto);
    for (int t = 0; t < mcclNumTypes && !mcclTestMpiAnyStopped(); t++)
      for (int o = 0; o < 4 && !mcclTestMpiAnyStopped(); o++, k++) {
        if (!mcclTestSampled((uint64_t)k, 2)) continue;
        // Two-shot applies its own operation to every rank's input: a PreMulSum operation's scalar is each
        // rank's own, so two-shot refuses it (checked below).
        if (strcmp(arPaths[p].algo, "twoshot") == 0 && ops[o] == AR_PREMULSUM) continue;
        // one-shot: at most its scratch; the others the full range
        const size_t count = counts[k % (strncmp(arPaths[p].algo, "oneshot", 7) == 0 ? 4 : NCOUNTS)];
        struct enqCall c = {mcclFuncAllReduce,           (mcclDataType_t)t, ops[o], o == 2, count, 0, k & 1,
                            mcclTestSeed() + (uint64_t)k};
        runOne(&m, &c);
      }
  }
  // Forced two-shot with a PreMulSum operation: refused, nothing launched.
  if (m.sendWin && !mcclTestMpiAnyStopped()) {
    struct enqCall c = {mcclFuncAllReduce, mcclFloat32, AR_PREMULSUM, 0, 1024, 0, 0, mcclTestSeed()};
    mcclRedOp_t op;
    void* dev;
    const uint64_t launches = m.comm->nLaunches;
    arForce("twoshot", NULL);
    EXPECT_OK(enqCreateOp(&c, m.comm, &op, &dev));
    EXPECT_RES(mcclLabAllReduce(m.send, m.recv, 1024, mcclFloat32, op, m.comm, m.stream), mcclInvalidArgument);
    EXPECT_OK(mcclLabRedOpDestroy(op, m.comm));
    EXPECT_EQ(m.comm->nLaunches, launches);
  }
  arForce(NULL, NULL);
  arMpiTearDown(&m);
}

// A group of different calls on one stream: a plan of several works (the generic kernel's loop, the
// one-shot kernel's batch, point-to-point works after collectives), checked call by call. Each call has
// its own part of the buffers: the group's calls may run at the same time.
static void mixedGroup(void) {
  struct arMpi m;
  const int n = mcclTestMpiSize(), rank = mcclTestMpiRank();
  const size_t count = 1031, slot = enqBufferBytes(count, mcclFloat64, n);
  setUpOrSkip(&m, 2, 8 * slot);
  static const int funcs[] = {mcclFuncAllReduce, mcclFuncAllGather, mcclFuncAllReduce, mcclFuncReduceScatter,
                              mcclFuncAlltoAll,  mcclFuncBroadcast, mcclFuncAllReduce, mcclFuncGather};
  static const mcclDataType_t types[] = {mcclFloat32, mcclFloat32, mcclBfloat16, mcclFloat32,
                                         mcclInt64,   mcclUint8,   mcclFloat32,  mcclFloat8e4m3};
  for (int round = 0; round < 2 && !mcclTestMpiAnyStopped(); round++) {
    struct enqCall c[8];
    void *in[8], *out[8];
    char* host = (char*)m.host;
    for (int i = 0; i < 8; i++) {
      c[i] = (struct enqCall){funcs[i],
                              types[i],
                              i % 3 ? mcclSum : mcclMax,
                              0,
                              count,
                              (i + round) % n,
                              round,
                              mcclTestSeed() + (uint64_t)(16 * round + i)};
      int line = enqPrepare(&c[i], rank, n, (char*)m.send + i * slot, (char*)m.recv + i * slot, host, &in[i], &out[i]);
      if (line) mcclTestFailAt(__FILE__, line, "call %d: setting rank %d's buffers up", i, rank);
    }
    const uint64_t launches = m.comm->nLaunches;
    EXPECT_OK(mcclLabGroupStart());
    for (int i = 0; i < 8; i++) EXPECT_OK(enqIssueOp(&c[i], c[i].op, in[i], out[i], m.comm, m.stream));
    EXPECT_OK(mcclLabGroupEnd());
    EXPECT_CUDA_OK(cudaStreamSynchronize(m.stream));
    // fewer launches than calls: the generic kernel took several works (three types reduce: at most one
    // generic launch each, the AlltoAll's and Gather's point-to-point works joining the last)
    EXPECT_TRUE(m.comm->nLaunches - launches < 8);
    for (int i = 0; i < 8; i++) {
      char what[160], why[200];
      if (!enqVerify(&c[i], rank, n, out[i], why, sizeof(why))) continue;
      enqDescribe(&c[i], what, sizeof(what));
      mcclTestFailAt(__FILE__, __LINE__, "group round %d, call %d, %s: rank %d: %s", round, i, what, rank, why);
    }
  }
  arMpiTearDown(&m);
}

// NCCL's average of half-precision inputs near 40,000 on 4 ranks, on every AllReduce path and with
// ReduceScatter: each input times 1/4 first, so the sum stays in range (the plain sum, 160,000, is past
// half's 65,504); the result is the exact mean, bit for bit, as NCCL's.
static void halfAverageNoOverflow(void) {
  if (mcclTestMpiSize() != 4) SKIP("runs on 4 ranks");
  const int n = 4, rank = mcclTestMpiRank();
  const size_t count = 1024;
  struct arMpi m;
  setUpOrSkip(&m, 2, count * 2 * n);
  uint16_t in[4][1024 * 4], out[1024];
  for (int r = 0; r < n; r++)  // multiples of 128 in [39936, 40320]: x / 4 and every partial sum exact in half
    for (size_t e = 0; e < count * n; e++)
      mcclEltSet(mcclFloat16, in[r], e, 39936.0 + 128.0 * (double)((e + (size_t)r) % 4));
  for (int p = 0; p <= AR_NPATHS && !mcclTestMpiAnyStopped(); p++) {
    const int rs = p == AR_NPATHS;  // ReduceScatter after the AllReduce paths
    if (!rs && !arPathRuns(&arPaths[p], n)) continue;
    if (!rs && strcmp(arPaths[p].algo, "twoshot") == 0 && m.sendWin == NULL) continue;
    arForce(rs ? NULL : arPaths[p].algo, rs ? NULL : arPaths[p].proto);
    EXPECT_CUDA_OK(mcclTestCopyToDevice(m.send, in[rank], count * 2 * (rs ? n : 1)));
    if (rs)
      EXPECT_OK(mcclLabReduceScatter(m.send, m.recv, count, mcclFloat16, mcclAvg, m.comm, m.stream));
    else
      EXPECT_OK(mcclLabAllReduce(m.send, m.recv, count, mcclFloat16, mcclAvg, m.comm, m.stream));
    EXPECT_CUDA_OK(cudaStreamSynchronize(m.stream));
    EXPECT_CUDA_OK(cudaMemcpy(out, m.recv, count * 2, cudaMemcpyDeviceToHost));
    for (size_t e = 0; e < count; e++) {
      const size_t at = rs ? (size_t)rank * count + e : e;
      double want = 0;
      for (int r = 0; r < n; r++) want += mcclEltGet(mcclFloat16, in[r], at) / 4;
      double got = mcclEltGet(mcclFloat16, out, e);
      if (got != want) {
        mcclTestFailAt(__FILE__, __LINE__, "%s: rank %d element %zu: expected %g, got %g",
                       rs ? "ReduceScatter" : arPaths[p].name, rank, e, want, got);
        break;
      }
    }
  }
  arForce(NULL, NULL);
  arMpiTearDown(&m);
}

MCCL_TEST_MAIN_MPI(MCCL_TEST_CASE(everyFunctionTypeOp), MCCL_TEST_CASE(allReducePaths), MCCL_TEST_CASE(mixedGroup),
                   MCCL_TEST_CASE(halfAverageNoOverflow))
