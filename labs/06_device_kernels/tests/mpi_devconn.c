// Lab 06 host side across processes under mpirun: ranks pair up (0-1, 2-3), each drives device
// rank % devices, and mcclDevPairPeerCreate connects them through lab 05's proxies and the bootstrap
// over P2P and over SHM. What one process stores through its sender's view, the other reads through
// its receiver's view (both protocols' FIFOs, tail, connFifo, and head the other way);
// MCCL_P2P_DISABLE=1 makes the automatic choice SHM; fds and /dev/shm come back to where they were.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "devconn_test_util.h"
#include "mccl_alloc.h"
#include "mccl_checks.h"
#include "mccl_devconn.h"
#include "mccl_p2p.h"
#include "mccl_param.h"
#include "mccl_proxy.h"
#include "mccl_shm.h"
#include "mccl_test_mpi.h"
#include "../../05_proxy/tests/mpi_world.h"

// The CUDA driver opens fds of its own at initialisation and first allocation: count from after.
static void warmUp(void) {
  if (pickDevice() < 0) return;
  void* p = NULL;
  if (mcclCuMemAlloc(&p, NULL, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1) == mcclSuccess) mcclCuMemFree(p);
}

// Both directions, 2 channels. Sender stores first (everyone), then a barrier, then receivers check
// and return head, then a barrier, then senders check head.
static void exchange(mcclDevTransport_t which, const char* name, uint64_t initialStep) {
  warmUp();
  int fds0 = mcclTestCountFds(), shm0 = mcclTestCountShm();
  world w;
  mcclResult_t up = worldUp(&w, mcclLocalTransports);
  if (w.dev < 0) SKIP("no CUDA device");
  EXPECT_OK(up);
  int rank = mcclTestMpiRank(), n = mcclTestMpiSize();
  int peer = rank ^ 1;
  if (peer >= n) SKIP("needs an even number of ranks");
  if (which == mcclDevTransportP2p && !mcclCuMemEnable()) SKIP("cuMem not supported: no P2P");
  struct mcclDevPairEnd* e = NULL;
  EXPECT_OK(
      mcclDevPairPeerCreate(w.bs, w.proxy, peer, 2, MCCL_DEVPAIR_SEND | MCCL_DEVPAIR_RECV, which, initialStep, &e));
  EXPECT_EQ(strcmp(e->transport->name, name), 0);
  EXPECT_EQ(e->cudaDev, w.dev);
  int line = 0;
  // Fresh state is checked where each end can see it: tail and LL through the receiver, head through the sender.
  for (int c = 0; c < 2 && !line; c++) line = dcCheckFresh(&e->send[c], w.dev, &e->recv[c], w.dev, initialStep);
  EXPECT_OK(mcclBootstrapBarrier(w.bs));
  for (int c = 0; c < 2 && !line; c++) line = dcWriteSender(&e->send[c], w.dev, (unsigned)(peer * 10 + c));
  EXPECT_OK(mcclBootstrapBarrier(w.bs));
  // Our receiver is the peer's sender's target: the peer wrote with seed rank * 10 + c.
  for (int c = 0; c < 2 && !line; c++) line = dcCheckReceiver(&e->recv[c], w.dev, (unsigned)(rank * 10 + c));
  for (int c = 0; c < 2 && !line; c++) line = dcWriteReceiverHead(&e->recv[c], w.dev, (unsigned)(rank * 10 + c));
  EXPECT_OK(mcclBootstrapBarrier(w.bs));
  for (int c = 0; c < 2 && !line; c++) line = dcCheckSenderHead(&e->send[c], w.dev, (unsigned)(peer * 10 + c));
  if (line) mcclTestFailAt(__FILE__, line, "%s rank %d <-> %d: view check failed at line %d", name, rank, peer, line);
  EXPECT_OK(mcclBootstrapBarrier(w.bs));
  EXPECT_OK(mcclDevPairPeerFree(e));
  EXPECT_OK(mcclBootstrapBarrier(w.bs));
  worldDown(&w);
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestCountShm(), shm0);
}

static void p2pBothWays(void) {
  exchange(mcclDevTransportP2p, "P2P", 0);
}
static void shmBothWays(void) {
  exchange(mcclDevTransportShm, "SHM", UINT64_MAX - 1);
}

// MCCL_P2P_DISABLE=1 on every rank: the automatic choice is SHM; a forced P2P fails on both sides
// alike (they agree before allocating), leaving nothing behind.
static void p2pDisableSelectsShm(void) {
  setenv("MCCL_P2P_DISABLE", "1", 1);
  mcclParamResetAll();
  warmUp();
  int fds0 = mcclTestCountFds();
  world w;
  mcclResult_t up = worldUp(&w, mcclLocalTransports);
  if (w.dev < 0) SKIP("no CUDA device");
  EXPECT_OK(up);
  int rank = mcclTestMpiRank(), n = mcclTestMpiSize(), peer = rank ^ 1;
  if (peer >= n) SKIP("needs an even number of ranks");
  struct mcclDevPairEnd* e = NULL;
  EXPECT_OK(mcclDevPairPeerCreate(w.bs, w.proxy, peer, 1, rank & 1 ? MCCL_DEVPAIR_RECV : MCCL_DEVPAIR_SEND,
                                  mcclDevTransportAuto, 0, &e));
  EXPECT_TRUE(e->transport == &mcclShmTransport);
  EXPECT_TRUE((rank & 1) ? (e->send == NULL && e->recv != NULL) : (e->send != NULL && e->recv == NULL));
  EXPECT_OK(mcclDevPairPeerFree(e));
  e = NULL;
  EXPECT_RES(
      mcclDevPairPeerCreate(w.bs, w.proxy, peer, 1, MCCL_DEVPAIR_SEND | MCCL_DEVPAIR_RECV, mcclDevTransportP2p, 0, &e),
      mcclInvalidUsage);
  EXPECT_TRUE(e == NULL);
  // Mismatched requests (both sides asking to send only) are refused by both.
  EXPECT_RES(mcclDevPairPeerCreate(w.bs, w.proxy, peer, 1, MCCL_DEVPAIR_SEND, mcclDevTransportAuto, 0, &e),
             mcclInvalidUsage);
  EXPECT_RES(mcclDevPairPeerCreate(w.bs, w.proxy, rank, 1, MCCL_DEVPAIR_SEND, mcclDevTransportAuto, 0, &e),
             mcclInvalidArgument);
  EXPECT_OK(mcclBootstrapBarrier(w.bs));
  worldDown(&w);
  unsetenv("MCCL_P2P_DISABLE");
  mcclParamResetAll();
  EXPECT_EQ(mcclTestCountFds(), fds0);
}

MCCL_TEST_MAIN_MPI(MCCL_TEST_CASE(p2pBothWays), MCCL_TEST_CASE(shmBothWays), MCCL_TEST_CASE(p2pDisableSelectsShm))
