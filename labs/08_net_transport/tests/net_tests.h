// The lab 08 mpirun test cases, shared by mpi_net_2hosts.c and mpi_net_4hosts.c (which pose as
// different host layouts through NET_RANKS_PER_HOST).
#ifndef NET_TESTS_H_
#define NET_TESTS_H_
#include "net_test_util.h"

static void ringTransports(void) {
  struct arMpi m;
  netSetUpOrSkip(&m, 2, 4096);
  if (!mcclTestStopped()) netCheckRing(m.comm);
  int send = 0, recv = 0;
  if (!mcclTestStopped()) EXPECT_RES(mcclNetRingTransports(m.comm, 2, &send, &recv), mcclInvalidArgument);
  EXPECT_RES(mcclNetRingTransports(NULL, 0, &send, &recv), mcclInvalidArgument);
  arMpiTearDown(&m);
}

// The ring allreduce across the hosts, small FIFOs (many wraps) and the default ones (slices over
// several steps); asking for LL gets SIMPLE on a NET ring, with the same result.
static void allreduce(void) {
  static const size_t counts[] = {0, 1, 7, 1021, 70001};
  for (int small = 1; small >= 0 && !mcclTestStopped(); small--) {
    arSmallFifos(small);
    struct arMpi m;
    netSetUpOrSkip(&m, 2, 70001 * 8);
    int k = 0;
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]) && !mcclTestStopped(); ci++)
      for (int p = 0; p < 2 && !mcclTestStopped(); p++, k++)
        arMpiRun(&m, &arPaths[p], k & 1 ? mcclInt32 : mcclFloat32, k % 3 ? mcclSum : mcclMax, counts[ci], k & 2,
                 mcclTestSeed() + (uint64_t)k);
    arMpiTearDown(&m);
  }
  arSmallFifos(0);
  arForce(NULL, NULL);
}

// AllGather, ReduceScatter, Broadcast and Reduce across the hosts against the CPU reference.
static void collectives(void) {
  arSmallFifos(1);
  struct arMpi m;
  netSetUpOrSkip(&m, 2, 4099 * 8 * (size_t)mcclTestMpiSize());
  int k = 0;
  for (int f = 0; f < collNumFuncs && !mcclTestStopped(); f++)
    for (int ci = 0; ci < 2 && !mcclTestStopped(); ci++, k++) {
      struct collCall c = {f,     k & 1 ? mcclFloat64 : mcclInt32, mcclSum, ci ? 4099 : 5, k % mcclTestMpiSize(),
                           k & 1, mcclTestSeed() + (uint64_t)k};
      void *in, *out;
      char what[128], why[200];
      collDescribe(&c, what, sizeof(what));
      int line = collPrepare(&c, m.comm->rank, m.comm->nRanks, m.send, m.recv, m.host, &in, &out);
      if (line) {
        mcclTestFailAt(__FILE__, line, "%s: setting the buffers up", what);
        break;
      }
      EXPECT_OK(collIssue(&c, in, out, m.comm, m.stream));
      EXPECT_CUDA_OK(cudaStreamSynchronize(m.stream));
      if (collVerify(&c, m.comm->rank, m.comm->nRanks, out, why, sizeof(why)))
        mcclTestFailAt(__FILE__, __LINE__, "%s: rank %d: %s", what, m.comm->rank, why);
    }
  arMpiTearDown(&m);
  arSmallFifos(0);
}

// A communicator with NET edges leaves nothing behind: no fd, no /dev/shm file (the plugin's MPI
// communicator lives as long as the process, as NCCL's plugin stays loaded).
static void noLeak(void) {
  if (arMpiDevice() < 0) SKIP("no CUDA device");
  MPI_Barrier(MPI_COMM_WORLD);
  int fds = mcclTestCountDir("/proc/self/fd"), shm = mcclTestCountShm();
  for (int i = 0; i < 2 && !mcclTestStopped(); i++) {
    struct arMpi m;
    arMpiSetUp(&m, 2, 4096);
    if (!mcclTestStopped()) arMpiRun(&m, &arPaths[0], mcclFloat32, mcclSum, 1000, 0, mcclTestSeed());
    arMpiTearDown(&m);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(mcclTestCountDir("/proc/self/fd"), fds);
  EXPECT_EQ(mcclTestCountShm(), shm);
}

#define NET_TEST_CASES \
  MCCL_TEST_CASE(ringTransports), MCCL_TEST_CASE(allreduce), MCCL_TEST_CASE(collectives), MCCL_TEST_CASE(noLeak)
#endif
