// Lab 06 demo: a sender kernel and a receiver kernel, narrated by their own threads.
//
// One process connects device 0 to device 1 (or device 0 to itself when there is one device) with one
// channel, over P2P and then over SHM. On each connection it launches a receiver kernel (mcclDevOpRecv)
// on the receiving device and a sender kernel (mcclDevOpSend) on the sending one, first with the SIMPLE
// protocol, then with LL, then (P2P only) with LL128, with mcclDevWork::trace = 1: the threads that hold a role
// (WaitRecv, WaitSend, PostRecv, PostSend) print, with device printf, what they waited for and what they published. The
// message is ten FIFO steps (more than the MCCL_STEPS = 8 slots, so the sender must wait for the receiver to return a
// slot); the demo checks every byte and says so.
//
// Small FIFOs (MCCL_BUFFSIZE=65536: 8 KiB slots; MCCL_LL_BUFFSIZE=8192: 1 KiB slots of 64 lines;
// MCCL_LL128_BUFFSIZE=16384: 2 KiB slots, one warp's slice of 1920 data bytes) keep
// the message small. Blocks are 64 threads on both backends (the sim's cap), one block per kernel.
// Only the first transport is narrated; the second runs the same kernels quietly.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mccl_args.h"
#include "mccl_checks.h"
#include "mccl_devconn.h"
#include "mccl_p2p.h"
#include "mccl_param.h"
#include "mccl_prims.h"
#include "mccl_shm.h"

#define NTHREADS 64
#define NSTEPS 10  // steps per message: 9 full slots and 3 bytes

static const char* where(const void* p) {
  struct cudaPointerAttributes a;
  static char buf[64];
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return "?";
  }
  if (a.type == cudaMemoryTypeDevice)
    snprintf(buf, sizeof(buf), "device %d memory", a.device);
  else
    snprintf(buf, sizeof(buf), "mapped host memory");
  return buf;
}

