// Lab 10 tests: what the one-process tests (one communicator per sim device) and the mpirun tests (one rank per
// process) share: a rank's window and plain buffer, where a call's buffers sit in them, the bytes every rank's
// input holds, the image every rank's output must show afterwards (the bytes around the output included), and
// one call issued either straight to the copy engines or through lab 07's calls under a CTA policy.
#ifndef CE_TEST_UTIL_H_
#define CE_TEST_UTIL_H_

#include <stdlib.h>
#include <string.h>
#include "mccl_alloc.h"
#include "mccl_ce.h"
#include "mccl_checks.h"
#include "mccl_elt.h"
#include "mccl_test.h"

#define CE_WIN ((size_t)4 << 20)       // each rank's window (and its plain buffer)
#define CE_RECV_OFF ((size_t)4096)     // the output region's start in the window
#define CE_SEND_OFF ((size_t)2 << 20)  // an input's start, in the window or in the plain buffer
#define CE_GUARD ((size_t)64)          // bytes after the output region that no call may touch
#define CE_SENTINEL 0xee

struct ceRank {
  mcclLabComm* comm;
  char* win;    // registered as a window (w)
  char* plain;  // never registered
  mcclLabWindow* w;
  cudaStream_t stream;
};

// One call: the function, its elements and their size, the root, and where the buffers are.
struct ceCall {
  int func;       // enum mcclFunc
  size_t count;   // elements (per rank pair)
  size_t esize;   // 1, 2, 4 or 8
  int root;       // Gather, Scatter, Broadcast
  int inPlace;    // the call's in-place form (nccl-tests' layout on every rank)
  int sendInWin;  // the out-of-place input in the window (1) or in the plain buffer (0)
  int viaLab07;   // 1: lab 07's call (mcclLabAllGather, ...) under the communicator's policy; 0: mcclLaunchCeColl
};

static inline mcclDataType_t ceType(size_t esize) {
  return esize == 1 ? mcclInt8 : esize == 2 ? mcclFloat16 : esize == 4 ? mcclFloat32 : mcclFloat64;
}

static inline const char* ceFuncName(int func) {
  switch (func) {
    case mcclFuncAllGather:
      return "AllGather";
    case mcclFuncAlltoAll:
      return "AlltoAll";
    case mcclFuncGather:
      return "Gather";
    case mcclFuncScatter:
      return "Scatter";
    case mcclFuncBroadcast:
      return "Broadcast";
    default:
      return "?";
  }
}

// Byte i of rank r's input for a call tagged `tag`: every rank, byte and call differ.
static inline unsigned char ceByte(int rank, size_t i, uint64_t tag) {
  return (unsigned char)(rank * 131 + i * 7 + (i >> 8) + tag * 29 + 1);
}

// Bytes of rank r's input: every block it sends (AlltoAll, the Scatter root), else one; none where it sends
// nothing (the Scatter and Broadcast non-roots).
static inline size_t ceSendBytes(const struct ceCall* c, int n, int rank) {
  const size_t b = c->count * c->esize;
  if ((c->func == mcclFuncScatter || c->func == mcclFuncBroadcast) && rank != c->root) return 0;
  return c->func == mcclFuncAlltoAll || c->func == mcclFuncScatter ? b * (size_t)n : b;
}

// The output region a check reads: every block, then the guard.
static inline size_t ceRegionBytes(const struct ceCall* c, int n) {
  return c->count * c->esize * (size_t)n + CE_GUARD;
}

// Where rank r's buffers are. In place, nccl-tests' layout: AllGather and Gather's input is block `rank` of the
// output, Scatter's output block `rank` of the input, Broadcast's the same buffer (AlltoAll's in-place result is
// not defined, so it has none).
static inline void ceBuffers(const struct ceRank* r, const struct ceCall* c, int rank, char** send, char** recv) {
  const size_t b = c->count * c->esize;
  char* out = r->win + CE_RECV_OFF;
  *send = (c->sendInWin ? r->win : r->plain) + CE_SEND_OFF;
  *recv = out;
  if (!c->inPlace) return;
  switch (c->func) {
    case mcclFuncAllGather:
    case mcclFuncGather:
      *send = out + (size_t)rank * b;
      break;
    case mcclFuncScatter:
      *send = out;
      *recv = out + (size_t)rank * b;
      break;
    default:
      *send = out;
      break;
  }
}

