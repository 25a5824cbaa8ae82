// Lab 07 allreduce across processes under mpirun (2, 3 and 4 ranks): every path (ring SIMPLE, ring
// LL, one-shot, two-shot) on awkward counts in and out of place, every dtype x op on one path each,
// the ring over SHM, and calls back to back with changing sizes and paths; checked on every rank
// against the CPU reference (ar_test_util.h).
#include "ar_mpi_util.h"

static void setUpOrSkip(struct arMpi* m, int nChannels, size_t bytes) {
  if (mcclTestMpiDevice() < 0) SKIP("no CUDA device");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no windows");
  arMpiSetUp(m, nChannels, bytes, mcclLocalTransports);
}

static void everyPathAwkwardCounts(void) {
  static const size_t counts[] = {0, 1, 7, 131, 1021, 4099};
  struct arMpi m;
  arSmallFifos(1);
  setUpOrSkip(&m, 2, 4099 * 8);
  uint64_t seed = mcclTestSeed();
  int k = 0;
  for (int p = 0; p < AR_NPATHS && !mcclTestMpiAnyStopped(); p++)
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]) && !mcclTestMpiAnyStopped(); c++, k++)
      arMpiRun(&m, &arPaths[p], k & 1 ? mcclFloat64 : mcclUint8, k % 3 ? mcclSum : mcclAvg, counts[c], k & 2 ? 1 : 0,
               seed + (uint64_t)k);
  arSmallFifos(0);
  arForce(NULL, NULL);
  arMpiTearDown(&m);
}

// Every dtype x op, each on one path in turn (the one-process test runs the full cross product).
static void everyTypeAndOp(void) {
  struct arMpi m;
  setUpOrSkip(&m, 1, 257 * 8);
  uint64_t seed = mcclTestSeed();
  for (int t = 0; t < mcclNumTypes && !mcclTestMpiAnyStopped(); t++)
    for (int op = 0; op < mcclNumOps && !mcclTestMpiAnyStopped(); op++)
      if (mcclTestSampled((uint64_t)(t * mcclNumOps + op), 3))
        arMpiRun(&m, &arPaths[(t + op) % AR_NPATHS], (mcclDataType_t)t, (mcclRedOp_t)op, 257, (t + op) & 1,
                 seed + (uint64_t)(t * 8 + op));
  arForce(NULL, NULL);
  arMpiTearDown(&m);
}

static void shmRing(void) {
  struct arMpi m;
  setenv("MCCL_P2P_DISABLE", "1", 1);
  mcclParamResetAll();
  setUpOrSkip(&m, 2, 3001 * 4);
  if (!mcclTestStopped() && m.comm->nRanks > 1) EXPECT_EQ(m.comm->transport[0], TRANSPORT_SHM);
  for (int p = 0; p < 2 && !mcclTestMpiAnyStopped(); p++)
    arMpiRun(&m, &arPaths[p], mcclInt32, mcclSum, 3001, p, mcclTestSeed());
  unsetenv("MCCL_P2P_DISABLE");
  arForce(NULL, NULL);
  arMpiTearDown(&m);
}

// 200 calls back to back, 50 in a sanitizer build (with a host wait per call here: the one-process
// test pipelines 1000).
static void backToBack(void) {
  struct arMpi m;
  setUpOrSkip(&m, 1, 600 * 4);
  uint64_t seed = mcclTestSeed();
  const int calls = mcclTestSampling() ? 50 : 200;
  for (int i = 0; i < calls && !mcclTestMpiAnyStopped(); i++)
    arMpiRun(&m, &arPaths[i % AR_NPATHS], mcclInt32, (mcclRedOp_t)(i / AR_NPATHS % mcclNumOps),
             (size_t)(arMix(seed + (uint64_t)i) % 601), i % 3 == 0, seed + (uint64_t)i);
  arForce(NULL, NULL);
  arMpiTearDown(&m);
}

MCCL_TEST_MAIN_MPI(MCCL_TEST_CASE(everyPathAwkwardCounts), MCCL_TEST_CASE(everyTypeAndOp), MCCL_TEST_CASE(shmRing),
                   MCCL_TEST_CASE(backToBack))
