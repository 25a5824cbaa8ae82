// Lab 06 demo, host side: connections a kernel can drive. One process connects device 0 to device 1
// (or device 0 to itself) over P2P and then over SHM, and shows where each view of the connection
// points: the sender's FIFO and tail are the receiver's memory, mapped for the sender's device; the
// receiver's head is the sender's page. A slot written through the sender's view is read through the
// receiver's, as a producer and a consumer kernel will do it. Finally the device copy of
// mcclConnInfo a kernel loads, and the abort flag it polls.
#include <stdio.h>
#include <string.h>
#include "mccl_args.h"
#include "mccl_checks.h"
#include "mccl_devconn.h"
#include "mccl_p2p.h"
#include "mccl_shm.h"

// Two static buffers in turn: each printf below asks twice.
static const char* where(const void* p) {
  struct cudaPointerAttributes a;
  static char bufs[2][64];
  static int next;
  char* buf = bufs[next++ & 1];
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return "?";
  }
  if (a.type == cudaMemoryTypeDevice) snprintf(buf, sizeof(bufs[0]), "device %d memory", a.device);
  else snprintf(buf, sizeof(bufs[0]), "mapped host memory");
  return buf;
}

static mcclResult_t show(mcclDevTransport_t which, int devB) {
  struct mcclDevPair* p = NULL;
  MCCLCHECK(mcclDevPairLocalCreate(0, devB, 1, MCCL_DEVPAIR_SEND, which, 0, &p));
  struct mcclConnector *s = &p->ends[0].send[0], *r = &p->ends[1].recv[0];
  printf("\n== %s: dev 0 sends to dev %d ==\n", s->transportComm == &mcclP2pTransport.send ? "P2P" : "SHM", devB);
  printf("[1] sender (dev 0) view:   LL FIFO %p, SIMPLE FIFO %p (%s), tail %p, head %p (%s)\n",
         (void*)s->conn.buffs[MCCL_PROTO_LL], (void*)s->conn.buffs[MCCL_PROTO_SIMPLE],
         where(s->conn.buffs[MCCL_PROTO_SIMPLE]), (void*)s->conn.tail, (void*)s->conn.head, where(s->conn.head));
  printf("    receiver (dev %d) view: LL FIFO %p, SIMPLE FIFO %p (%s), tail %p, head %p (%s)\n", devB,
         (void*)r->conn.buffs[MCCL_PROTO_LL], (void*)r->conn.buffs[MCCL_PROTO_SIMPLE],
         where(r->conn.buffs[MCCL_PROTO_SIMPLE]), (void*)r->conn.tail, (void*)r->conn.head, where(r->conn.head));
  printf("    %d slots: SIMPLE %d bytes each, LL %d bytes each (%d lines of 16 B)\n", MCCL_STEPS, s->conn.stepSize,
         s->conn.llStepSize, s->conn.llStepSize / 16);
  // What a producer kernel does for step 0: fill slot 0, say its size in connFifo, publish tail = 1.
  const char msg[] = "hello from the sender's view";
  ssize_t size = (ssize_t)sizeof(msg);
  uint64_t tail = s->conn.step + 1;
  CUDACHECK(cudaSetDevice(0));
  CUDACHECK(cudaMemcpy(s->conn.buffs[MCCL_PROTO_SIMPLE], msg, sizeof(msg), cudaMemcpyDefault));
  CUDACHECK(cudaMemcpy(&s->conn.connFifo[0].size, &size, sizeof(size), cudaMemcpyDefault));
  CUDACHECK(cudaMemcpy(s->conn.tail, &tail, sizeof(tail), cudaMemcpyDefault));
  printf("[2] sender stored slot 0 (%zd bytes), connFifo[0].size and tail = %llu\n", size, (unsigned long long)tail);
  // What the consumer kernel sees on the other device.
  char got[sizeof(msg)];
  ssize_t gotSize = 0;
  uint64_t gotTail = 0, head = r->conn.step + 1;
  CUDACHECK(cudaSetDevice(devB));
  CUDACHECK(cudaMemcpy(&gotTail, r->conn.tail, sizeof(gotTail), cudaMemcpyDefault));
  CUDACHECK(cudaMemcpy(&gotSize, &r->conn.connFifo[0].size, sizeof(gotSize), cudaMemcpyDefault));
  CUDACHECK(cudaMemcpy(got, r->conn.buffs[MCCL_PROTO_SIMPLE], sizeof(got), cudaMemcpyDefault));
  printf("[3] receiver read tail %llu, size %zd, \"%s\"; returns credit: head = %llu\n", (unsigned long long)gotTail,
         gotSize, got, (unsigned long long)head);
  CUDACHECK(cudaMemcpy(r->conn.head, &head, sizeof(head), cudaMemcpyDefault));
  uint64_t seen = 0;
  CUDACHECK(cudaSetDevice(0));
  CUDACHECK(cudaMemcpy(&seen, s->conn.head, sizeof(seen), cudaMemcpyDefault));
  printf("[4] sender sees head %llu: slot 0 is free again\n", (unsigned long long)seen);
  // The copy a kernel would load; it stores the step it reached back at the end.
  struct mcclConnInfo* d = NULL;
  MCCLCHECK(mcclDevConnCreate(s, 1, &d));
  uint64_t step = 1;
  CUDACHECK(cudaMemcpy(&d->step, &step, sizeof(step), cudaMemcpyHostToDevice));
  MCCLCHECK(mcclDevConnReadStep(s, 1, d));
  printf("[5] device copy of the sender's mcclConnInfo at %p; step written back: %llu\n", (void*)d,
         (unsigned long long)s->conn.step);
  MCCLCHECK(mcclDevConnFree(d));
  MCCLCHECK(mcclDevPairLocalFree(p));
  return mcclSuccess;
}

int main(int argc, char** argv) {
  mcclArgsCheck(argc, argv, 0, "", "Lab 06's narrated example: two devices of this process connected over P2P, then SHM.");
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
    printf("no CUDA device\n");
    return 0;
  }
  int devB = n > 1 ? 1 : 0;
  volatile uint32_t* abortHost = NULL;
  uint32_t* abortDev = NULL;
  MCCLCHECK(mcclDevAbortFlagCreate(&abortHost, &abortDev));
  printf("abort flag: host %p, device %p (kernels poll it every MCCL_SPINS_BEFORE_CHECK_ABORT spins)\n",
         (void*)abortHost, (void*)abortDev);
  mcclPeerInfo a, b;
  MCCLCHECK(mcclFillPeerInfo(0, 0, &a));
  MCCLCHECK(mcclFillPeerInfo(1, devB, &b));
  int ok = 0;
  MCCLCHECK(mcclP2pTransport.canConnect(&ok, NULL, &a, &b));
  printf("P2P canConnect(dev 0, dev %d) = %d\n", devB, ok);
  if (ok) MCCLCHECK(show(mcclDevTransportP2p, devB));
  MCCLCHECK(show(mcclDevTransportShm, devB));
  MCCLCHECK(mcclDevAbortFlagFree(abortHost));
  printf("\nall connections freed\n");
  return 0;
}
