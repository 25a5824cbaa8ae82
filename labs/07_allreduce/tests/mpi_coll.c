// Lab 07's other ring collectives across processes under mpirun (2, 3 and 4 ranks): every
// collective on both protocols, in place and out of place, on counts 0, 1, odd, prime and not
// divisible by ranks x channels; every root of Broadcast and Reduce; every dtype x op of Reduce and
// ReduceScatter; the ring over SHM. Each rank checks its own output against the CPU reference
// (enq_test_util.h); the harness combines the verdicts.
#include "ar_mpi_util.h"
#include "enq_test_util.h"
#include "mccl_test.h"
#include "mccl_test_mpi.h"

// The mpirun world of the allreduce tests (ar_mpi_util.h): a communicator, send and recv buffers
// (mcclMemAlloc; registered as windows where cuMem allows, which these collectives do not need) and a
// stream.
static void setUpOrSkip(struct arMpi* m, int nChannels, size_t bytes) {
  if (mcclTestMpiDevice() < 0) SKIP("no CUDA device");
  arMpiSetUp(m, nChannels, bytes, mcclLocalTransports);
}

// LL128 last: the SHM runs take the first two (SHM has no LL128 FIFO).
static const char* const protos[3] = {"simple", "ll", "ll128"};

// One call on this rank (every rank makes the same one), checked here.
static void runOne(struct arMpi* m, const struct enqCall* c) {
  enqRunOnRank(c, m->comm, m->send, m->recv, m->host, m->bytes, m->stream);
}

// Every collective x protocol x count x in/out of place; small FIFOs and 2 channels.
static void awkwardCounts(void) {
  static const size_t counts[] = {0, 1, 7, 131, 1021, 4099};
  static const mcclDataType_t types[] = {mcclUint8, mcclFloat64, mcclInt32, mcclFloat16};
  arSmallFifos(1);
  struct arMpi m;
  setUpOrSkip(&m, 2, 4099 * 8 * (size_t)mcclTestMpiSize());
  int k = 0;
  for (int f = mcclFuncBroadcast; f <= mcclFuncReduceScatter && !mcclTestMpiAnyStopped(); f++)
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]) && !mcclTestMpiAnyStopped(); ci++)
      for (int inPlace = 0; inPlace < 2 && !mcclTestMpiAnyStopped(); inPlace++, k++) {
        if (!mcclTestSampled((uint64_t)k, 2)) continue;
        arForce(NULL, protos[(k >> 1) % 3]);
        struct enqCall c = {f,
                            types[k % 4],
                            k % 3 ? mcclSum : mcclAvg,
                            0,
                            counts[ci],
                            k % mcclTestMpiSize(),
                            inPlace,
                            mcclTestSeed() + (uint64_t)k};
        runOne(&m, &c);
      }
  arSmallFifos(0);
  arForce(NULL, NULL);
  arMpiTearDown(&m);
}

// Broadcast and Reduce from every root, both protocols.
static void everyRoot(void) {
  struct arMpi m;
  setUpOrSkip(&m, 1, 777 * 8);
  int k = 0;
  for (int f = mcclFuncBroadcast; f <= mcclFuncReduce && !mcclTestMpiAnyStopped(); f++)
    for (int root = 0; root < mcclTestMpiSize() && !mcclTestMpiAnyStopped(); root++)
      for (int p = 0; p < 3 && !mcclTestMpiAnyStopped(); p++, k++) {
        arForce(NULL, protos[p]);
        struct enqCall c = {f,    mcclFloat32,  k & 1 ? mcclProd : mcclMin,  0, 777,
                            root, (k >> 1) & 1, mcclTestSeed() + (uint64_t)k};
        runOne(&m, &c);
      }
  arForce(NULL, NULL);
  arMpiTearDown(&m);
}

// Reduce and ReduceScatter on every dtype x op, the protocol, root and placement changing from call
// to call (the one-process test covers the same cross product on 4 ranks).
static void everyTypeAndOp(void) {
  struct arMpi m;
  setUpOrSkip(&m, 1, 101 * 8 * (size_t)mcclTestMpiSize());
  int k = 0;
  for (int f = mcclFuncReduce; f <= mcclFuncReduceScatter && !mcclTestMpiAnyStopped();
       f += mcclFuncReduceScatter - mcclFuncReduce)
    for (int t = 0; t < mcclNumTypes && !mcclTestMpiAnyStopped(); t++)
      for (int op = 0; op < mcclNumOps && !mcclTestMpiAnyStopped(); op++, k++) {
        if (!mcclTestSampled((uint64_t)k, 3)) continue;
        arForce(NULL, protos[k % 3]);
        struct enqCall c = {f,   (mcclDataType_t)t,     (mcclRedOp_t)op, 0,
                            101, k % mcclTestMpiSize(), (k >> 1) & 1,    mcclTestSeed() + (uint64_t)k};
        runOne(&m, &c);
      }
  arForce(NULL, NULL);
  arMpiTearDown(&m);
}

// The ring over SHM (MCCL_P2P_DISABLE=1): every collective, both protocols.
static void shmRing(void) {
  setenv("MCCL_P2P_DISABLE", "1", 1);
  mcclParamResetAll();
  struct arMpi m;
  setUpOrSkip(&m, 2, 2003 * 4 * (size_t)mcclTestMpiSize());
  if (!mcclTestStopped() && m.comm->nRanks > 1) EXPECT_EQ(m.comm->transport[0], TRANSPORT_SHM);
  for (int f = mcclFuncBroadcast; f <= mcclFuncReduceScatter && !mcclTestMpiAnyStopped(); f++)
    for (int p = 0; p < 2 && !mcclTestMpiAnyStopped(); p++) {
      arForce(NULL, protos[p]);
      struct enqCall c = {f, mcclInt32, mcclSum, 0, 2003, (f + p) % mcclTestMpiSize(), p, mcclTestSeed() + (uint64_t)f};
      runOne(&m, &c);
    }
  unsetenv("MCCL_P2P_DISABLE");
  arForce(NULL, NULL);
  arMpiTearDown(&m);
}

MCCL_TEST_MAIN_MPI(MCCL_TEST_CASE(awkwardCounts), MCCL_TEST_CASE(everyRoot), MCCL_TEST_CASE(everyTypeAndOp),
                   MCCL_TEST_CASE(shmRing))
