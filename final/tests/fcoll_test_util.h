// final/ tests: the collectives of minccl.h (AllGather, ReduceScatter, Broadcast, Reduce, AlltoAll,
// Gather, Scatter), PreMulSum operations and Send/Recv, checked against the CPU references of lab 07's
// tests (enq_test_util.h: the call's description, inputs, in place placement, poisoned outputs, the
// reference check). Shared by test_api.c (one process, 4 devices, groups) and the mpirun tests.
#ifndef FCOLL_TEST_UTIL_H_
#define FCOLL_TEST_UTIL_H_

#include "../../labs/07_allreduce/tests/enq_test_util.h"
#include "minccl.h"

// A Broadcast, Reduce, AllGather or ReduceScatter, as an application of minccl.h makes it (enqIssueOp
// makes it through lab 07's functions). op is the operation passed (the call's own, or the rank's
// PreMulSum operation where c->op is AR_PREMULSUM).
static inline mcclResult_t fcollIssueOp(const struct enqCall* c, mcclRedOp_t op, const void* in, void* out,
                                        mcclComm_t comm, cudaStream_t stream) {
  switch (c->func) {
    case mcclFuncBroadcast:
      return mcclBroadcast(in, out, c->count, c->t, c->root, comm, stream);
    case mcclFuncReduce:
      return mcclReduce(in, out, c->count, c->t, op, c->root, comm, stream);
    case mcclFuncAllGather:
      return mcclAllGather(in, out, c->count, c->t, comm, stream);
    default:
      return mcclReduceScatter(in, out, c->count, c->t, op, comm, stream);
  }
}
static inline mcclResult_t fcollIssue(const struct enqCall* c, const void* in, void* out, mcclComm_t comm,
                                      cudaStream_t stream) {
  return fcollIssueOp(c, c->op, in, out, comm, stream);
}

// ---- PreMulSum operations -------------------------------------------------------------------------
// Rank r's operation for AR_PREMULSUM: scalar arPreMulScalar(r) of type t (ar_test_util.h's reference).
// In host memory it is read at creation, so the host copy is spoiled right after; in device memory it
// is read by each kernel, so it is created holding 0 and given its value only after the creation.
// *dev (device memory of comm's device, current) is the device scalar to free once the calls using it
// are done, NULL for a host one.
static inline mcclResult_t fcollPreMulSumCreate(mcclComm_t comm, int rank, mcclDataType_t t, int onDevice,
                                                mcclRedOp_t* op, void** dev) {
  uint64_t host = 0;
  *dev = NULL;
  mcclEltSet(t, &host, 0, arPreMulScalar(rank));
  if (!onDevice) {
    mcclResult_t r = mcclRedOpCreatePreMulSum(op, &host, t, mcclScalarHostImmediate, comm);
    mcclEltSet(t, &host, 0, 3.0);  // read at creation: this value must not be used
    return r;
  }
  const uint64_t zero = 0;
  if (cudaMalloc(dev, sizeof(uint64_t)) != cudaSuccess ||
      mcclTestCopyToDevice(*dev, &zero, sizeof(zero)) != cudaSuccess)
    return mcclUnhandledCudaError;
  mcclResult_t r = mcclRedOpCreatePreMulSum(op, *dev, t, mcclScalarDevice, comm);
  if (r == mcclSuccess && mcclTestCopyToDevice(*dev, &host, sizeof(host)) != cudaSuccess) r = mcclUnhandledCudaError;
  return r;
}

