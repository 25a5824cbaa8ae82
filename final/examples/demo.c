// final/ demo: the integrated library as an application uses it, through minccl.h alone. One
// process drives every device present (the sim's 4, or the GPUs, at most 8): mcclCommInitAll, buffers
// from mcclMemAlloc registered as symmetric windows (in a group: registration is collective), then
// allreduces through mcclGroupStart/End on every algorithm the library picks by size, each checked.
#include <stdio.h>
#include <stdlib.h>
#include "mccl_args.h"
#include "minccl.h"

#define MAXDEV 8

#define CHECK(call)                                                                          \
  do {                                                                                       \
    mcclResult_t r_ = (call);                                                                \
    if (r_ != mcclSuccess) {                                                                 \
      printf("%s failed: %s (%s)\n", #call, mcclGetErrorString(r_), mcclGetLastError(NULL)); \
      return 1;                                                                              \
    }                                                                                        \
  } while (0)

int main(int argc, char** argv) {
  mcclArgsCheck(argc, argv, 1, "[ndev]",
                "  libminccl in one process: mcclCommInitAll over ndev devices, windows, and grouped\n"
                "  mcclAllReduce (sum of float32) at sizes where the library picks one-shot, then the ring,\n"
                "  each result checked on every rank.\n"
                "  ndev  devices, 2..8 (default: every device present, at most 8)");
  int want = (int)mcclArgsInt(argc, argv, 1, "ndev", MAXDEV, 2, MAXDEV);
  int present = 0, version = 0;
  if (cudaGetDeviceCount(&present) != cudaSuccess) present = 0;
  int n = want < present ? want : present;
  if (n < 2) {
    printf("final demo: needs 2 devices, %d present\n", present);
    return 0;
  }
  CHECK(mcclGetVersion(&version));
  printf("libminccl %d (%s backend): allreduce across %d devices in one process\n", version, MCCL_BACKEND_NAME, n);
  mcclComm_t comms[MAXDEV];
  CHECK(mcclCommInitAll(comms, n, NULL));
  printf("[1] mcclCommInitAll: %d communicators, rank r on device r\n", n);

  const size_t maxCount = 1 << 21;  // 8 MiB of float32 per rank: beyond two-shot, the ring
  float* buf[MAXDEV];
  mcclWindow_t win[MAXDEV];
  cudaStream_t stream[MAXDEV];
  float* host = (float*)malloc(maxCount * sizeof(float));
  if (host == NULL) return 1;
  for (int r = 0; r < n; r++) {
    cudaSetDevice(r);
    CHECK(mcclMemAlloc((void**)&buf[r], maxCount * sizeof(float)));
    cudaStreamCreateWithFlags(&stream[r], cudaStreamNonBlocking);
  }
  CHECK(mcclGroupStart());
  for (int r = 0; r < n; r++)
    CHECK(mcclCommWindowRegister(comms[r], buf[r], maxCount * sizeof(float), &win[r], MCCL_WIN_COLL_SYMMETRIC));
  CHECK(mcclGroupEnd());
  printf("[2] mcclCommWindowRegister in a group: every rank maps every rank's %zu KiB buffer\n",
         maxCount * sizeof(float) >> 10);

  static const size_t counts[] = {1024, maxCount};
  int bad = 0;
  for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
    size_t count = counts[c];
    for (int r = 0; r < n; r++) {  // rank r holds r + 1 everywhere
      for (size_t i = 0; i < count; i++) host[i] = (float)(r + 1) + (float)(i % 7);
      cudaSetDevice(r);
      // On the stream of the allreduce: it is non-blocking, so it would not wait for a NULL-stream copy.
      cudaMemcpyAsync(buf[r], host, count * sizeof(float), cudaMemcpyHostToDevice, stream[r]);
    }
    CHECK(mcclGroupStart());
    for (int r = 0; r < n; r++) CHECK(mcclAllReduce(buf[r], buf[r], count, mcclFloat32, mcclSum, comms[r], stream[r]));
    CHECK(mcclGroupEnd());
    int wrong = 0;
    for (int r = 0; r < n; r++) {
      cudaSetDevice(r);
      cudaStreamSynchronize(stream[r]);
      cudaMemcpy(host, buf[r], count * sizeof(float), cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < count; i++) wrong += host[i] != (float)(n * (n + 1) / 2) + (float)(n * (int)(i % 7));
    }
    printf("[3] grouped mcclAllReduce of %7zu floats (%4zu KiB), in place: every rank's element 0 is %g: %s\n", count,
           count * sizeof(float) >> 10, (double)host[0], wrong ? "WRONG" : "correct");
    bad |= wrong != 0;
  }

  for (int r = 0; r < n; r++) {
    CHECK(mcclCommWindowDeregister(comms[r], win[r]));
    cudaSetDevice(r);
    cudaStreamDestroy(stream[r]);
    CHECK(mcclMemFree(buf[r]));
    CHECK(mcclCommDestroy(comms[r]));
  }
  free(host);
  printf("[4] windows deregistered, buffers freed, communicators destroyed\n%s\n", bad ? "FAILED" : "done");
  return bad;
}
