// Lab 07 demo: a narrated ring allreduce. One process drives N devices (the sim's 4, or the GPUs
// present), one communicator each (mcclLabCommInitAll). The ring schedule runRing follows is
// computed here on the host from each rank's ring position, exactly as the kernel computes it, and
// printed step by step: which chunk each rank sends, reduces or copies. Then the real allreduce runs
// on the devices (the ring forced, one channel, so the chunks are the ones printed) and every rank's
// result is checked; then the same data through every algorithm the table offers; then a group of
// allreduces per rank, planned into one launch (the enqueue layer).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mccl_alloc.h"
#include "mccl_collectives.h"
#include "mccl_args.h"
#include "mccl_checks.h"
#include "mccl_param.h"

#define MAXN 8
#define CHUNK 64  // floats per chunk: one ring round of n chunks, each 256 bytes (runRing's rounding)

struct rank {
  mcclLabComm* comm;
  float *send, *recv;
  mcclLabWindow *sendWin, *recvWin;
  cudaStream_t stream;
  size_t bytes;
  mcclResult_t res;
};

static void* regThread(void* p) {
  struct rank* r = (struct rank*)p;
  cudaSetDevice(r->comm->cudaDev);
  r->res = mcclLabWindowRegister(r->comm, r->send, r->bytes, &r->sendWin);
  if (r->res == mcclSuccess) r->res = mcclLabWindowRegister(r->comm, r->recv, r->bytes, &r->recvWin);
  return NULL;
}

static void force(const char* algo, const char* proto) {
  if (algo)
    setenv("MCCL_ALGO", algo, 1);
  else
    unsetenv("MCCL_ALGO");
  if (proto)
    setenv("MCCL_PROTO", proto, 1);
  else
    unsetenv("MCCL_PROTO");
  mcclParamResetAll();
}

// The ring schedule of the rank at ring position ix (runRing in src/allreduce_kernels.cuh): step 0
// sends chunk ix-1; steps 1..n-2 receive, reduce with the local chunk and send on; step n-1 produces
// the final chunk ix (recvReduceCopySend); steps n..2n-3 receive a final chunk, copy and pass it on;
// step 2n-2 receives the last one.
static void printSchedule(mcclLabComm** comms, int n) {
  printf("[2] the ring schedule (chunk c = elements [%d*c, %d*c+%d)); n = %d: 2n-1 = %d primitive calls\n", CHUNK,
         CHUNK, CHUNK, n, 2 * n - 1);
  for (int r = 0; r < n; r++) {
    const struct mcclLabRing* ring = &comms[r]->ring;
    int ix = ring->index, step = 0;
    printf("    rank %d (ring position %d, recv from %d, send to %d):\n", r, ix, ring->prev, ring->next);
    printf("      step %d: send               chunk %d\n", step++, (ix + n - 1) % n);
    for (int j = 2; j < n; j++)
      printf("      step %d: recvReduceSend     chunk %d (add mine, pass on)\n", step++, (ix + n - j) % n);
    printf("      step %d: recvReduceCopySend chunk %d (add mine: final, keep and pass on)\n", step++, ix);
    for (int j = 1; j < n - 1; j++)
      printf("      step %d: recvCopySend       chunk %d (final: keep and pass on)\n", step++, (ix + n - j) % n);
    printf("      step %d: recv               chunk %d (final: keep)\n", step, (ix + 1) % n);
  }
}

// Rank r's input: element i is (r + 1) * 100 + i / CHUNK (the chunk number shows in the sum).
static float input(int r, size_t i) {
  return (float)((r + 1) * 100 + (int)(i / CHUNK));
}

