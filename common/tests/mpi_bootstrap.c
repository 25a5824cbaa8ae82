// The bootstrap under mpirun: one process per rank, the unique id distributed with MPI_Bcast.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mccl_bootstrap.h"
#include "mccl_test_mpi.h"


static mcclResult_t initFromMpi(mcclBootstrap** bs) {
  mcclUniqueId id;
  memset(&id, 0, sizeof(id));
  if (mcclTestMpiRank() == 0) {
    mcclResult_t r = mcclGetUniqueId(&id);
    if (r != mcclSuccess) return r;
  }
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  char addr[MCCL_SOCKET_NAME_LEN];
  snprintf(addr, sizeof(addr), "proxy-%d", (int)getpid());
  return mcclBootstrapInit(&id, mcclTestMpiRank(), mcclTestMpiSize(), mcclTestMpiRank() % 4, addr, NULL, bs);
}

// Peer records match what MPI says about the same processes.
static void peerRecords(void) {
  int fds0 = mcclTestCountFds();
  int rank = mcclTestMpiRank(), n = mcclTestMpiSize();
  mcclBootstrap* bs = NULL;
  EXPECT_OK(initFromMpi(&bs));
  int* pids = malloc(sizeof(int) * (size_t)n);
  int me = (int)getpid();
  MPI_Allgather(&me, 1, MPI_INT, pids, 1, MPI_INT, MPI_COMM_WORLD);
  int ok = 1;
  for (int p = 0; p < n; p++) {
    mcclPeerInfo info;
    char want[MCCL_SOCKET_NAME_LEN];
    snprintf(want, sizeof(want), "proxy-%d", pids[p]);
    ok &= mcclBootstrapGetPeerInfo(bs, p, &info) == mcclSuccess;
    ok &= info.rank == p && info.pid == pids[p] && info.cudaDev == p % 4;
    ok &= info.hostHash == mcclGetHostHash() && strcmp(info.proxyAddr, want) == 0;
  }
  free(pids);
  EXPECT_OK(mcclBootstrapBarrier(bs));
  EXPECT_OK(mcclBootstrapClose(bs));
  EXPECT_TRUE(ok);
  EXPECT_EQ(mcclBootstrapRank(NULL), -1);
  EXPECT_EQ(mcclTestCountFds(), fds0);
  (void)rank;
}

// Allgather of random bytes (seeded, so every rank can check every slot), then tagged
// point-to-point messages to every peer in a rotating order.
static void allGatherAndSendRecv(void) {
  int fds0 = mcclTestCountFds();
  int rank = mcclTestMpiRank(), n = mcclTestMpiSize();
  mcclBootstrap* bs = NULL;
  EXPECT_OK(initFromMpi(&bs));
  size_t sz = 300 * 1000 + (size_t)(mcclTestRand() % 1000);
  EXPECT_GE(n, 1);
  unsigned char* all = malloc(sz * (size_t)n);
  unsigned char* want = malloc(sz * (size_t)n);
  if (all == NULL || want == NULL || rank < 0 || rank >= n) {
    free(all);
    free(want);
    mcclBootstrapClose(bs);
    mcclTestFailAt(__FILE__, __LINE__, "expected %zu bytes for %d ranks (rank %d)", sz * (size_t)n, n, rank);
    return;
  }
  uint64_t seed = mcclTestRand();
  for (size_t i = 0; i < sz * (size_t)n; i++) want[i] = (unsigned char)((seed >> (i % 56)) + i * 31);
  memcpy(all + (size_t)rank * sz, want + (size_t)rank * sz, sz);
  mcclResult_t r = mcclBootstrapAllGather(bs, all, sz);
  int same = r == mcclSuccess && memcmp(all, want, sz * (size_t)n) == 0;
  free(all);
  free(want);
  EXPECT_RES(r, mcclSuccess);
  EXPECT_TRUE(same);
  int okAll = 1;
  for (int k = 1; k < n; k++) {
    int to = (rank + k) % n, from = (rank - k + n) % n;
    int v = rank * 1000 + k, got = -1;
    okAll &= mcclBootstrapSend(bs, to, 40 + k, &v, sizeof(v)) == mcclSuccess;
    okAll &= mcclBootstrapRecv(bs, from, 40 + k, &got, sizeof(got)) == mcclSuccess;
    okAll &= got == from * 1000 + k;
  }
  EXPECT_TRUE(okAll);
  EXPECT_OK(mcclBootstrapBarrier(bs));
  EXPECT_OK(mcclBootstrapClose(bs));
  EXPECT_EQ(mcclTestCountFds(), fds0);
}

