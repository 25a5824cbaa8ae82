// The lab 08 mpirun test cases, shared by mpi_net_2hosts.c and mpi_net_4hosts.c (which pose as
// different host layouts through NET_RANKS_PER_HOST).
#ifndef NET_TESTS_H_
#define NET_TESTS_H_
#include "net_test_util.h"

static void ringTransports(void) {
  NET_SKIP_UNLESS_READY();
  struct arMpi m;
  arMpiSetUp(&m, 2, 4096, mcclTransports);
  if (!mcclTestStopped()) netCheckRing(m.comm);
  if (!mcclTestStopped()) netCheckBootstrapPaths(m.comm);
  int send = 0, recv = 0;
  if (!mcclTestStopped()) EXPECT_RES(mcclNetRingTransports(m.comm, 2, &send, &recv), mcclInvalidArgument);
  EXPECT_RES(mcclNetRingTransports(NULL, 0, &send, &recv), mcclInvalidArgument);
  if (!mcclTestStopped()) EXPECT_RES(mcclNetRingTransports(m.comm, 0, NULL, &recv), mcclInvalidArgument);
  int hosts = 0;
  EXPECT_RES(mcclNetCommHosts(NULL, &hosts), mcclInvalidArgument);
  if (!mcclTestStopped()) EXPECT_RES(mcclNetCommHosts(m.comm, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclNetGet(NULL), mcclInvalidArgument);
  mcclNetStats st;
  EXPECT_RES(mcclNetGetStats(NULL, &st, &st), mcclInvalidArgument);
  if (!mcclTestStopped()) EXPECT_OK(mcclNetGetStats(m.comm, NULL, NULL));  // neither wanted: nothing to do
  arMpiTearDown(&m);
}

// The ring allreduce across the hosts: small FIFOs (512-byte slots: slices of two steps, LL steps of
// 32 lines, every FIFO wrapping several times at 4099 elements) on counts from 0 up, then the default
// FIFOs (a slice within one step); SIMPLE (arPaths[0]) and LL (arPaths[1]) both cross the network,
// and the proxies' counts say which did: an LL call moved steps of LL lines (mcclNetGetStats), a
// SIMPLE call none. Every ring hop is a message through two proxies and a call costs its hops'
// latency more than its bytes, so each count runs once, the paths alternating (both at 4099); dtype,
// op and placement vary with the call. Sanitizer builds run a seeded half of the calls
// (mcclTestSampled).
static void allreduce(void) {
  NET_SKIP_UNLESS_READY();
  static const struct {
    int small;
    size_t count;
    int path;
  } calls[] = {{1, 0, 0}, {1, 1, 1}, {1, 7, 0}, {1, 1021, 1}, {1, 4099, 0}, {1, 4099, 1}, {0, 1021, 1}, {0, 70001, 0}};
  struct arMpi m;
  int open = -1;  // the FIFO size of the communicator m, when one is open
  for (int k = 0; k < (int)(sizeof(calls) / sizeof(calls[0])) && !mcclTestStopped(); k++) {
    if (calls[k].small != open) {
      if (open >= 0) arMpiTearDown(&m);
      arSmallFifos(calls[k].small);
      arMpiSetUp(&m, 2, 70001 * 8, mcclTransports);
      open = calls[k].small;
    }
    if (!mcclTestStopped() && mcclTestSampled((uint64_t)k, 2)) {  // not after a failed set-up (m.comm NULL)
      uint64_t before = netLlStepsSent(m.comm);
      arMpiRun(&m, &arPaths[calls[k].path], k & 1 ? mcclInt32 : mcclFloat32, k % 3 ? mcclSum : mcclMax, calls[k].count,
               k & 2, mcclTestSeed() + (uint64_t)k);
      uint64_t moved = netLlStepsSent(m.comm) - before;
      if (calls[k].path == 1 && calls[k].count > 0 && moved == 0)
        mcclTestFailAt(__FILE__, __LINE__, "an LL allreduce of %zu elements moved no LL step over NET", calls[k].count);
      if (calls[k].path == 0 && moved != 0)
        mcclTestFailAt(__FILE__, __LINE__, "a SIMPLE allreduce moved %llu LL steps over NET",
                       (unsigned long long)moved);
    }
  }
  if (open >= 0) arMpiTearDown(&m);
  arSmallFifos(0);
  arForce(NULL, NULL);
}

// AllGather, ReduceScatter, Broadcast and Reduce across the hosts against the CPU reference (small
// FIFOs: 1021 doubles wrap them; a seeded half of the calls under a sanitizer).
static void collectives(void) {
  NET_SKIP_UNLESS_READY();
  arSmallFifos(1);
  struct arMpi m;
  arMpiSetUp(&m, 2, 1021 * 8 * (size_t)mcclTestMpiSize(), mcclTransports);
  int k = 0;
  for (int f = mcclFuncBroadcast; f <= mcclFuncReduceScatter && !mcclTestStopped(); f++)
    for (int ci = 0; ci < 2 && !mcclTestStopped(); ci++, k++) {
      if (!mcclTestSampled((uint64_t)k, 2)) continue;
      struct enqCall c = {f,     k & 1 ? mcclFloat64 : mcclInt32, mcclSum, 0, ci ? 1021 : 5, k % mcclTestMpiSize(),
                          k & 1, mcclTestSeed() + (uint64_t)k};
      enqRunOnRank(&c, m.comm, m.send, m.recv, m.host, m.bytes, m.stream);
    }
  arMpiTearDown(&m);
  arSmallFifos(0);
}

// The protocol a communicator across hosts picks by itself (no MCCL_PROTO): LL up to MCCL_NET_LL_MAX
// (16 KiB), SIMPLE above (LL lines halve what each network byte carries), by the steps that crossed.
static void tableProtocol(void) {
  NET_SKIP_UNLESS_READY();
  static const struct arPath table = {"table", NULL, NULL, 0};
  struct arMpi m;
  arMpiSetUp(&m, 2, 8192 * 4, mcclTransports);
  if (!mcclTestStopped()) EXPECT_EQ(m.comm->multiHost, 1);
  const size_t counts[] = {2, 4096, 4097, 8192};  // 8 B, 16 KiB: LL; 16 KiB + 4 B, 32 KiB: SIMPLE
  for (int k = 0; k < 4 && !mcclTestStopped(); k++) {
    uint64_t before = netLlStepsSent(m.comm);
    arMpiRun(&m, &table, mcclFloat32, mcclSum, counts[k], k & 1, mcclTestSeed() + (uint64_t)k);
    uint64_t moved = netLlStepsSent(m.comm) - before;
    if ((counts[k] * 4 <= (16u << 10)) != (moved > 0))
      mcclTestFailAt(__FILE__, __LINE__, "an allreduce of %zu bytes across hosts moved %llu LL steps", counts[k] * 4,
                     (unsigned long long)moved);
  }
  arMpiTearDown(&m);
}

// Where an LL step does not fit a SIMPLE slot (MCCL_LL_BUFFSIZE above MCCL_BUFFSIZE), NET cannot take
// LL (its receiving proxy lands every step in a SIMPLE slot): every rank stays on SIMPLE, also one
// without a NET edge of its own (the middle rank of a host in mpi_net_3plus1, which alone would pick
// LL and hang with its neighbours). Asking for LL then gives SIMPLE, no LL step, the right result.
static void llDoesNotFit(void) {
  NET_SKIP_UNLESS_READY();
  setenv("MCCL_BUFFSIZE", "4096", 1);
  setenv("MCCL_LL_BUFFSIZE", "8192", 1);
  mcclParamResetAll();
  struct arMpi m;
  arMpiSetUp(&m, 2, 4099 * 8, mcclTransports);
  if (!mcclTestStopped()) {
    EXPECT_EQ(m.comm->simpleOnly, 1);
    uint64_t before = netLlStepsSent(m.comm);
    arMpiRun(&m, &arPaths[1], mcclFloat32, mcclSum, 4099, 0, mcclTestSeed());
    EXPECT_EQ(netLlStepsSent(m.comm) - before, 0);
  }
  arMpiTearDown(&m);
  arSmallFifos(0);
  arForce(NULL, NULL);
}

// The channel count a communicator across hosts takes by default (nChannels 0, MCCL_NCHANNELS unset):
// MCCL_LAB_MULTIHOST_NCHANNELS, not the backend's 64 on cuda (each channel is a NET connection per
// direction that the proxy serves in turn; on the sim the two defaults agree, so only a GPU run tells
// them apart); a count the caller names is kept. The ring allreduce runs on both.
static void channelsAcrossHosts(void) {
  NET_SKIP_UNLESS_READY();
  if (getenv("MCCL_NCHANNELS")) SKIP("MCCL_NCHANNELS is set: the default is not in play");
  struct arMpi m;
  arMpiSetUp(&m, 0, 4096, mcclTransports);
  if (!mcclTestStopped()) {
    EXPECT_EQ(m.comm->nChannels, MCCL_LAB_MULTIHOST_NCHANNELS);
    arMpiRun(&m, &arPaths[0], mcclFloat32, mcclSum, 1000, 0, mcclTestSeed());
  }
  arMpiTearDown(&m);
  arMpiSetUp(&m, 3, 4096, mcclTransports);
  if (!mcclTestStopped()) {
    EXPECT_EQ(m.comm->nChannels, 3);
    arMpiRun(&m, &arPaths[0], mcclInt32, mcclMax, 1021, 1, mcclTestSeed() + 1);
  }
  arMpiTearDown(&m);
}

// A window registered across hosts (lab 07's mcclLabWindowRegister, as nccl-tests -R 2 and the
// drop-in's ncclCommWindowRegister do): it succeeds, maps the buffers of this host's ranks (read back
// through the mapping) and none of another host's, whose memory is not reachable (before this was
// checked, posed hosts mapped each other's buffers, and real hosts failed to reach the peer's proxy);
// the symmetric algorithms stay off (no signal area), so forcing one is refused and the ring serves
// the call on the window's buffers.
static void windowAcrossHosts(void) {
  NET_SKIP_UNLESS_READY();
  struct arMpi m;
  arMpiSetUp(&m, 2, 4096, mcclTransports);
  if (!mcclTestStopped() && m.sendWin == NULL) {
    arMpiTearDown(&m);
    SKIP("cuMem off: no windows");
  }
  if (!mcclTestStopped()) {
    const mcclLabComm* c = m.comm;
    EXPECT_TRUE(c->signalWin == NULL);
    EXPECT_EQ(ctWindowFill(c, m.send, 64), 0);
    EXPECT_CUDA_OK(cudaDeviceSynchronize());
    MPI_Barrier(MPI_COMM_WORLD);
    char* dev[MCCL_LAB_MAX_RANKS];
    EXPECT_CUDA_OK(cudaMemcpy(dev, m.sendWin->devPeerPtrs, sizeof(char*) * (size_t)c->nRanks, cudaMemcpyDeviceToHost));
    for (int p = 0; p < c->nRanks; p++) {
      int sameHost = netHostOf(p) == netHostOf(c->rank);
      EXPECT_EQ(m.sendWin->peerPtrs[p] != NULL, sameHost);
      EXPECT_TRUE(dev[p] == (char*)m.sendWin->peerPtrs[p]);
      if (!sameHost || m.sendWin->peerPtrs[p] == NULL) continue;
      uint64_t host[64];
      EXPECT_CUDA_OK(cudaMemcpy(host, m.sendWin->peerPtrs[p], sizeof(host), cudaMemcpyDeviceToHost));
      for (int i = 0; i < 64; i++)
        if (host[i] != (((uint64_t)p << 32) | (uint64_t)i)) {
          mcclTestFailAt(__FILE__, __LINE__, "rank %d: word %d of rank %d's window reads %#llx", c->rank, i, p,
                         (unsigned long long)host[i]);
          break;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);  // every rank read the buffers before the allreduce overwrites them
    // The symmetric paths need every peer mapped (invalid argument); the ring's LL128 needs an LL128 FIFO,
    // which a NET edge has not (invalid usage).
    for (int a = 2; a < AR_NPATHS && !mcclTestStopped(); a++) {
      arForce(arPaths[a].algo, arPaths[a].proto);
      EXPECT_RES(mcclLabAllReduce(m.send, m.recv, 16, mcclFloat32, mcclSum, m.comm, m.stream),
                 strcmp(arPaths[a].algo, "ring") == 0 ? mcclInvalidUsage : mcclInvalidArgument);
    }
    arForce(NULL, NULL);
    if (!mcclTestStopped()) arMpiRun(&m, &arPaths[0], mcclFloat32, mcclSum, 1000, 0, mcclTestSeed());
  }
  arMpiTearDown(&m);
}

// A communicator with NET edges leaves nothing behind: no fd, no /dev/shm file (the plugin's MPI
// communicator lives as long as the process, as NCCL's plugin stays loaded).
static void noLeak(void) {
  NET_SKIP_UNLESS_READY();
  MPI_Barrier(MPI_COMM_WORLD);
  int fds = mcclTestCountDir("/proc/self/fd"), shm = mcclTestCountShm();
  for (int i = 0; i < 2 && !mcclTestStopped(); i++) {
    struct arMpi m;
    arMpiSetUp(&m, 2, 4096, mcclTransports);
    if (!mcclTestStopped()) arMpiRun(&m, &arPaths[0], mcclFloat32, mcclSum, 1000, 0, mcclTestSeed());
    arMpiTearDown(&m);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(mcclTestCountDir("/proc/self/fd"), fds);
  EXPECT_EQ(mcclTestCountShm(), shm);
}

#define NET_TEST_CASES                                                                                  \
  MCCL_TEST_CASE(ringTransports), MCCL_TEST_CASE(allreduce), MCCL_TEST_CASE(collectives),               \
      MCCL_TEST_CASE(tableProtocol), MCCL_TEST_CASE(llDoesNotFit), MCCL_TEST_CASE(channelsAcrossHosts), \
      MCCL_TEST_CASE(windowAcrossHosts), MCCL_TEST_CASE(noLeak)
#endif
