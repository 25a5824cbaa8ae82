// Lab 07 tests: one call of a ring collective (Broadcast, Reduce, AllGather, ReduceScatter) on one
// rank: where its input and output are (in place or not), its input, the call, and the check of
// its output against the CPU reference of ar_test_util.h. Shared by test_coll.c (one process, every
// device) and mpi_coll.c (mpirun).
//
// Inputs are ar_test_util.h's (seed, rank, element, type, op) values, so every rank can check its
// output alone. ReduceScatter's input block b is filled with seed + b, so rank r's output is the
// allreduce reference of seed + r (arCheck as it is). Outputs start poisoned (0xa5): an element a
// kernel misses, or writes where it must not (Reduce's non-roots), shows.
#ifndef COLL_TEST_UTIL_H_
#define COLL_TEST_UTIL_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ar_test_util.h"
#include "mccl_collectives.h"
#include "mccl_test.h"

enum { collBroadcast = 0, collReduce = 1, collAllGather = 2, collReduceScatter = 3, collNumFuncs = 4 };
static const char* const collNames[collNumFuncs] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter"};
#define COLL_POISON 0xa5

struct collCall {
  int func;
  mcclDataType_t t;
  mcclRedOp_t op;  // Reduce, ReduceScatter
  size_t count;    // NCCL's count, sendcount (AllGather) or recvcount (ReduceScatter)
  int root;        // Broadcast, Reduce
  int inPlace;
  uint64_t seed;
};

static inline int collIsRooted(int func) {
  return func == collBroadcast || func == collReduce;
}
// Bytes of the input and of the output buffer of a call on nranks ranks.
static inline size_t collInBytes(const struct collCall* c, int nranks) {
  return c->count * mcclTypeSize(c->t) * (c->func == collReduceScatter ? (size_t)nranks : 1);
}
static inline size_t collOutBytes(const struct collCall* c, int nranks) {
  return c->count * mcclTypeSize(c->t) * (c->func == collAllGather ? (size_t)nranks : 1);
}

// Where the call reads and writes on `rank`, given its send and recv buffers: in place, AllGather's
// input is the rank's block of the output, ReduceScatter's output the rank's block of the input,
// Broadcast's and Reduce's the same buffer.
static inline void collPlace(const struct collCall* c, int rank, void* send, void* recv, void** in, void** out) {
  size_t bytes = c->count * mcclTypeSize(c->t);
  *in = send;
  *out = recv;
  if (!c->inPlace) return;
  switch (c->func) {
    case collAllGather:
      *in = (char*)recv + (size_t)rank * bytes;
      break;
    case collReduceScatter:
      *in = recv;
      *out = (char*)recv + (size_t)rank * bytes;
      break;
    default:
      *in = recv;
      break;
  }
}

// The rank's input in host memory (collInBytes).
static inline void collFillInput(const struct collCall* c, int rank, int nranks, void* host) {
  size_t bytes = c->count * mcclTypeSize(c->t);
  if (c->func == collReduceScatter) {
    for (int b = 0; b < nranks; b++)
      arFill((char*)host + (size_t)b * bytes, c->t, c->op, c->count, rank, c->seed + (uint64_t)b);
  } else {
    arFill(host, c->t, c->op, c->count, rank, c->seed);
  }
}

// Set the rank's buffers up for the call (output poisoned, then the input, in place inside it)
// and return where the call reads and writes. host: scratch of at least both buffers' bytes.
static inline int collPrepare(const struct collCall* c, int rank, int nranks, void* send, void* recv, void* host,
                              void** in, void** out) {
  collPlace(c, rank, send, recv, in, out);
  size_t inBytes = collInBytes(c, nranks), outBytes = collOutBytes(c, nranks);
  // In place, ReduceScatter's whole input buffer is recv: poison only what is not input.
  if (!(c->inPlace && c->func == collReduceScatter)) {
    memset(host, COLL_POISON, outBytes);
    if (mcclTestCopyToDevice(recv, host, outBytes) != cudaSuccess) return __LINE__;
  }
  collFillInput(c, rank, nranks, host);
  if (mcclTestCopyToDevice(*in, host, inBytes) != cudaSuccess) return __LINE__;
  return 0;
}

