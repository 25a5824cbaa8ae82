// Lab 08 mpirun tests: one machine poses as several hosts (net_pose.h). The tests run lab 07's
// collectives on a lab 07 communicator whose inter-host ring edges are NET (lab 08 is linked in).
#ifndef NET_TEST_UTIL_H_
#define NET_TEST_UTIL_H_

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "../../07_allreduce/tests/ar_mpi_util.h"
#include "../../07_allreduce/tests/comm_test_util.h"
#include "../../07_allreduce/tests/enq_test_util.h"
#include "mccl_net.h"
#include "mccl_test.h"
#include "mccl_test_mpi.h"
#include "net_pose.h"

// The first line of every test: no device or no MPI_THREAD_MULTIPLE (the proxy thread calls the
// net plugin, which calls MPI) is a SKIP with its reason.
#define NET_SKIP_UNLESS_READY()                    \
  do {                                             \
    if (mcclTestMpiDevice() < 0) SKIP("no CUDA device"); \
    MCCL_TEST_MPI_REQUIRE_THREAD_MULTIPLE();       \
  } while (0)

// Every ring edge's transport, through mcclNetRingTransports: NET exactly where the two ends are on
// different hosts, the edges that cross hosts as few as the ring allows (one per host), the same on
// both ends of every edge.
static inline void netCheckRing(const mcclLabComm* comm) {
  const int n = comm->nRanks, me = comm->rank;
  int nHosts = 0;
  EXPECT_OK(mcclNetCommHosts(comm, &nHosts));
  EXPECT_EQ(nHosts, (n + NET_RANKS_PER_HOST - 1) / NET_RANKS_PER_HOST);
  for (int c = 0; c < comm->nChannels; c++) {
    int send = -1, recv = -1;
    EXPECT_OK(mcclNetRingTransports(comm, c, &send, &recv));
    int sendCross = netHostOf(comm->ring.next) != netHostOf(me),
        recvCross = netHostOf(comm->ring.prev) != netHostOf(me);
    EXPECT_EQ(send == TRANSPORT_NET, sendCross);
    EXPECT_EQ(recv == TRANSPORT_NET, recvCross);
    if (!sendCross) EXPECT_TRUE(send == TRANSPORT_P2P || send == TRANSPORT_SHM);
    // The other end of my send edge receives over the same transport.
    int edges[2] = {send, recv}, all[2 * 64];
    MPI_Allgather(edges, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
    EXPECT_EQ(all[2 * comm->ring.next + 1], send);
    int crossing = 0;
    for (int r = 0; r < n; r++) crossing += all[2 * r] == TRANSPORT_NET;
    EXPECT_EQ(crossing, nHosts > 1 ? nHosts : 0);
  }
  EXPECT_EQ(comm->simpleOnly, 0);  // the default FIFOs: an LL slot fits a SIMPLE slot, so NET carries LL
}

// Steps that carried LL lines over NET, summed over every rank's send connections (mcclNetGetStats).
// A proxy counts a step when it sees its send complete, which may be after the receiver's kernel, and so
// the collective, has ended: each rank reads until its count stays put for 20 ms (at most 2 s), so that a
// call's tail is not counted as the next call's.
static inline uint64_t netLlStepsSent(const mcclLabComm* comm) {
  mcclNetStats sent;
  unsigned long long mine = ~0ull;
  for (int i = 0; i < 100; i++) {
    memset(&sent, 0, sizeof(sent));
    if (mcclNetGetStats(comm, &sent, NULL) != mcclSuccess)
      mcclTestFailAt(__FILE__, __LINE__, "mcclNetGetStats failed");
    if (sent.llSteps == mine) break;
    mine = sent.llSteps;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  unsigned long long all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

// The bootstrap between posed hosts goes over TCP (mcclBootstrapGetStats): rank 0 made the id on
// its host, so the ranks of other hosts reached its rendezvous over TCP; in a barrier (dissemination:
// round k sends to me + 2^k, receives from me - 2^k) exactly the messages to and from other hosts
// take TCP, the others the Unix socket.
static inline void netCheckBootstrapPaths(const mcclLabComm* comm) {
  const int n = comm->nRanks, me = comm->rank;
  mcclBootstrapStats st0, st1;
  EXPECT_OK(mcclBootstrapGetStats(comm->bootstrap, &st0));
  EXPECT_EQ(st0.rendezvousTcp, netHostOf(me) != netHostOf(0));
  EXPECT_OK(mcclBootstrapBarrier(comm->bootstrap));
  EXPECT_OK(mcclBootstrapGetStats(comm->bootstrap, &st1));
  uint64_t sendCross = 0, sendSame = 0, recvCross = 0, recvSame = 0;
  for (int mask = 1; mask < n; mask <<= 1) {
    int to = (me + mask) % n, from = (me - mask % n + n) % n;
    int toCross = netHostOf(to) != netHostOf(me), fromCross = netHostOf(from) != netHostOf(me);
    sendCross += (uint64_t)toCross;
    sendSame += (uint64_t)!toCross;
    recvCross += (uint64_t)fromCross;
    recvSame += (uint64_t)!fromCross;
  }
  EXPECT_EQ(st1.tcpSent - st0.tcpSent, sendCross);
  EXPECT_EQ(st1.unixSent - st0.unixSent, sendSame);
  EXPECT_EQ(st1.tcpReceived - st0.tcpReceived, recvCross);
  EXPECT_EQ(st1.unixReceived - st0.unixReceived, recvSame);
}
#endif