// ---- AlltoAll, Gather, Scatter ----------------------------------------------------------------------
// A call moves blocks of count elements between ranks; block (from, to) holds ar_test_util.h's values of
// rank `from` under a seed of the pair, so every rank knows every block. The test sets both buffers of
// each rank up from an image (poison, then the input where the call reads it) and, after the call,
// compares both buffers whole with the image of what the call must leave: its outputs, and nothing
// written anywhere else (the root's blocks, the non-roots' unused buffers, the bytes past the blocks).
// Not enq_test_util.h's enqCall: its check reads the outputs only, and its in-place Scatter is the
// root's recvbuff holding the input; here every rank passes the in-place placement, Scatter's in
// sendbuff (recvbuff = sendbuff + rank * count), and nothing else may change.
enum { fa2aAlltoAll = 0, fa2aGather = 1, fa2aScatter = 2, fa2aNumFuncs = 3 };
static const char* const fa2aNames[fa2aNumFuncs] = {"AlltoAll", "Gather", "Scatter"};
#define FA2A_SLACK 64  // bytes past the blocks that must stay poisoned

struct fa2aCall {
  int func;
  mcclDataType_t t;
  size_t count;  // elements per block
  int root;      // Gather, Scatter
  int inPlace;   // Gather: sendbuff is recvbuff + rank * count; Scatter: recvbuff is sendbuff + rank * count
  uint64_t seed;
};

// Bytes of each buffer the images cover: nranks blocks and the slack.
static inline size_t fa2aImageBytes(const struct fa2aCall* c, int nranks) {
  return (size_t)nranks * c->count * mcclTypeSize(c->t) + FA2A_SLACK;
}

static inline void fa2aBlock(const struct fa2aCall* c, int from, int to, void* host) {
  arFill(host, c->t, mcclSum, c->count, from, c->seed * 131 + (uint64_t)to);
}

// Where the call reads and writes on rank (the root's in-place forms; a non-root passes the same
// placement, its unused buffer included, as applications do).
static inline void fa2aPlace(const struct fa2aCall* c, int rank, void* send, void* recv, void** in, void** out) {
  const size_t bytes = c->count * mcclTypeSize(c->t);
  *in = send;
  *out = recv;
  if (c->inPlace && c->func == fa2aGather) *in = (char*)recv + (size_t)rank * bytes;
  if (c->inPlace && c->func == fa2aScatter) *out = (char*)send + (size_t)rank * bytes;
}

// The images of rank's send and recv buffers (fa2aImageBytes each) before the call, or after it (after).
static inline void fa2aImages(const struct fa2aCall* c, int rank, int nranks, int after, unsigned char* sendImg,
                              unsigned char* recvImg) {
  const size_t bytes = c->count * mcclTypeSize(c->t), span = fa2aImageBytes(c, nranks);
  void *in, *out;
  memset(sendImg, ENQ_POISON, span);
  memset(recvImg, ENQ_POISON, span);
  fa2aPlace(c, rank, sendImg, recvImg, &in, &out);
  switch (c->func) {
    case fa2aAlltoAll:
      for (int p = 0; p < nranks; p++) fa2aBlock(c, rank, p, (char*)in + (size_t)p * bytes);
      for (int p = 0; p < nranks && after; p++) fa2aBlock(c, p, rank, (char*)out + (size_t)p * bytes);
      break;
    case fa2aGather:
      fa2aBlock(c, rank, c->root, in);
      for (int r = 0; r < nranks && after && rank == c->root; r++)
        fa2aBlock(c, r, c->root, (char*)out + (size_t)r * bytes);
      break;
    default:
      for (int r = 0; r < nranks && rank == c->root; r++) fa2aBlock(c, c->root, r, (char*)in + (size_t)r * bytes);
      if (after) fa2aBlock(c, c->root, rank, out);
      break;
  }
}

static inline mcclResult_t fa2aIssue(const struct fa2aCall* c, const void* in, void* out, mcclComm_t comm,
                                     cudaStream_t stream) {
  switch (c->func) {
    case fa2aAlltoAll:
      return mcclAlltoAll(in, out, c->count, c->t, comm, stream);
    case fa2aGather:
      return mcclGather(in, out, c->count, c->t, c->root, comm, stream);
    default:
      return mcclScatter(in, out, c->count, c->t, c->root, comm, stream);
  }
}

