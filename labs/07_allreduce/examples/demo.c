// Lab 07 demo (host side): one process drives N devices, one communicator each (mcclLabCommInitAll):
// prints each rank's ring neighbours and the transport of its channels, registers a window on every
// device and reads a peer's buffer through the mapping, then frees everything. The allreduce
// kernels come with the rest of lab 07.
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "mccl_alloc.h"
#include "mccl_allreduce.h"
#include "mccl_args.h"
#include "mccl_checks.h"

struct reg {
  mcclLabComm* comm;
  void* buf;
  mcclLabWindow* win;
  mcclResult_t res;
};
static void* regThread(void* p) {
  struct reg* r = (struct reg*)p;
  r->res = mcclLabWindowRegister(r->comm, r->buf, 4096, &r->win);
  return NULL;
}

int main(int argc, char** argv) {
  mcclArgsCheck(argc, argv, 2, "[ndev] [nchannels]",
                "  ndev       devices, one rank each, 2..8 (default 4, at most the devices present)\n"
                "  nchannels  channels per rank, 1..8 (default 2)");
  int want = (int)mcclArgsInt(argc, argv, 1, "ndev", 4, 2, 8);
  int nChannels = (int)mcclArgsInt(argc, argv, 2, "nchannels", 2, 1, 8);
  int present = 0;
  CUDACHECK(cudaGetDeviceCount(&present));
  int n = want < present ? want : present;
  if (n < 2) {
    printf("lab 07 demo: needs 2 devices, %d present\n", present);
    return 0;
  }
  mcclLabComm* comms[8];
  printf("[1] mcclLabCommInitAll: %d ranks on devices 0..%d, %d channel(s) each\n", n, n - 1, nChannels);
  MCCLCHECK(mcclLabCommInitAll(comms, n, NULL, nChannels));
  for (int r = 0; r < n; r++)
    printf("    rank %d (dev %d): recv from %d, send to %d, ring position %d, channel 0 via %s\n", r,
           comms[r]->cudaDev, comms[r]->ring.prev, comms[r]->ring.next, comms[r]->ring.index,
           comms[r]->transport[0] == TRANSPORT_P2P ? "P2P" : "SHM");
  printf("[2] a 4 KiB window on every device, mapped by every rank\n");
  struct reg regs[8];
  pthread_t th[8];
  memset(regs, 0, sizeof(regs));
  for (int r = 0; r < n; r++) {
    CUDACHECK(cudaSetDevice(comms[r]->cudaDev));
    MCCLCHECK(mcclMemAlloc(&regs[r].buf, 4096));
    int v = 1000 + r;
    CUDACHECK(cudaMemcpy(regs[r].buf, &v, sizeof(v), cudaMemcpyHostToDevice));
    regs[r].comm = comms[r];
  }
  for (int r = 0; r < n; r++) pthread_create(&th[r], NULL, regThread, &regs[r]);
  for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < n; r++) MCCLCHECK(regs[r].res);
  for (int r = 0; r < n; r++) {
    int next = comms[r]->ring.next, v = 0;
    CUDACHECK(cudaSetDevice(comms[r]->cudaDev));
    CUDACHECK(cudaMemcpy(&v, regs[r].win->peerPtrs[next], sizeof(v), cudaMemcpyDeviceToHost));
    printf("    rank %d reads rank %d's buffer at %p: %d\n", r, next, regs[r].win->peerPtrs[next], v);
  }
  printf("[3] deregister, free, destroy\n");
  for (int r = 0; r < n; r++) {
    MCCLCHECK(mcclLabWindowDeregister(comms[r], regs[r].win));
    MCCLCHECK(mcclMemFree(regs[r].buf));
    MCCLCHECK(mcclLabCommDestroy(comms[r]));
  }
  printf("done\n");
  return 0;
}
