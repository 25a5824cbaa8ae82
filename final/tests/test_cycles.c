// final/: init / allreduce / destroy, over and over in one process: after them the process holds the
// fds, threads, mappings and /dev/shm entries it held after the first, so a long-lived job that makes
// communicators over and over does not leak.
// Each cycle: mcclCommInitAll over 2 devices, one grouped allreduce (the table's algorithm: one-shot
// at this size, so the signal areas are used), checked, then destroy. MCCL_FINAL_CYCLES sets the
// count: 100 by default, for `make test` (30 in a sanitizer build; on the sim a cycle spends most of
// its time waiting in init and destroy, so 1000 take minutes); MCCL_FINAL_CYCLES=1000 runs a long soak.
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include "mccl_test.h"
#include "minccl.h"

#define NDEV 2
#define COUNT 256

struct rankState {
  int* buf;
  cudaStream_t stream;
};

// One cycle; 0 on success, else the line that failed.
static int cycle(struct rankState* st, int i) {
  mcclComm_t comms[NDEV];
  if (mcclCommInitAll(comms, NDEV, NULL) != mcclSuccess) return __LINE__;
  int host[COUNT];
  for (int r = 0; r < NDEV; r++) {
    for (int k = 0; k < COUNT; k++) host[k] = (r + 1) * (k + i);
    if (cudaSetDevice(r) != cudaSuccess) return __LINE__;
    if (mcclTestCopyToDevice(st[r].buf, host, sizeof(host)) != cudaSuccess) return __LINE__;
  }
  if (mcclGroupStart() != mcclSuccess) return __LINE__;
  for (int r = 0; r < NDEV; r++)
    if (mcclAllReduce(st[r].buf, st[r].buf, COUNT, mcclInt32, mcclSum, comms[r], st[r].stream) != mcclSuccess)
      return __LINE__;
  if (mcclGroupEnd() != mcclSuccess) return __LINE__;
  for (int r = 0; r < NDEV; r++) {
    if (cudaSetDevice(r) != cudaSuccess || cudaStreamSynchronize(st[r].stream) != cudaSuccess) return __LINE__;
    if (cudaMemcpy(host, st[r].buf, sizeof(host), cudaMemcpyDeviceToHost) != cudaSuccess) return __LINE__;
    for (int k = 0; k < COUNT; k++)
      if (host[k] != 3 * (k + i)) return __LINE__;  // (1 + 2) * (k + i)
  }
  for (int r = 0; r < NDEV; r++)
    if (mcclCommDestroy(comms[r]) != mcclSuccess) return __LINE__;
  return 0;
}

static void initAllReduceDestroyCycles(void) {
  if (mcclTestDeviceCount() < NDEV) SKIP("needs %d devices", NDEV);
  const char* env = getenv("MCCL_FINAL_CYCLES");
  int n = env ? atoi(env) : mcclTestSampling() ? 30 : 100;  // sanitizer builds: 30 unless asked
  struct rankState st[NDEV];
  for (int r = 0; r < NDEV; r++) {
    EXPECT_CUDA_OK(cudaSetDevice(r));
    EXPECT_CUDA_OK(cudaMalloc((void**)&st[r].buf, COUNT * sizeof(int)));
    EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&st[r].stream, cudaStreamNonBlocking));
  }
  int line = cycle(st, 0);  // the first cycle starts what stays (the sim's device threads)
  if (line) mcclTestFailAt(__FILE__, line, "first cycle failed: %s", mcclGetLastError(NULL));
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads(), shm0 = mcclTestCountShm();
  long maps0 = mcclTestCountMaps("minccl-sim");
  for (int i = 1; i < n && !mcclTestStopped(); i++) {
    line = cycle(st, i);
    if (line) mcclTestFailAt(__FILE__, line, "cycle %d of %d failed: %s", i, n, mcclGetLastError(NULL));
  }
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_EQ(mcclTestCountShm(), shm0);
  EXPECT_EQ(mcclTestCountMaps("minccl-sim"), maps0);
  for (int r = 0; r < NDEV; r++) {
    EXPECT_CUDA_OK(cudaSetDevice(r));
    EXPECT_CUDA_OK(cudaStreamDestroy(st[r].stream));
    EXPECT_CUDA_OK(cudaFree(st[r].buf));
  }
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(initAllReduceDestroyCycles))