// The output region as rank r must find it after the call: sentinel bytes, the inputs that lie in it (in place),
// and the blocks the call writes. host: ceRegionBytes bytes.
static inline void ceExpected(const struct ceCall* c, int n, int rank, uint64_t tag, unsigned char* host) {
  const size_t b = c->count * c->esize;
  memset(host, CE_SENTINEL, ceRegionBytes(c, n));
  if (c->inPlace && ceSendBytes(c, n, rank) > 0) {  // the input as it was put there
    const size_t at = c->func == mcclFuncAllGather || c->func == mcclFuncGather ? (size_t)rank * b : 0;
    for (size_t i = 0; i < ceSendBytes(c, n, rank); i++) host[at + i] = ceByte(rank, i, tag);
  }
  const size_t at = c->inPlace && c->func == mcclFuncScatter ? (size_t)rank * b : 0;  // the output's start
  for (size_t i = 0; i < b; i++)
    for (int p = 0; p < n; p++) switch (c->func) {
        case mcclFuncAllGather:
          host[(size_t)p * b + i] = ceByte(p, i, tag);
          break;
        case mcclFuncAlltoAll:
          host[(size_t)p * b + i] = ceByte(p, (size_t)rank * b + i, tag);
          break;
        case mcclFuncGather:
          if (rank == c->root) host[(size_t)p * b + i] = ceByte(p, i, tag);
          break;
        case mcclFuncScatter:
          if (p == c->root) host[at + i] = ceByte(p, (size_t)rank * b + i, tag);
          break;
        default:
          if (p == c->root) host[i] = ceByte(p, i, tag);
          break;
      }
}

// Put rank r's region and input in place (landed before anything is queued on its stream).
static inline void ceSetUp(struct ceRank* r, const struct ceCall* c, int n, int rank, uint64_t tag) {
  const size_t region = ceRegionBytes(c, n), sendBytes = ceSendBytes(c, n, rank);
  unsigned char* host = (unsigned char*)malloc(region > sendBytes ? region : sendBytes + 1);
  char *send, *recv;
  ceBuffers(r, c, rank, &send, &recv);
  EXPECT_CUDA_OK(cudaSetDevice(r->comm->cudaDev));
  memset(host, CE_SENTINEL, region);
  EXPECT_CUDA_OK(mcclTestCopyToDevice(r->win + CE_RECV_OFF, host, region));
  for (size_t i = 0; i < sendBytes; i++) host[i] = ceByte(rank, i, tag);
  if (sendBytes > 0) EXPECT_CUDA_OK(mcclTestCopyToDevice(send, host, sendBytes));
  free(host);
}

// Issue rank r's share of the call on its stream (its device current).
static inline mcclResult_t ceIssue(struct ceRank* r, const struct ceCall* c, int rank) {
  char *send, *recv;
  ceBuffers(r, c, rank, &send, &recv);
  if (cudaSetDevice(r->comm->cudaDev) != cudaSuccess) return mcclUnhandledCudaError;
  const mcclDataType_t t = ceType(c->esize);
  mcclLabComm* comm = r->comm;
  if (c->viaLab07) switch (c->func) {
      case mcclFuncAllGather:
        return mcclLabAllGather(send, recv, c->count, t, comm, r->stream);
      case mcclFuncAlltoAll:
        return mcclLabAlltoAll(send, recv, c->count, t, comm, r->stream);
      case mcclFuncGather:
        return mcclLabGather(send, recv, c->count, t, c->root, comm, r->stream);
      case mcclFuncScatter:
        return mcclLabScatter(send, recv, c->count, t, c->root, comm, r->stream);
      default:
        return mcclLabBroadcast(send, recv, c->count, t, c->root, comm, r->stream);
    }
  struct mcclLabCeCollArgs a = {c->func, c->root, c->count, c->esize, send, recv, NULL, NULL, 0, 0, 0};
  size_t off;
  const size_t b = c->count * c->esize;
  MCCLCHECK(mcclLabWindowFind(comm, send, b, &a.sendWin, &off));
  MCCLCHECK(mcclLabWindowFind(comm, recv, b, &a.recvWin, &off));
  return mcclLaunchCeColl(comm, &a, r->stream);
}

