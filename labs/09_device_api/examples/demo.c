// Lab 09 demo: kernels that communicate by themselves. One process drives N devices (the sim's 4, or the GPUs
// present), one communicator each. Each step is narrated: the device communicator and its LSA team, where
// each peer's buffer sits in a device window's flat range, a one-shot allreduce written on the device API,
// the barrier's epochs after it, and the fused allreduce + RMSNorm against the two-kernel version.
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mccl_alloc.h"
#include "mccl_args.h"
#include "mccl_checks.h"
#include "mccl_dev_api.h"

#define MAXN 4
#define COUNT 1000  // floats per rank
#define ROWS 2
#define HIDDEN 512

struct rank {
  mcclLabComm* comm;
  float *buf, *out, *out2, *w;
  mcclLabWindow* win;
  mcclWindow_t devWin;
  mcclDevComm dc;
  cudaStream_t stream;
  mcclResult_t res;
};

// The collective calls, one thread per rank: register the window, create the device communicator.
static void* setUpThread(void* p) {
  struct rank* r = (struct rank*)p;
  cudaSetDevice(r->comm->cudaDev);
  mcclDevCommRequirements reqs = MCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 2;  // one per block of the kernels below
  r->res = mcclLabWindowRegister(r->comm, r->buf, COUNT * sizeof(float) * 4, &r->win);
  if (r->res == mcclSuccess) r->res = mcclLabDevCommCreate(r->comm, &reqs, &r->dc);
  if (r->res == mcclSuccess) r->res = mcclDevWindowCreate(r->comm, r->win, &r->devWin);
  return NULL;
}

