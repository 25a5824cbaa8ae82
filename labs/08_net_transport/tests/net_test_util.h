// Lab 08 mpirun tests: one machine poses as several hosts. Before main, every rank sets MCCL_HOSTID
// from its world rank (Open MPI's OMPI_COMM_WORLD_RANK): ranks r and r' are on one "host" when
// r / NET_RANKS_PER_HOST == r' / NET_RANKS_PER_HOST. The tests then run lab 07's collectives on a
// lab 07 communicator whose inter-host ring edges are NET (lab 08 is linked in).
#ifndef NET_TEST_UTIL_H_
#define NET_TEST_UTIL_H_

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include "../../07_allreduce/tests/ar_mpi_util.h"
#include "../../07_allreduce/tests/coll_test_util.h"
#include "mccl_net.h"
#include "mccl_test.h"
#include "mccl_test_mpi.h"

#ifndef NET_RANKS_PER_HOST
#error "define NET_RANKS_PER_HOST before including net_test_util.h"
#endif

__attribute__((constructor)) static void netPoseHosts(void) {
  const char* r = getenv("OMPI_COMM_WORLD_RANK");
  if (r == NULL) return;  // --list, or not under mpirun: one host
  char id[64];
  snprintf(id, sizeof(id), "mccl-pose-host-%d", atoi(r) / NET_RANKS_PER_HOST);
  setenv("MCCL_HOSTID", id, 1);
}

static inline int netHostOf(int rank) {
  return rank / NET_RANKS_PER_HOST;
}

static inline int netCountFds(void) {
  DIR* d = opendir("/proc/self/fd");
  int n = 0;
  if (d == NULL) return -1;
  while (readdir(d) != NULL) n++;
  closedir(d);
  return n;
}

static inline void netSetUpOrSkip(struct arMpi* m, int nChannels, size_t bytes) {
  if (arMpiDevice() < 0) SKIP("no CUDA device");
  arMpiSetUp(m, nChannels, bytes);
}

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