// A status word the kernel writes (mcclDevWork::status) in host-mapped memory.
static mcclResult_t statusCreate(volatile int** host, int** dev) {
  int* h = NULL;
  void* d = NULL;
  CUDACHECK(cudaHostAlloc((void**)&h, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  *h = mcclDevStatusRunning;
  if (cudaHostGetDevicePointer(&d, h, 0) != cudaSuccess) {
    cudaFreeHost(h);
    return mcclUnhandledCudaError;
  }
  *host = h;
  *dev = (int*)d;
  return mcclSuccess;
}

struct demoEnv {
  int devB;                      // the receiving device (0 or 1); the sender is device 0
  volatile uint32_t* abortHost;  // one abort flag for both kernels
  uint32_t* abortDev;
};

// Send one message of NSTEPS steps with `proto` from end 0 to end 1 of the pair and check it.
static mcclResult_t runProto(const struct demoEnv* env, struct mcclDevPair* p, struct mcclConnInfo* dSend,
                             struct mcclConnInfo* dRecv, int proto, int trace, int* ok) {
  struct mcclConnector *s = &p->ends[0].send[0], *r = &p->ends[1].recv[0];
  const int isLL = proto == MCCL_PROTO_LL, isLL128 = proto == MCCL_PROTO_LL128;
  // Data bytes one step carries: a SIMPLE slot less the room a shifted start may take (one step a slice here),
  // 8 bytes per 16-byte LL line, or 120 per 128-byte LL128 line.
  const size_t stepBytes = isLL      ? (size_t)s->conn.llStepSize / 2
                           : isLL128 ? (size_t)s->conn.ll128StepSize / 128 * 120
                                     : (size_t)MCCL_SIMPLE_SLICE_DATA(s->conn.stepSize);
  const size_t nbytes = (NSTEPS - 1) * stepBytes + 3;
  mcclResult_t res = mcclSuccess;
  unsigned char *src = NULL, *dst = NULL, *host = NULL;
  cudaStream_t sendStream = NULL, recvStream = NULL;
  volatile int *sendStatusH = NULL, *recvStatusH = NULL;
  int *sendStatusD = NULL, *recvStatusD = NULL;

  host = (unsigned char*)malloc(nbytes);
  if (host == NULL) return mcclSystemError;
  for (size_t i = 0; i < nbytes; i++) host[i] = (unsigned char)(i % 251);
  MCCLCHECKGOTO(statusCreate(&sendStatusH, &sendStatusD), res, out);
  MCCLCHECKGOTO(statusCreate(&recvStatusH, &recvStatusD), res, out);
  CUDACHECKGOTO(cudaSetDevice(0), res, out);
  CUDACHECKGOTO(cudaStreamCreateWithFlags(&sendStream, cudaStreamNonBlocking), res, out);
  CUDACHECKGOTO(cudaMalloc((void**)&src, nbytes), res, out);
  // Queued on the stream the kernel will use: a NULL-stream cudaMemcpy may return before its bytes land,
  // and a non-blocking stream does not wait for the NULL stream.
  CUDACHECKGOTO(cudaMemcpyAsync(src, host, nbytes, cudaMemcpyHostToDevice, sendStream), res, out);
  CUDACHECKGOTO(cudaSetDevice(env->devB), res, out);
  CUDACHECKGOTO(cudaStreamCreateWithFlags(&recvStream, cudaStreamNonBlocking), res, out);
  CUDACHECKGOTO(cudaMalloc((void**)&dst, nbytes), res, out);
  CUDACHECKGOTO(cudaMemsetAsync(dst, 0, nbytes, recvStream), res, out);

  uint64_t step0 = s->conn.step;
  printf("\n[host] %s: %zu bytes from device 0 to device %d, %zu bytes per step -> %d steps, from step %llu\n",
         mcclProtoName(proto), nbytes, env->devB, stepBytes, NSTEPS, (unsigned long long)step0);
  if (trace && proto == MCCL_PROTO_SIMPLE) {
    printf(
        "[host] What to look for (one slot per step: chunkSteps 2, sliceSteps 1):\n"
        "[host]   sender   thread 0  WaitSend: waits until the receiver's head leaves a free slot\n"
        "[host]                      (head + %d >= step + 1): the first %d steps go at once, the rest wait\n"
        "[host]   sender   thread %d PostSend: after the workers filled the slot, fence, then tail = step + 1\n"
        "[host]   receiver thread 0  WaitRecv: waits until the sender's tail >= step + 1\n"
        "[host]   receiver thread %d PostRecv: after the workers copied the slot out, head = step + 1\n",
        MCCL_STEPS, MCCL_STEPS, NTHREADS - 1, NTHREADS - 1);
  } else if (trace && isLL128) {
    printf(
        "[host] What to look for: no tail either. Each 128-byte line carries 120 data bytes and one flag word,\n"
        "[host]   stored by eight lanes of a warp at once (NVLink delivers the line whole); a receiving warp\n"
        "[host]   votes until its flag lanes see the step. Thread 0 waits for a free slot (WaitSend), the first\n"
        "[host]   thread of the last warp (%d) returns it (PostRecv) once every warp has read it.\n",
        NTHREADS - 32);
  } else if (trace) {
    printf(
        "[host] What to look for: no tail. Each 16-byte line carries 8 data bytes and the step's flag twice;\n"
        "[host]   every receiver thread spins on its own line until the flags match (nothing is printed for\n"
        "[host]   that). One sender thread (%d) waits for a free slot (WaitSend) and one receiver thread (0)\n"
        "[host]   returns the slot (PostRecv: head = step + 1) once the whole block has read it.\n",
        NTHREADS - 32);
  }
  if (trace)
    printf(
        "[host] Launching the receiver on device %d, then the sender on device 0. On the sim their lines interleave\n"
        "[host]   as they happen; a GPU buffers device printf until the host synchronizes with the device, so\n"
        "[host]   there each kernel's lines come as one group. The kernels:\n",
        env->devB);
  fflush(stdout);

  struct mcclDevWork w;
  memset(&w, 0, sizeof(w));
  w.proto = proto;
  w.dtype = mcclUint8;
  w.redop = mcclSum;
  w.nchannels = 1;
  w.count = nbytes;
  w.chunkSteps = 2;
  w.sliceSteps = 1;
  w.abortFlag = env->abortDev;
  w.trace = trace;
  struct mcclDevWork rw = w, sw = w;
  rw.op = mcclDevOpRecv;
  rw.dst = dst;
  rw.recvConns = dRecv;
  rw.status = recvStatusD;
  sw.op = mcclDevOpSend;
  sw.src = src;
  sw.sendConns = dSend;
  sw.status = sendStatusD;
  CUDACHECKGOTO(cudaSetDevice(env->devB), res, out);
  MCCLCHECKGOTO(mcclDevLaunch(&rw, NTHREADS, recvStream), res, out);
  CUDACHECKGOTO(cudaSetDevice(0), res, out);
  MCCLCHECKGOTO(mcclDevLaunch(&sw, NTHREADS, sendStream), res, out);
  // A kernel that sees no progress for MCCL_SHM_TIMEOUT ms is aborted (the same bound as lab 04's SHM
  // send/recv; `make gdb` sets it to 0, wait forever, as a thread may sit at a breakpoint).
  int64_t timeoutMs = mcclParamShmTimeout();
  MCCLCHECKGOTO(mcclDevWait(sendStream, env->abortHost, sendStatusH, timeoutMs), res, out);
  CUDACHECKGOTO(cudaSetDevice(env->devB), res, out);
  MCCLCHECKGOTO(mcclDevWait(recvStream, env->abortHost, recvStatusH, timeoutMs), res, out);
  // On a GPU device printf is flushed when the host synchronizes with the device.
  CUDACHECKGOTO(cudaDeviceSynchronize(), res, out);
  CUDACHECKGOTO(cudaSetDevice(0), res, out);
  CUDACHECKGOTO(cudaDeviceSynchronize(), res, out);
  fflush(stdout);

  MCCLCHECKGOTO(mcclDevConnReadStep(s, 1, dSend), res, out);
  MCCLCHECKGOTO(mcclDevConnReadStep(r, 1, dRecv), res, out);
  // Through the sender's view, with its device current (P2P maps the peer's memory for that device only).
  uint64_t head = 0, tail = 0;
  CUDACHECKGOTO(cudaMemcpy(&head, s->conn.head, sizeof(head), cudaMemcpyDefault), res, out);
  const int hasTail = proto == MCCL_PROTO_SIMPLE;
  if (hasTail) CUDACHECKGOTO(cudaMemcpy(&tail, s->conn.tail, sizeof(tail), cudaMemcpyDefault), res, out);
  printf("[host] Both kernels ended. Steps written back: sender %llu, receiver %llu; head %llu",
         (unsigned long long)s->conn.step, (unsigned long long)r->conn.step, (unsigned long long)head);
  if (hasTail) printf(", tail %llu", (unsigned long long)tail);
  printf(" (the next launch starts there)\n");

  memset(host, 0, nbytes);
  CUDACHECKGOTO(cudaSetDevice(env->devB), res, out);
  CUDACHECKGOTO(cudaMemcpy(host, dst, nbytes, cudaMemcpyDeviceToHost), res, out);
  size_t bad = 0, firstBad = 0;
  for (size_t i = nbytes; i-- > 0;) {
    if (host[i] != (unsigned char)(i % 251)) {
      bad++;
      firstBad = i;
    }
  }
  if (bad == 0 && s->conn.step == step0 + NSTEPS && r->conn.step == step0 + NSTEPS) {
    printf("[host] Data check: all %zu bytes arrived intact on device %d.\n", nbytes, env->devB);
  } else {
    printf("[host] Data check FAILED: %zu of %zu bytes differ (first at %zu); steps %llu/%llu, expected %llu.\n", bad,
           nbytes, firstBad, (unsigned long long)s->conn.step, (unsigned long long)r->conn.step,
           (unsigned long long)(step0 + NSTEPS));
    *ok = 0;
  }
out:
  cudaSetDevice(0);
  if (src) cudaFree(src);
  if (sendStream) cudaStreamDestroy(sendStream);
  cudaSetDevice(env->devB);
  if (dst) cudaFree(dst);
  if (recvStream) cudaStreamDestroy(recvStream);
  if (sendStatusH) cudaFreeHost((void*)sendStatusH);
  if (recvStatusH) cudaFreeHost((void*)recvStatusH);
  free(host);
  cudaSetDevice(0);
  return res;
}

static mcclResult_t runTransport(const struct demoEnv* env, mcclDevTransport_t which, int trace, int* ok) {
  struct mcclDevPair* p = NULL;
  struct mcclConnInfo *dSend = NULL, *dRecv = NULL;
  mcclResult_t res = mcclSuccess;
  MCCLCHECK(mcclDevPairLocalCreate(0, env->devB, 1, MCCL_DEVPAIR_SEND, which, 0, &p));
  struct mcclConnector *s = &p->ends[0].send[0], *r = &p->ends[1].recv[0];
  printf("\n======== %s: device 0 sends to device %d, one channel ========\n",
         s->transportComm == &mcclP2pTransport.send ? "P2P" : "SHM", env->devB);
  printf("[host] The receiver's FIFOs and tail are in %s", where(r->conn.buffs[MCCL_PROTO_SIMPLE]));
  printf("; the sender's head in %s.\n", where(s->conn.head));
  printf("[host] %d slots per FIFO: SIMPLE %d bytes each, LL %d bytes each (%d lines of 16 B), LL128 %d bytes each.\n",
         MCCL_STEPS, s->conn.stepSize, s->conn.llStepSize, s->conn.llStepSize / 16, s->conn.ll128StepSize);
  if (!trace) printf("[host] The same kernels as above, without the narration.\n");
  // The copies of mcclConnInfo the kernels load, each on its kernel's device; they write `step` back.
  CUDACHECKGOTO(cudaSetDevice(0), res, out);
  MCCLCHECKGOTO(mcclDevConnCreate(s, 1, &dSend), res, out);
  CUDACHECKGOTO(cudaSetDevice(env->devB), res, out);
  MCCLCHECKGOTO(mcclDevConnCreate(r, 1, &dRecv), res, out);
  MCCLCHECKGOTO(runProto(env, p, dSend, dRecv, MCCL_PROTO_SIMPLE, trace, ok), res, out);
  MCCLCHECKGOTO(runProto(env, p, dSend, dRecv, MCCL_PROTO_LL, trace, ok), res, out);
  // LL128 where the connection has its FIFO: P2P only (SHM's host memory makes no 128-byte promise).
  if (s->conn.buffs[MCCL_PROTO_LL128] != NULL)
    MCCLCHECKGOTO(runProto(env, p, dSend, dRecv, MCCL_PROTO_LL128, trace, ok), res, out);
  else
    printf("[host] No LL128 over SHM: its FIFOs are in host memory, which promises no 128-byte line delivery.\n");
out:
  if (dRecv) mcclDevConnFree(dRecv);
  if (dSend) mcclDevConnFree(dSend);
  mcclResult_t fr = mcclDevPairLocalFree(p);
  return res != mcclSuccess ? res : fr;
}

int main(int argc, char** argv) {
  mcclArgsCheck(
      argc, argv, 0, "",
      "Lab 06's narrated example: a sender kernel on device 0 and a receiver kernel on device 1 (device 0\n"
      "again when there is one) move a ten-step message over P2P, then SHM, with SIMPLE and LL (and LL128 on\n"
      "P2P); the threads that wait and publish print what they saw. Checks every byte.\n"
      "Settings come from MCCL_* environment variables (docs/parameters.md).");
  setvbuf(stdout, NULL, _IOLBF, 0);
  // Small FIFOs so that a small message takes several steps (unless the caller chose others).
  setenv("MCCL_BUFFSIZE", "65536", 0);
  setenv("MCCL_LL_BUFFSIZE", "8192", 0);
  setenv("MCCL_LL128_BUFFSIZE", "16384", 0);
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
    printf("no CUDA device\n");
    return 1;
  }
  struct demoEnv env = {.devB = n > 1 ? 1 : 0};
  if (mcclDevAbortFlagCreate(&env.abortHost, &env.abortDev) != mcclSuccess) return 1;
  printf(
      "[host] Abort flag in mapped host memory: the kernels' waiters read it every MCCL_SPINS_BEFORE_CHECK_ABORT"
      " spins.\n");
  if (env.devB == 0) printf("[host] One device: both kernels run on device 0, on two streams.\n");
  mcclPeerInfo a, b;
  int p2p = 0, ok = 1, traced = 0;
  mcclResult_t res = mcclFillPeerInfo(0, 0, &a);
  if (res == mcclSuccess) res = mcclFillPeerInfo(1, env.devB, &b);
  if (res == mcclSuccess) res = mcclP2pTransport.canConnect(&p2p, NULL, &a, &b);
  if (res == mcclSuccess) {
    if (p2p) {
      res = runTransport(&env, mcclDevTransportP2p, 1, &ok);
      traced = 1;
    } else {
      printf(
          "[host] P2P cannot connect device 0 and device %d here (MCCL_P2P_DISABLE, MCCL_CUMEM_ENABLE=0 or no "
          "peer access): SHM only.\n",
          env.devB);
    }
  }
  if (res == mcclSuccess) res = runTransport(&env, mcclDevTransportShm, !traced, &ok);
  mcclDevAbortFlagFree(env.abortHost);
  if (res != mcclSuccess) {
    fprintf(stderr, "demo: %s\n", mcclGetErrorString(res));
    return 1;
  }
  printf("\n[host] Every connection freed. Demo %s.\n", ok ? "done: every message arrived intact" : "FAILED");
  return ok ? 0 : 1;
}