int main(int argc, char** argv) {
  mcclArgsCheck(argc, argv, 0, "",
                "  A narrated tour of the device API on the devices of this process (2..4 of them): the device\n"
                "  communicator and its teams, a window's peers at the 4 GiB stride, an LSA barrier, then the\n"
                "  lab's kernels (one-shot, two-shot, allgather, fused allreduce + RMSNorm), each checked.");
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) {
    printf("lab 09 demo: needs 2 devices or more\n");
    return 0;
  }
  if (n > MAXN) n = MAXN;
  mcclLabComm* comms[MAXN];
  struct rank R[MAXN];
  memset(R, 0, sizeof(R));
  MCCLCHECK(mcclLabCommInitAll(comms, n, NULL, 1, mcclLocalTransports));
  for (int i = 0; i < n; i++) {
    R[i].comm = comms[i];
    CUDACHECK(cudaSetDevice(i));
    MCCLCHECK(mcclMemAlloc((void**)&R[i].buf, COUNT * sizeof(float) * 4));
    MCCLCHECK(mcclMemAlloc((void**)&R[i].out, COUNT * sizeof(float) * 4));
    MCCLCHECK(mcclMemAlloc((void**)&R[i].out2, COUNT * sizeof(float) * 4));
    MCCLCHECK(mcclMemAlloc((void**)&R[i].w, HIDDEN * sizeof(float)));
    CUDACHECK(cudaStreamCreateWithFlags(&R[i].stream, cudaStreamNonBlocking));
  }
  pthread_t th[MAXN];
  for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, setUpThread, &R[i]);
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < n; i++) MCCLCHECK(R[i].res);

  printf("[1] %d ranks, one host: the LSA team (ranks that load and store each other's memory) is the world\n", n);
  for (int i = 0; i < n; i++) {
    mcclTeam lsa = mcclLabTeamLsa(comms[i]);
    printf("    rank %d: devComm rank %d of %d, LSA rank %d of %d, %d LSA barriers at resource line %u\n", i,
           R[i].dc.rank, R[i].dc.nRanks, lsa.rank, lsa.nRanks, R[i].dc.lsaBarrier.nBarriers,
           R[i].dc.lsaBarrier.bufHandle);
  }
  struct mcclWindow_vidmem h;
  MCCLCHECK(mcclDevWindowGetHost(comms[0], R[0].devWin, &h));
  printf("[2] rank 0's device window: lsaFlatBase %p, stride %u x 4 GiB; every peer at base + peer * stride:\n",
         (void*)h.lsaFlatBase, h.stride4G);
  for (int p = 0; p < n; p++)
    printf("    peer %d at %p (its buffer, mapped a second time at NCCL's stride)\n", p,
           (void*)(h.lsaFlatBase + ((size_t)p * h.stride4G << 32)));

  float* host = (float*)malloc(COUNT * sizeof(float) * 4);
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < COUNT; k++) host[k] = (float)(i + 1);
    CUDACHECK(cudaSetDevice(i));
    CUDACHECK(cudaMemcpy(R[i].buf, host, COUNT * sizeof(float), cudaMemcpyHostToDevice));
  }
  printf(
      "[3] one-shot allreduce of %d floats, rank r holding r + 1: each block syncs its LSA barrier, reads every\n"
      "    peer's input through mcclGetLsaPointer, sums, and syncs again before the inputs may change\n",
      COUNT);
  for (int i = 0; i < n; i++) {
    CUDACHECK(cudaSetDevice(i));
    MCCLCHECK(mcclDevAllReduceOneShot(&R[i].dc, R[i].devWin, 0, R[i].out, COUNT, mcclFloat32, 2, R[i].stream));
  }
  int ok = 1;
  for (int i = 0; i < n; i++) {
    CUDACHECK(cudaSetDevice(i));
    CUDACHECK(cudaStreamSynchronize(R[i].stream));
    CUDACHECK(cudaMemcpy(host, R[i].out, COUNT * sizeof(float), cudaMemcpyDeviceToHost));
    for (int k = 0; k < COUNT; k++) ok &= host[k] == (float)(n * (n + 1) / 2);
  }
  printf("    every rank has %g everywhere: %s\n", (double)(n * (n + 1) / 2), ok ? "yes" : "NO");
  uint32_t state[2 * (3 + MAXN)];
  const struct mcclWindow_vidmem* rw = &R[0].dc.resourceWindow_inlined;
  CUDACHECK(cudaSetDevice(0));
  CUDACHECK(cudaMemcpy(state, rw->lsaFlatBase + mcclGetResourceBufferOffset(R[0].dc.lsaBarrier.bufHandle),
                       sizeof(uint32_t) * 2 * (size_t)(3 + n), cudaMemcpyDeviceToHost));
  printf("[4] rank 0's barrier 0 after it: epoch %u (one session, two syncs), inbox slots:", state[2]);
  for (int p = 0; p < n; p++) printf(" %u", state[3 * 2 + p]);
  printf(" (peer p's arrivals; its own slot stays 0)\n");

  printf(
      "[5] allreduce + RMSNorm of %d x %d floats: fused in one kernel, and as the one-shot then an RMSNorm "
      "kernel\n",
      ROWS, HIDDEN);
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < ROWS * HIDDEN; k++) host[k] = (float)((k * 7 + i * 3) % 11) / 11.0f - 0.5f;
    CUDACHECK(cudaSetDevice(i));
    CUDACHECK(cudaMemcpy(R[i].buf, host, ROWS * HIDDEN * sizeof(float), cudaMemcpyHostToDevice));
    for (int k = 0; k < HIDDEN; k++) host[k] = 1.0f + (float)(k % 5) / 10.0f;
    CUDACHECK(cudaMemcpy(R[i].w, host, HIDDEN * sizeof(float), cudaMemcpyHostToDevice));
  }
  for (int i = 0; i < n; i++) {
    CUDACHECK(cudaSetDevice(i));
    MCCLCHECK(mcclDevAllReduceRmsNorm(&R[i].dc, R[i].devWin, 0, R[i].w, R[i].out, ROWS, HIDDEN, 1e-6f, mcclFloat32, 2,
                                      R[i].stream));
    MCCLCHECK(mcclDevAllReduceOneShot(&R[i].dc, R[i].devWin, 0, R[i].out2, ROWS * HIDDEN, mcclFloat32, 2, R[i].stream));
    MCCLCHECK(mcclDevRmsNorm(R[i].out2, R[i].w, R[i].out2, ROWS, HIDDEN, 1e-6f, mcclFloat32, R[i].stream));
  }
  double maxDiff = 0;
  for (int i = 0; i < n; i++) {
    CUDACHECK(cudaSetDevice(i));
    CUDACHECK(cudaStreamSynchronize(R[i].stream));
    CUDACHECK(cudaMemcpy(host, R[i].out, ROWS * HIDDEN * sizeof(float), cudaMemcpyDeviceToHost));
    CUDACHECK(cudaMemcpy(host + ROWS * HIDDEN, R[i].out2, ROWS * HIDDEN * sizeof(float), cudaMemcpyDeviceToHost));
    for (int k = 0; k < ROWS * HIDDEN; k++) maxDiff = fmax(maxDiff, fabs(host[k] - host[ROWS * HIDDEN + k]));
  }
  printf("    largest difference between the two, over every rank: %g\n", maxDiff);

  for (int i = 0; i < n; i++) {
    CUDACHECK(cudaSetDevice(i));
    CUDACHECK(cudaStreamDestroy(R[i].stream));
    MCCLCHECK(mcclDevWindowDestroy(comms[i], R[i].devWin));
    MCCLCHECK(mcclLabDevCommDestroy(comms[i], &R[i].dc));
    MCCLCHECK(mcclLabWindowDeregister(comms[i], R[i].win));
    MCCLCHECK(mcclMemFree(R[i].buf));
    MCCLCHECK(mcclMemFree(R[i].out));
    MCCLCHECK(mcclMemFree(R[i].out2));
    MCCLCHECK(mcclMemFree(R[i].w));
    MCCLCHECK(mcclLabCommDestroy(comms[i]));
  }
  free(host);
  printf("[6] done: device windows, device communicators, windows and communicators freed\n");
  return ok ? 0 : 1;
}
