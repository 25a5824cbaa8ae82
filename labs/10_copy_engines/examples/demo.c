// Lab 10 demo: collectives that use no SM. One process drives N devices (the sim's 4, or the GPUs present), one
// communicator each, with CTA policy ZERO and the copy-engine collectives. Each step is narrated: the flags two
// memory-op syncs leave in a signal area, an AllGather that launches no kernel, the other four functions, the
// same AllGather into a buffer outside any window (kernels, and why), and what the batches queued.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mccl_alloc.h"
#include "mccl_args.h"
#include "mccl_ce.h"
#include "mccl_checks.h"

#define MAXN 4
#define COUNT 1000                     // floats per rank pair
#define BYTES (COUNT * sizeof(float))  // one block
#define WIN (MAXN * BYTES * 2 + 4096)  // each rank's window: an input, then the output at OUT
#define OUT (MAXN * BYTES)

struct rank {
  mcclLabComm* comm;
  char *win, *plain;
  mcclLabWindow* w;
  cudaStream_t stream;
  mcclResult_t res;
};

static void* registerThread(void* p) {  // collective: one thread per rank
  struct rank* r = (struct rank*)p;
  cudaSetDevice(r->comm->cudaDev);
  r->res = mcclLabWindowRegister(r->comm, r->win, WIN, &r->w);
  return NULL;
}

static float value(int rank, size_t i) {
  return (float)(rank * 10000 + (int)i);
}

// Each rank's input: `blocks` blocks of COUNT floats, element i of the whole input being value(rank, i).
static mcclResult_t fill(struct rank* R, int n, size_t blocks) {
  float* h = (float*)malloc(BYTES * blocks);
  for (int i = 0; i < n; i++) {
    for (size_t k = 0; k < COUNT * blocks; k++) h[k] = value(i, k);
    CUDACHECK(cudaSetDevice(i));
    CUDACHECK(cudaMemcpy(R[i].win, h, BYTES * blocks, cudaMemcpyHostToDevice));
    CUDACHECK(cudaMemset(R[i].win + OUT, 0, MAXN * BYTES));
    CUDACHECK(cudaDeviceSynchronize());  // landed before the streams (non-blocking) read or write them
  }
  free(h);
  return mcclSuccess;
}

// Rank i's output element k must be want(i, k): returns how many ranks agree.
typedef float (*wantFn)(int rank, size_t k, int n, int root);
static int check(struct rank* R, int n, size_t count, wantFn want, int root) {
  float* h = (float*)malloc(sizeof(float) * count);
  int good = 0;
  for (int i = 0; i < n; i++) {
    int ok = 1;
    cudaSetDevice(i);
    cudaStreamSynchronize(R[i].stream);
    cudaMemcpy(h, R[i].win + OUT, sizeof(float) * count, cudaMemcpyDeviceToHost);
    for (size_t k = 0; k < count && ok; k++) ok = h[k] == want(i, k, n, root);
    good += ok;
  }
  free(h);
  return good;
}
static float wantAllGather(int rank, size_t k, int n, int root) {
  (void)rank, (void)n, (void)root;
  return value((int)(k / COUNT), k % COUNT);
}
static float wantAlltoAll(int rank, size_t k, int n, int root) {
  (void)n, (void)root;
  return value((int)(k / COUNT), (size_t)rank * COUNT + k % COUNT);
}
static float wantGather(int rank, size_t k, int n, int root) {
  (void)n;
  return rank == root ? value((int)(k / COUNT), k % COUNT) : 0.0f;
}
static float wantScatter(int rank, size_t k, int n, int root) {
  (void)n;
  return value(root, (size_t)rank * COUNT + k);
}
static float wantBroadcast(int rank, size_t k, int n, int root) {
  (void)rank, (void)n;
  return value(root, k);
}

static uint64_t kernels(struct rank* R, int n) {
  uint64_t k = 0;
  for (int i = 0; i < n; i++) k += R[i].comm->nLaunches;
  return k;
}