// Wait for rank r's stream and compare its output region with the expected image; 1 if it matches.
static inline int ceCheck(struct ceRank* r, const struct ceCall* c, int n, int rank, uint64_t tag) {
  const size_t region = ceRegionBytes(c, n);
  unsigned char* want = (unsigned char*)malloc(region);
  unsigned char* got = (unsigned char*)malloc(region);
  ceExpected(c, n, rank, tag, want);
  cudaError_t e = cudaSetDevice(r->comm->cudaDev);
  if (e == cudaSuccess) e = cudaStreamSynchronize(r->stream);
  if (e == cudaSuccess) e = cudaMemcpy(got, r->win + CE_RECV_OFF, region, cudaMemcpyDeviceToHost);
  int ok = e == cudaSuccess;
  if (!ok) mcclTestFailAt(__FILE__, __LINE__, "rank %d: reading the output back: %s", rank, cudaGetErrorString(e));
  for (size_t i = 0; i < region && ok; i++)
    if (got[i] != want[i]) {
      mcclTestFailAt(__FILE__, __LINE__,
                     "%s on rank %d of %d (count %zu x %zu bytes, root %d, %s, %s): byte %zu of the output region is "
                     "0x%02x, expected 0x%02x",
                     ceFuncName(c->func), rank, n, c->count, c->esize, c->root,
                     c->inPlace ? "in place" : "out of place", c->viaLab07 ? "lab 07's call" : "mcclLaunchCeColl", i,
                     got[i], want[i]);
      ok = 0;
    }
  free(want);
  free(got);
  return ok;
}

// The rank's local set-up: its buffers and a stream (the window is registered by the caller: collective).
static inline void ceAlloc(struct ceRank* r) {
  EXPECT_CUDA_OK(cudaSetDevice(r->comm->cudaDev));
  EXPECT_OK(mcclMemAlloc((void**)&r->win, CE_WIN));
  EXPECT_OK(mcclMemAlloc((void**)&r->plain, CE_WIN));
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking));
}

static inline void ceFree(struct ceRank* r) {
  if (r->comm == NULL) return;
  EXPECT_CUDA_OK(cudaSetDevice(r->comm->cudaDev));
  if (r->stream) EXPECT_CUDA_OK(cudaStreamDestroy(r->stream));
  if (r->w) EXPECT_OK(mcclLabWindowDeregister(r->comm, r->w));
  EXPECT_OK(mcclMemFree(r->win));
  EXPECT_OK(mcclMemFree(r->plain));
}

// ---- the assisted allreduce ---------------------------------------------------------------------------------
// Inputs are small integers, so every sum, product, maximum and minimum over 4 ranks is exact in every type
// (integer types wrap as the kernels do).
static inline int64_t ceArValue(int rank, size_t i, int op, uint64_t tag) {
  if (op == mcclProd) return (int64_t)((i + (size_t)rank + tag) % 2) + 1;
  return (int64_t)((i * 7 + (size_t)rank * 13 + tag) % 7) - 3;
}

