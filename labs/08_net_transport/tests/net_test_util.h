// Lab 08 mpirun tests: one machine poses as several hosts (net_pose.h). The tests run lab 07's
// collectives on a lab 07 communicator whose inter-host ring edges are NET (lab 08 is linked in).
#ifndef NET_TEST_UTIL_H_
#define NET_TEST_UTIL_H_

#include <stdio.h>
#include <stdlib.h>
#include "../../07_allreduce/tests/ar_mpi_util.h"
#include "../../07_allreduce/tests/coll_test_util.h"
#include "mccl_net.h"
#include "mccl_test.h"
#include "mccl_test_mpi.h"
#include "net_pose.h"

// The first line of every test: no device or no MPI_THREAD_MULTIPLE (the proxy thread calls the
// net plugin, which calls MPI) is a SKIP with its reason.
#define NET_SKIP_UNLESS_READY()                    \
  do {                                             \
    if (arMpiDevice() < 0) SKIP("no CUDA device"); \
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
  EXPECT_EQ(comm->simpleOnly, nHosts > 1);
}
#endif
