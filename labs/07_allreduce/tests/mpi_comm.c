// Lab 07 host side across processes under mpirun (2, 3, 4 ranks): each rank drives device
// rank % devices; the communicator's ring, its channels (what a rank stores through its send view,
// the next rank reads through its recv view) over P2P and, with MCCL_P2P_DISABLE=1, SHM; a window
// every rank reads through its mappings of every peer's buffer; nothing leaked.
#include <stdlib.h>
#include "comm_test_util.h"
#include "mccl_alloc.h"
#include "mccl_param.h"
#include "mccl_test_mpi.h"

static int pickDevice(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) return -1;
  return mcclTestMpiRank() % n;
}

static void warmUp(int dev) {
  cudaSetDevice(dev);
  void* p = NULL;
  if (mcclMemAlloc(&p, 1) == mcclSuccess) mcclMemFree(p);
}

static void ringAndWindow(int nChannels, const char* p2pDisable) {
  int dev = pickDevice();
  if (dev < 0) SKIP("no CUDA device");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no windows");
  warmUp(dev);
  if (p2pDisable)
    setenv("MCCL_P2P_DISABLE", p2pDisable, 1);
  else
    unsetenv("MCCL_P2P_DISABLE");
  mcclParamResetAll();
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads(), shm0 = mcclTestCountShm();
  int rank = mcclTestMpiRank(), n = mcclTestMpiSize();
  mcclUniqueId id;
  memset(&id, 0, sizeof(id));
  if (rank == 0) EXPECT_OK(mcclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  mcclLabComm* comm = NULL;
  EXPECT_OK(mcclLabCommInit(&comm, n, &id, rank, dev, nChannels, mcclLocalTransports));
  EXPECT_EQ(comm->nChannels, nChannels);
  EXPECT_EQ(ctRingLine(comm), 0);
  if (n > 1)
    for (int c = 0; c < nChannels; c++) EXPECT_EQ(comm->transport[c], p2pDisable ? TRANSPORT_SHM : TRANSPORT_P2P);
  EXPECT_EQ(ctWriteSends(comm), 0);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(ctReadRecvs(comm), 0);
  void* buf = NULL;
  EXPECT_OK(mcclMemAlloc(&buf, 2048));
  EXPECT_EQ(ctWindowFill(comm, buf, 256), 0);
  mcclLabWindow* win = NULL;
  EXPECT_OK(mcclLabWindowRegister(comm, buf, 2048, &win));
  EXPECT_EQ(ctWindowCheck(comm, win, 256), 0);
  MPI_Barrier(MPI_COMM_WORLD);  // everyone has read before anyone unmaps or frees
  EXPECT_OK(mcclLabWindowDeregister(comm, win));
  EXPECT_OK(mcclMemFree(buf));
  EXPECT_OK(mcclLabCommDestroy(comm));
  MPI_Barrier(MPI_COMM_WORLD);  // /dev/shm is shared: count once every rank has destroyed
  unsetenv("MCCL_P2P_DISABLE");
  mcclParamResetAll();
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_EQ(mcclTestCountShm(), shm0);
}

static void p2pTwoChannels(void) {
  ringAndWindow(2, NULL);
}
static void shmOneChannel(void) {
  ringAndWindow(1, "1");
}

MCCL_TEST_MAIN_MPI(MCCL_TEST_CASE(p2pTwoChannels), MCCL_TEST_CASE(shmOneChannel))