static int runAndCheck(struct rank* rk, int n, size_t count, const char* what) {
  float* host = (float*)malloc(count * sizeof(float));
  int bad = 0;
  if (host == NULL) return 1;
  for (int r = 0; r < n; r++) {
    CUDACHECK(cudaSetDevice(rk[r].comm->cudaDev));
    for (size_t i = 0; i < count; i++) host[i] = input(rk[r].comm->rank, i);
    // On the rank's own stream, ahead of its allreduce: a NULL-stream cudaMemcpy/cudaMemset may return before
    // its bytes land, and this stream is non-blocking (it does not wait for the NULL stream).
    CUDACHECK(cudaMemcpyAsync(rk[r].send, host, count * sizeof(float), cudaMemcpyHostToDevice, rk[r].stream));
    CUDACHECK(cudaMemsetAsync(rk[r].recv, 0, count * sizeof(float), rk[r].stream));
  }
  for (int r = 0; r < n; r++) {
    CUDACHECK(cudaSetDevice(rk[r].comm->cudaDev));
    MCCLCHECK(mcclLabAllReduce(rk[r].send, rk[r].recv, count, mcclFloat32, mcclSum, rk[r].comm, rk[r].stream));
  }
  for (int r = 0; r < n; r++) {
    CUDACHECK(cudaSetDevice(rk[r].comm->cudaDev));
    CUDACHECK(cudaStreamSynchronize(rk[r].stream));
    CUDACHECK(cudaMemcpy(host, rk[r].recv, count * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count && !bad; i++) {
      float want = 0;
      for (int q = 0; q < n; q++) want += input(q, i);
      if (host[i] != want) {
        printf("    rank %d element %zu: %g, expected %g\n", r, i, host[i], want);
        bad = 1;
      }
    }
  }
  // Chunk c's first element is sum over ranks of (rank + 1) * 100 + c.
  printf("    %-18s every rank: chunk 0 starts %g, chunk %d starts %g: %s\n", what, (double)host[0], n - 1,
         (double)host[(size_t)(n - 1) * CHUNK], bad ? "WRONG" : "correct");
  free(host);
  return bad;
}

// The enqueue layer: K allreduces per rank inside one group become K tasks on each communicator, and
// mcclLabGroupEnd plans them together: one-shot works of one type and operation share one launch of
// the one-shot kernel (their bytes fit its scratch). First the same group through
// mcclLabGroupSimulateEnd (planned, timed by the tuning model, dropped), then for real, counting launches.
static int groupStep(struct rank* rk, int n, size_t count) {
  enum { K = 8 };
  const size_t each = count / K;
  uint64_t before[MAXN];
  float est = 0;
  MCCLCHECK(mcclLabGroupStart());
  for (int r = 0; r < n; r++)
    for (int k = 0; k < K; k++)
      MCCLCHECK(mcclLabAllReduce(rk[r].send + k * each, rk[r].recv + k * each, each, mcclFloat32, mcclSum, rk[r].comm,
                                 rk[r].stream));
  MCCLCHECK(mcclLabGroupSimulateEnd(&est));
  printf("    mcclLabGroupSimulateEnd: %d ranks x %d allreduces of %zu floats: %.1f us estimated, nothing launched\n",
         n, K, each, (double)est);
  for (int r = 0; r < n; r++) before[r] = rk[r].comm->nLaunches;
  MCCLCHECK(mcclLabGroupStart());
  for (int r = 0; r < n; r++)
    for (int k = 0; k < K; k++)
      MCCLCHECK(mcclLabAllReduce(rk[r].send + k * each, rk[r].recv + k * each, each, mcclFloat32, mcclSum, rk[r].comm,
                                 rk[r].stream));
  MCCLCHECK(mcclLabGroupEnd());
  int bad = 0;
  float* host = (float*)malloc(count * sizeof(float));
  if (host == NULL) return 1;
  for (int r = 0; r < n; r++) {
    CUDACHECK(cudaSetDevice(rk[r].comm->cudaDev));
    CUDACHECK(cudaStreamSynchronize(rk[r].stream));
    CUDACHECK(cudaMemcpy(host, rk[r].recv, K * each * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < K * each && !bad; i++) {
      float want = 0;
      for (int q = 0; q < n; q++) want += input(q, i);
      bad = host[i] != want;
    }
    printf("    rank %d: %d calls -> %d tasks -> %llu kernel launch(es): %s\n", r, K, K,
           (unsigned long long)(rk[r].comm->nLaunches - before[r]), bad ? "WRONG" : "correct");
  }
  free(host);
  return bad;
}

int main(int argc, char** argv) {
  mcclArgsCheck(argc, argv, 1, "[ndev]",
                "  A narrated ring allreduce over ndev devices in one process: the schedule (which chunk\n"
                "  each rank sends, reduces, copies at each step), then the real allreduce, checked, and\n"
                "  the same data through one-shot and two-shot.\n"
                "  ndev  devices, one rank each, 2..8 (default 4, at most the devices present)");
  int want = (int)mcclArgsInt(argc, argv, 1, "ndev", 4, 2, MAXN);
  int present = 0;
  CUDACHECK(cudaGetDeviceCount(&present));
  int n = want < present ? want : present;
  if (n < 2) {
    printf("lab 07 demo: needs 2 devices, %d present\n", present);
    return 0;
  }
  printf("lab 07 demo (%s backend): allreduce (sum of float32) over %d ranks, one per device\n", MCCL_BACKEND_NAME, n);
  mcclLabComm* comms[MAXN];
  printf("[1] mcclLabCommInitAll: %d ranks, 1 channel each (one block: the chunks below are its)\n", n);
  MCCLCHECK(mcclLabCommInitAll(comms, n, NULL, 1, mcclLocalTransports));
  printSchedule(comms, n);

  size_t count = (size_t)n * CHUNK;
  struct rank rk[MAXN];
  pthread_t th[MAXN];
  memset(rk, 0, sizeof(rk));
  for (int r = 0; r < n; r++) {
    rk[r].comm = comms[r];
    rk[r].bytes = count * sizeof(float);
    CUDACHECK(cudaSetDevice(comms[r]->cudaDev));
    MCCLCHECK(mcclMemAlloc((void**)&rk[r].send, rk[r].bytes));
    MCCLCHECK(mcclMemAlloc((void**)&rk[r].recv, rk[r].bytes));
    CUDACHECK(cudaStreamCreateWithFlags(&rk[r].stream, cudaStreamNonBlocking));
  }
  for (int r = 0; r < n; r++) pthread_create(&th[r], NULL, regThread, &rk[r]);  // collective
  for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < n; r++) MCCLCHECK(rk[r].res);

  printf("[3] the real allreduce of %zu floats; rank r's element i is (r+1)*100 + chunk(i)\n", count);
  int bad = 0;
  force("ring", "simple");
  bad |= runAndCheck(rk, n, count, "ring (SIMPLE)");
  force("ring", "ll");
  bad |= runAndCheck(rk, n, count, "ring (LL)");
  force("oneshot", NULL);
  bad |= runAndCheck(rk, n, count, "one-shot");
  force("twoshot", NULL);
  bad |= runAndCheck(rk, n, count, "two-shot");
  force(NULL, NULL);
  printf("[4] a group: %d allreduces per rank planned together (the table picks one-shot at this size)\n", 8);
  bad |= groupStep(rk, n, count);

  printf("[5] deregister, free, destroy\n");
  for (int r = 0; r < n; r++) {
    CUDACHECK(cudaSetDevice(comms[r]->cudaDev));
    CUDACHECK(cudaStreamDestroy(rk[r].stream));
    MCCLCHECK(mcclLabWindowDeregister(comms[r], rk[r].sendWin));
    MCCLCHECK(mcclLabWindowDeregister(comms[r], rk[r].recvWin));
    MCCLCHECK(mcclMemFree(rk[r].send));
    MCCLCHECK(mcclMemFree(rk[r].recv));
    MCCLCHECK(mcclLabCommDestroy(comms[r]));
  }
  printf(bad ? "FAILED\n" : "done\n");
  return bad;
}