// Rank r's input (in its window, at CE_SEND_OFF) and its output region (CE_RECV_OFF) filled with the sentinel.
static inline void ceArSetUp(struct ceRank* r, size_t count, mcclDataType_t t, int op, int rank, uint64_t tag) {
  const size_t bytes = count * mcclTypeSize(t);
  unsigned char* h = (unsigned char*)malloc(bytes + CE_GUARD);
  EXPECT_CUDA_OK(cudaSetDevice(r->comm->cudaDev));
  memset(h, CE_SENTINEL, bytes + CE_GUARD);
  EXPECT_CUDA_OK(mcclTestCopyToDevice(r->win + CE_RECV_OFF, h, bytes + CE_GUARD));
  for (size_t i = 0; i < count; i++) mcclEltSetInt(t, h, i, ceArValue(rank, i, op, tag));
  EXPECT_CUDA_OK(mcclTestCopyToDevice(r->win + CE_SEND_OFF, h, bytes));
  free(h);
}

// Rank r's share: straight to the engines (the window's two buffers), or lab 07's call (MCCL_ALGO decides).
static inline mcclResult_t ceArIssue(struct ceRank* r, size_t count, mcclDataType_t t, int op, int viaLab07) {
  if (cudaSetDevice(r->comm->cudaDev) != cudaSuccess) return mcclUnhandledCudaError;
  char *send = r->win + CE_SEND_OFF, *recv = r->win + CE_RECV_OFF;
  if (viaLab07) return mcclLabAllReduce(send, recv, count, t, (mcclRedOp_t)op, r->comm, r->stream);
  struct mcclLabCeCollArgs a = {mcclFuncAllReduce, 0, count, mcclTypeSize(t), send, recv, r->w, r->w, (int)t, op, 0};
  return mcclLaunchCeColl(r->comm, &a, r->stream);
}

// Rank r's output: every element the operation over n ranks, the guard untouched.
static inline void ceArCheck(struct ceRank* r, size_t count, mcclDataType_t t, int op, int n, uint64_t tag) {
  const size_t es = mcclTypeSize(t), bytes = count * es;
  unsigned char* got = (unsigned char*)malloc(bytes + CE_GUARD);
  unsigned char want[8];
  EXPECT_CUDA_OK(cudaSetDevice(r->comm->cudaDev));
  EXPECT_CUDA_OK(cudaStreamSynchronize(r->stream));
  EXPECT_CUDA_OK(cudaMemcpy(got, r->win + CE_RECV_OFF, bytes + CE_GUARD, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < count && !mcclTestStopped(); i++) {
    int64_t acc = ceArValue(0, i, op, tag);
    for (int p = 1; p < n; p++) {
      const int64_t x = ceArValue(p, i, op, tag);
      acc = op == mcclSum    ? acc + x
            : op == mcclProd ? acc * x
            : op == mcclMax  ? (x > acc ? x : acc)
                             : (x < acc ? x : acc);
    }
    mcclEltSetInt(t, want, 0, acc);  // in the type: wrapped as the kernel wraps
    if (memcmp(got + i * es, want, es) != 0)
      mcclTestFailAt(__FILE__, __LINE__,
                     "AllReduce (%s, op %d, count %zu) on rank %d of %d: element %zu is %g, expected %g",
                     mcclTypeName(t), op, count, r->comm->rank, n, i, mcclEltGet(t, got, i), mcclEltGet(t, want, 0));
  }
  for (size_t i = bytes; i < bytes + CE_GUARD && !mcclTestStopped(); i++)
    if (got[i] != CE_SENTINEL)
      mcclTestFailAt(__FILE__, __LINE__, "AllReduce (count %zu) on rank %d: byte %zu past the output was written",
                     count, r->comm->rank, i - bytes);
  free(got);
}

// The functions, the sizes (bytes per block: 1, odd, a page and one, past 64 KiB) and the element sizes every
// rank count runs; a call's count is its bytes over its element size.
static const int ceFuncs[] = {mcclFuncAllGather, mcclFuncAlltoAll, mcclFuncGather, mcclFuncScatter, mcclFuncBroadcast};
static const size_t ceCounts[] = {1, 3, 1025, 16411};
static const size_t ceEsizes[] = {1, 2, 4, 8};

#endif