// Set rank's buffers up for the call (host: scratch of 2 x fa2aImageBytes); 0, or the failing line.
static inline int fa2aPrepare(const struct fa2aCall* c, int rank, int nranks, void* send, void* recv, void* host) {
  const size_t span = fa2aImageBytes(c, nranks);
  unsigned char* h = (unsigned char*)host;
  fa2aImages(c, rank, nranks, 0, h, h + span);
  if (mcclTestCopyToDevice(send, h, span) != cudaSuccess) return __LINE__;
  if (mcclTestCopyToDevice(recv, h + span, span) != cudaSuccess) return __LINE__;
  return 0;
}

// Check rank's buffers after the call (host: scratch of 4 x fa2aImageBytes); 0 if right, else 1 with
// the first wrong byte in why.
static inline int fa2aVerify(const struct fa2aCall* c, int rank, int nranks, const void* send, const void* recv,
                             void* host, char* why, size_t whyLen) {
  const size_t span = fa2aImageBytes(c, nranks), es = mcclTypeSize(c->t);
  unsigned char* h = (unsigned char*)host;
  fa2aImages(c, rank, nranks, 1, h, h + span);
  if (cudaMemcpy(h + 2 * span, send, span, cudaMemcpyDeviceToHost) != cudaSuccess ||
      cudaMemcpy(h + 3 * span, recv, span, cudaMemcpyDeviceToHost) != cudaSuccess) {
    snprintf(why, whyLen, "cudaMemcpy of the buffers failed");
    return 1;
  }
  return enqCompare(h + 2 * span, h, span, es, "sendbuff", why, whyLen) ||
         enqCompare(h + 3 * span, h + span, span, es, "recvbuff", why, whyLen);
}

static inline void fa2aDescribe(const struct fa2aCall* c, char* buf, size_t len) {
  snprintf(buf, len, "%s %s count %zu root %d %s", fa2aNames[c->func], mcclTypeName(c->t), c->count, c->root,
           c->inPlace ? "in place" : "out of place");
}

// Send/Recv: byte i of what `rank` sends is a function of (seed, rank, i), so the receiver checks
// alone what its ring's prev (or itself) sent.
static inline unsigned char fcollByte(uint64_t seed, int rank, size_t i) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + (uint64_t)rank * 0xbf58476d1ce4e5b9ull + i * 0x94d049bb133111ebull;
  return (unsigned char)((x >> 29) ^ (x >> 41));
}
static inline void fcollFillBytes(void* host, size_t bytes, uint64_t seed, int rank) {
  for (size_t i = 0; i < bytes; i++) ((unsigned char*)host)[i] = fcollByte(seed, rank, i);
}
// 0 if host holds what `from` sent, else 1 with the first wrong byte in why.
static inline int fcollCheckBytes(const void* host, size_t bytes, uint64_t seed, int from, char* why, size_t len) {
  for (size_t i = 0; i < bytes; i++)
    if (((const unsigned char*)host)[i] != fcollByte(seed, from, i)) {
      snprintf(why, len, "byte %zu of %zu from rank %d: expected 0x%02x, got 0x%02x", i, bytes, from,
               fcollByte(seed, from, i), ((const unsigned char*)host)[i]);
      return 1;
    }
  return 0;
}

// The ring's neighbours of `rank` as lab 07 orders the ring (by device, then rank) when rank r
// runs on device devOf(r) = r % ndev: mpirun ranks on distinct devices give rank order.
static inline void fcollRingNeighbours(int rank, int nranks, int ndev, int* next, int* prev) {
  int order[64], k = 0;
  for (int d = 0; d < ndev; d++)
    for (int r = 0; r < nranks; r++)
      if (r % ndev == d) order[k++] = r;
  for (int i = 0; i < nranks; i++)
    if (order[i] == rank) {
      *next = order[(i + 1) % nranks];
      *prev = order[(i + nranks - 1) % nranks];
    }
}

#endif
