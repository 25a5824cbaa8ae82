// final/ tests: the collectives of minccl.h (AllGather, ReduceScatter, Broadcast, Reduce) and
// Send/Recv, checked against the CPU references of lab 07's tests (coll_test_util.h: inputs, in
// place placement, poisoned outputs, the reference check). Shared by test_api.c (one process, 4
// devices, groups) and mpi_coll.c (mpirun).
#ifndef FCOLL_TEST_UTIL_H_
#define FCOLL_TEST_UTIL_H_

#include "../../labs/07_allreduce/tests/coll_test_util.h"
#include "minccl.h"

// The call, as an application of minccl.h makes it.
static inline mcclResult_t fcollIssue(const struct collCall* c, const void* in, void* out, mcclComm_t comm,
                                      cudaStream_t stream) {
  switch (c->func) {
    case collBroadcast:
      return mcclBroadcast(in, out, c->count, c->t, c->root, comm, stream);
    case collReduce:
      return mcclReduce(in, out, c->count, c->t, c->op, c->root, comm, stream);
    case collAllGather:
      return mcclAllGather(in, out, c->count, c->t, comm, stream);
    default:
      return mcclReduceScatter(in, out, c->count, c->t, c->op, comm, stream);
  }
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