// Each process poses as host rank / 2 (mcclSetThreadHostId, as MCCL_HOSTID would): ranks of
// rank 0's host reach the rendezvous over its Unix name, the others over TCP, and exactly the
// messages between posed hosts go over TCP.
static void posedHostsOverTcp(void) {
  int fds0 = mcclTestCountFds();
  int rank = mcclTestMpiRank(), n = mcclTestMpiSize();
  char host[32];
  snprintf(host, sizeof(host), "mpi-pose-%d", rank / 2);
  EXPECT_OK(mcclSetThreadHostId(host));
  mcclBootstrap* bs = NULL;
  EXPECT_OK(initFromMpi(&bs));
  if (bs == NULL) {
    mcclSetThreadHostId(NULL);
    return;
  }
  mcclBootstrapStats st0, st1;
  EXPECT_OK(mcclBootstrapGetStats(bs, &st0));
  EXPECT_EQ(st0.rendezvousTcp, rank / 2 != 0);
  int okAll = 1, same = 0;
  for (int k = 1; k < n; k++) {
    int to = (rank + k) % n, from = (rank - k + n) % n, v = rank * 1000 + k, got = -1;
    same += to / 2 == rank / 2;
    okAll &= mcclBootstrapSend(bs, to, 60 + k, &v, sizeof(v)) == mcclSuccess;
    okAll &= mcclBootstrapRecv(bs, from, 60 + k, &got, sizeof(got)) == mcclSuccess && got == from * 1000 + k;
  }
  EXPECT_TRUE(okAll);
  EXPECT_OK(mcclBootstrapGetStats(bs, &st1));
  EXPECT_EQ(st1.tcpSent - st0.tcpSent, (uint64_t)(n - 1 - same));
  EXPECT_EQ(st1.unixSent - st0.unixSent, (uint64_t)same);
  EXPECT_EQ(st1.tcpReceived - st0.tcpReceived, (uint64_t)(n - 1 - same));
  EXPECT_EQ(st1.unixReceived - st0.unixReceived, (uint64_t)same);
  size_t sz = 200 * 1000;
  unsigned char* all = malloc(sz * (size_t)n);
  EXPECT_TRUE(all != NULL);
  if (all != NULL) {
    for (size_t i = 0; i < sz; i++) all[(size_t)rank * sz + i] = (unsigned char)(i + (size_t)rank * 3);
    EXPECT_OK(mcclBootstrapAllGather(bs, all, sz));
    int same2 = 1;
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < sz; i += 997) same2 &= all[(size_t)r * sz + i] == (unsigned char)(i + (size_t)r * 3);
    EXPECT_TRUE(same2);
    free(all);
  }
  EXPECT_OK(mcclBootstrapBarrier(bs));
  EXPECT_OK(mcclBootstrapClose(bs));
  EXPECT_OK(mcclSetThreadHostId(NULL));
  EXPECT_EQ(mcclTestCountFds(), fds0);
}

MCCL_TEST_MAIN_MPI(MCCL_TEST_CASE(peerRecords), MCCL_TEST_CASE(allGatherAndSendRecv), MCCL_TEST_CASE(posedHostsOverTcp))