// The call itself, as an application makes it.
static inline mcclResult_t collIssue(const struct collCall* c, const void* in, void* out, mcclLabComm* comm,
                                     cudaStream_t stream) {
  switch (c->func) {
    case collBroadcast:
      return mcclLabBroadcast(in, out, c->count, c->t, c->root, comm, stream);
    case collReduce:
      return mcclLabReduce(in, out, c->count, c->t, c->op, c->root, comm, stream);
    case collAllGather:
      return mcclLabAllGather(in, out, c->count, c->t, comm, stream);
    default:
      return mcclLabReduceScatter(in, out, c->count, c->t, c->op, comm, stream);
  }
}

// The first byte where got and want differ, described in why; 0 if none.
static inline int collCompare(const void* got, const void* want, size_t bytes, size_t esize, const char* what,
                              char* why, size_t whyLen) {
  for (size_t i = 0; i < bytes; i++)
    if (((const unsigned char*)got)[i] != ((const unsigned char*)want)[i]) {
      snprintf(why, whyLen, "%s: element %zu (byte %zu): expected 0x%02x, got 0x%02x", what, i / esize, i,
               ((const unsigned char*)want)[i], ((const unsigned char*)got)[i]);
      return 1;
    }
  return 0;
}

// Check the rank's output after the call (out as collPrepare returned it); 0 if right, else 1 with
// the first wrong element in why.
static inline int collVerify(const struct collCall* c, int rank, int nranks, const void* out, char* why,
                             size_t whyLen) {
  size_t es = mcclTypeSize(c->t), bytes = c->count * es, outBytes = collOutBytes(c, nranks);
  if (outBytes == 0) return 0;
  char *got = (char*)malloc(outBytes), *want = (char*)malloc(outBytes);
  int bad = 1;
  if (got == NULL || want == NULL) {
    snprintf(why, whyLen, "out of host memory");
    goto out;
  }
  if (cudaMemcpy(got, out, outBytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
    snprintf(why, whyLen, "cudaMemcpy of the output failed");
    goto out;
  }
  switch (c->func) {
    case collBroadcast:
      arFill(want, c->t, c->op, c->count, c->root, c->seed);
      bad = collCompare(got, want, bytes, es, "root's data", why, whyLen);
      break;
    case collAllGather:
      bad = 0;
      for (int r = 0; r < nranks && !bad; r++) {
        char what[32];
        snprintf(what, sizeof(what), "block %d", r);
        arFill(want + (size_t)r * bytes, c->t, c->op, c->count, r, c->seed);
        bad = collCompare(got + (size_t)r * bytes, want + (size_t)r * bytes, bytes, es, what, why, whyLen);
      }
      break;
    case collReduceScatter:
      bad = arCheck(got, c->t, c->op, c->count, nranks, c->seed + (uint64_t)rank, why, whyLen);
      break;
    default:  // Reduce: the result on the root; elsewhere the output untouched
      if (rank == c->root) {
        bad = arCheck(got, c->t, c->op, c->count, nranks, c->seed, why, whyLen);
      } else if (c->inPlace) {
        arFill(want, c->t, c->op, c->count, rank, c->seed);
        bad = collCompare(got, want, bytes, es, "non-root's input", why, whyLen);
      } else {
        memset(want, COLL_POISON, bytes);
        bad = collCompare(got, want, bytes, es, "non-root's recvbuff (must stay untouched)", why, whyLen);
      }
      break;
  }
out:
  free(got);
  free(want);
  return bad;
}

// A call described for a failure message.
static inline void collDescribe(const struct collCall* c, char* buf, size_t len) {
  if (collIsRooted(c->func))
    snprintf(buf, len, "%s %s%s%s count %zu root %d %s", collNames[c->func], mcclTypeName(c->t),
             c->func == collReduce ? " " : "", c->func == collReduce ? mcclOpName(c->op) : "", c->count, c->root,
             c->inPlace ? "in place" : "out of place");
  else
    snprintf(buf, len, "%s %s%s%s count %zu %s", collNames[c->func], mcclTypeName(c->t),
             c->func == collReduceScatter ? " " : "", c->func == collReduceScatter ? mcclOpName(c->op) : "", c->count,
             c->inPlace ? "in place" : "out of place");
}

#endif