int main(int argc, char** argv) {
  mcclArgsCheck(argc, argv, 0, "",
                "  A narrated tour of the copy-engine collectives on the devices of this process (2..4 of them):\n"
                "  the flags of the memory-op syncs, an AllGather with no kernel, AlltoAll, Gather, Scatter and\n"
                "  Broadcast, and the kernels that run instead when recvbuff is not in a window.");
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) {
    printf("lab 10 demo: needs 2 devices or more\n");
    return 0;
  }
  if (n > MAXN) n = MAXN;
  mcclLabComm* comms[MAXN];
  struct rank R[MAXN];
  memset(R, 0, sizeof(R));
  MCCLCHECK(mcclLabCommInitAll(comms, n, NULL, 1, mcclLocalTransports));
  for (int i = 0; i < n; i++) {
    R[i].comm = comms[i];
    comms[i]->ceColl.ops = &mcclCeOps;           // the copy-engine collectives (final/ gives them to every comm)
    comms[i]->ctaPolicy = MCCL_CTA_POLICY_ZERO;  // no SM where the engines can do it
    CUDACHECK(cudaSetDevice(i));
    MCCLCHECK(mcclMemAlloc((void**)&R[i].win, WIN));
    MCCLCHECK(mcclMemAlloc((void**)&R[i].plain, WIN));
    CUDACHECK(cudaStreamCreateWithFlags(&R[i].stream, cudaStreamNonBlocking));
  }
  pthread_t th[MAXN];
  for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, registerThread, &R[i]);
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < n; i++) MCCLCHECK(R[i].res);
  printf("[1] %d ranks, CTA policy ZERO, each rank's %zu-byte window registered (every peer maps it)\n", n,
         (size_t)WIN);

  printf(
      "[2] two memory-op syncs on every rank's stream: each writes its flag in every peer's signal area, then\n"
      "    waits for every peer's flag in its own; the host only queues them\n");
  for (int i = 0; i < n; i++) {
    CUDACHECK(cudaSetDevice(i));
    MCCLCHECK(mcclCeMemOpSync(comms[i], R[i].stream));
    MCCLCHECK(mcclCeMemOpSync(comms[i], R[i].stream));
  }
  for (int i = 0; i < n; i++) {
    CUDACHECK(cudaSetDevice(i));
    CUDACHECK(cudaStreamSynchronize(R[i].stream));
  }
  struct mcclSymSignals s;
  CUDACHECK(cudaSetDevice(0));
  CUDACHECK(cudaMemcpy(&s, comms[0]->signalWin->buff, sizeof(s), cudaMemcpyDeviceToHost));
  printf("    rank 0's flags: ceReady");
  for (int p = 0; p < n; p++) printf(" %u", s.ceReady[p]);
  printf(", ceComplete");
  for (int p = 0; p < n; p++) printf(" %u", s.ceComplete[p]);
  printf(" (peer p's slot; its own stays 0); the next sync writes %u into ceReady\n", comms[0]->ceColl.seq + 1);

  MCCLCHECK(fill(R, n, 1));
  uint64_t k0 = kernels(R, n);
  printf(
      "[3] AllGather of %d floats per rank through mcclLabAllGather: recvbuff is in the window, so lab 07's\n"
      "    enqueue layer hands it to the copy engines: sync, one batch of %d copies per rank (its own block,\n"
      "    then one push into each peer's window), sync\n",
      COUNT, n);
  for (int i = 0; i < n; i++) {
    CUDACHECK(cudaSetDevice(i));
    MCCLCHECK(mcclLabAllGather(R[i].win, R[i].win + OUT, COUNT, mcclFloat32, comms[i], R[i].stream));
  }
  int allGood = 1;
  int good = check(R, n, COUNT * (size_t)n, wantAllGather, 0);
  allGood &= good == n;
  printf("    %d of %d ranks hold every rank's block; kernels launched: %llu\n", good, n,
         (unsigned long long)(kernels(R, n) - k0));

  struct {
    const char* name;
    size_t inBlocks, outCount;
    wantFn want;
  } steps[] = {{"AlltoAll", MAXN, COUNT * (size_t)n, wantAlltoAll},
               {"Gather (root 1)", 1, COUNT * (size_t)n, wantGather},
               {"Scatter (root 1)", MAXN, COUNT, wantScatter},
               {"Broadcast (root 1)", 1, COUNT, wantBroadcast}};
  printf("[4] the other functions, each a sync, this rank's pushes, a sync:\n");
  for (int f = 0; f < 4; f++) {
    MCCLCHECK(fill(R, n, steps[f].inBlocks));
    for (int i = 0; i < n; i++) {
      CUDACHECK(cudaSetDevice(i));
      char *in = R[i].win, *out = R[i].win + OUT;
      if (f == 0) MCCLCHECK(mcclLabAlltoAll(in, out, COUNT, mcclFloat32, comms[i], R[i].stream));
      if (f == 1) MCCLCHECK(mcclLabGather(in, out, COUNT, mcclFloat32, 1, comms[i], R[i].stream));
      if (f == 2) MCCLCHECK(mcclLabScatter(in, out, COUNT, mcclFloat32, 1, comms[i], R[i].stream));
      if (f == 3) MCCLCHECK(mcclLabBroadcast(in, out, COUNT, mcclFloat32, 1, comms[i], R[i].stream));
    }
    good = check(R, n, steps[f].outCount, steps[f].want, 1);
    allGood &= good == n;
    printf("    %-18s %d of %d ranks right\n", steps[f].name, good, n);
  }
  printf("    kernels launched by all five: %llu; syncs so far on rank 0: %u\n",
         (unsigned long long)(kernels(R, n) - k0), comms[0]->ceColl.seq - MCCL_CE_FIRST_SEQ + 1);

  printf(
      "[5] the same AllGather into a buffer outside every window: the engines cannot reach the peers' copies,\n"
      "    so the kernels run it (MCCL_DEBUG=INFO says why), never an error\n");
  MCCLCHECK(fill(R, n, 1));
  k0 = kernels(R, n);
  MCCLCHECK(mcclLabGroupStart());  // one thread, n communicators: their kernels wait for each other
  for (int i = 0; i < n; i++) {
    CUDACHECK(cudaSetDevice(i));
    MCCLCHECK(mcclLabAllGather(R[i].win, R[i].plain, COUNT, mcclFloat32, comms[i], R[i].stream));
  }
  MCCLCHECK(mcclLabGroupEnd());
  int goodK = 0;
  float* h = (float*)malloc(BYTES * MAXN);
  for (int i = 0; i < n; i++) {
    int ok = 1;
    CUDACHECK(cudaSetDevice(i));
    CUDACHECK(cudaStreamSynchronize(R[i].stream));
    CUDACHECK(cudaMemcpy(h, R[i].plain, BYTES * (size_t)n, cudaMemcpyDeviceToHost));
    for (size_t k = 0; k < COUNT * (size_t)n && ok; k++) ok = h[k] == wantAllGather(i, k, n, 0);
    goodK += ok;
  }
  free(h);
  allGood &= goodK == n;
  printf("    %d of %d ranks right; kernels launched: %llu (one per rank)\n", goodK, n,
         (unsigned long long)(kernels(R, n) - k0));

  for (int i = 0; i < n; i++) {
    CUDACHECK(cudaSetDevice(i));
    CUDACHECK(cudaStreamDestroy(R[i].stream));
    MCCLCHECK(mcclLabWindowDeregister(comms[i], R[i].w));
    MCCLCHECK(mcclMemFree(R[i].win));
    MCCLCHECK(mcclMemFree(R[i].plain));
    MCCLCHECK(mcclLabCommDestroy(comms[i]));
  }
  printf("[6] done: windows and communicators freed\n");
  return allGood ? 0 : 1;
}
