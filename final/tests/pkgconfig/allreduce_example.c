// A program outside the tree: it includes only <minccl.h> and links only what
// `pkg-config --cflags --libs minccl` gives (final/tests/test_install.sh builds it against an
// installed copy). One process, the devices present (at most 4): mcclCommInitAll, one grouped
// allreduce of int32 sums, checked; prints "ok" and exits 0 when every rank holds the right sum.
#include <stdio.h>
#include <stdlib.h>
#include <minccl.h>

#define MAXDEV 4
#define COUNT 1000

#define CHECK(call)                                                                        \
  do {                                                                                     \
    mcclResult_t r_ = (call);                                                              \
    if (r_ != mcclSuccess) {                                                               \
      fprintf(stderr, "%s failed: %s (%s)\n", #call, mcclGetErrorString(r_), mcclGetLastError(NULL)); \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

int main(void) {
  int ndev = 0, version = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
    fprintf(stderr, "no device\n");
    return 1;
  }
  if (ndev > MAXDEV) ndev = MAXDEV;
  CHECK(mcclGetVersion(&version));
  mcclComm_t comms[MAXDEV];
  int* buf[MAXDEV];
  cudaStream_t stream[MAXDEV];
  CHECK(mcclCommInitAll(comms, ndev, NULL));
  static int host[COUNT];
  for (int r = 0; r < ndev; r++) {
    cudaSetDevice(r);
    for (int i = 0; i < COUNT; i++) host[i] = (r + 1) * i;
    CHECK(mcclMemAlloc((void**)&buf[r], sizeof(host)));
    cudaMemcpy(buf[r], host, sizeof(host), cudaMemcpyHostToDevice);
    cudaStreamCreate(&stream[r]);
  }
  CHECK(mcclGroupStart());
  for (int r = 0; r < ndev; r++) CHECK(mcclAllReduce(buf[r], buf[r], COUNT, mcclInt32, mcclSum, comms[r], stream[r]));
  CHECK(mcclGroupEnd());
  int bad = 0, sumRanks = ndev * (ndev + 1) / 2;
  for (int r = 0; r < ndev; r++) {
    cudaSetDevice(r);
    cudaStreamSynchronize(stream[r]);
    cudaMemcpy(host, buf[r], sizeof(host), cudaMemcpyDeviceToHost);
    for (int i = 0; i < COUNT; i++) bad += host[i] != sumRanks * i;
    cudaStreamDestroy(stream[r]);
    CHECK(mcclMemFree(buf[r]));
    CHECK(mcclCommDestroy(comms[r]));
  }
  printf("minccl %d: allreduce over %d devices: %s\n", version, ndev, bad ? "WRONG" : "ok");
  return bad != 0;
}
