// Shared by lab 06's host tests: "both sides see the same memory". The sender's view of a connection
// (its conn's device addresses) is written with cudaMemcpy, the receiver's view read back, and the
// other way round for head. Each helper sets the device of the side it acts for and returns 0, or
// the source line of the first check that failed.
#ifndef DEVCONN_TEST_UTIL_H_
#define DEVCONN_TEST_UTIL_H_

#include <stdint.h>
#include <string.h>
#include "mccl_conn.h"
#include "mccl_transport.h"

#define DC_CHECK(cond)            \
  do {                            \
    if (!(cond)) return __LINE__; \
  } while (0)

// A copy from pageable host memory may return once the data is staged, before it reaches the device
// (CUDA's documented cudaMemcpy behaviour, seen on the H200 as a stale read through the other view):
// synchronise the device so the store has landed before anyone else looks.
static inline int dcPut(int dev, void* dst, const void* src, size_t n) {
  return cudaSetDevice(dev) == cudaSuccess && cudaMemcpy(dst, src, n, cudaMemcpyDefault) == cudaSuccess &&
         cudaDeviceSynchronize() == cudaSuccess;
}
static inline int dcGet(int dev, void* dst, const void* src, size_t n) {
  return cudaSetDevice(dev) == cudaSuccess && cudaMemcpy(dst, src, n, cudaMemcpyDefault) == cudaSuccess;
}

static inline void dcPattern(unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 31u + seed * 7u + 1u);
}

// Before anything is written: the receiver sees tail == initialStep and a zeroed LL FIFO, the
// sender sees head == initialStep; both sides agree on the slot sizes.
static inline int dcCheckFresh(const struct mcclConnector* s, int sDev, const struct mcclConnector* r, int rDev,
                               uint64_t initialStep) {
  uint64_t v = 0;
  DC_CHECK(s->connected && r->connected);
  DC_CHECK(s->conn.stepSize > 0 && s->conn.stepSize == r->conn.stepSize);
  DC_CHECK(s->conn.llStepSize > 0 && s->conn.llStepSize == r->conn.llStepSize);
  DC_CHECK(s->conn.llStepSize % (int)sizeof(union mcclLLFifoLine) == 0);
  DC_CHECK(s->conn.step == initialStep && r->conn.step == initialStep);
  // Every FIFO on both views, but LL128's only over P2P (SHM carries none: mccl_conn.h says why).
  const int p2p = s->transport == TRANSPORT_P2P;
  DC_CHECK(r->transport == s->transport);
  for (int p = 0; p < MCCL_NUM_PROTOCOLS; p++)
    DC_CHECK(p == MCCL_PROTO_LL128 && !p2p
                 ? s->conn.buffs[p] == NULL && r->conn.buffs[p] == NULL && s->conn.ll128StepSize == 0
                 : s->conn.buffs[p] != NULL && r->conn.buffs[p] != NULL);
  DC_CHECK(!p2p || (s->conn.ll128StepSize > 0 && s->conn.ll128StepSize == r->conn.ll128StepSize &&
                    s->conn.ll128StepSize % MCCL_LL128_SLICE_BYTES == 0));
  DC_CHECK(s->conn.head && s->conn.tail && s->conn.connFifo && r->conn.head && r->conn.tail && r->conn.connFifo);
  DC_CHECK(dcGet(rDev, &v, r->conn.tail, sizeof(v)) && v == initialStep);
  DC_CHECK(dcGet(sDev, &v, s->conn.head, sizeof(v)) && v == initialStep);
  union mcclLLFifoLine line[4];
  size_t llBytes = (size_t)r->conn.llStepSize * MCCL_STEPS;
  DC_CHECK(dcGet(rDev, line, r->conn.buffs[MCCL_PROTO_LL], sizeof(line)));
  for (int i = 0; i < 4; i++) DC_CHECK(line[i].v[0] == 0 && line[i].v[1] == 0);
  DC_CHECK(dcGet(rDev, line, r->conn.buffs[MCCL_PROTO_LL] + llBytes - sizeof(line), sizeof(line)));
  for (int i = 0; i < 4; i++) DC_CHECK(line[i].v[0] == 0 && line[i].v[1] == 0);
  return 0;
}

// The producer's stores: tail, a connFifo entry, the first and last 64 bytes of both FIFOs.
static inline int dcWriteSender(const struct mcclConnector* s, int sDev, unsigned seed) {
  unsigned char pat[64];
  uint64_t tail = s->conn.step + 5 + seed;
  ssize_t size = 1000 + (ssize_t)seed;
  DC_CHECK(dcPut(sDev, s->conn.tail, &tail, sizeof(tail)));
  DC_CHECK(dcPut(sDev, &s->conn.connFifo[3].size, &size, sizeof(size)));
  size_t bytes[MCCL_NUM_PROTOCOLS];
  bytes[MCCL_PROTO_LL] = (size_t)s->conn.llStepSize * MCCL_STEPS;
  bytes[MCCL_PROTO_LL128] = (size_t)s->conn.ll128StepSize * MCCL_STEPS;
  bytes[MCCL_PROTO_SIMPLE] = (size_t)s->conn.stepSize * MCCL_STEPS;
  for (int p = 0; p < MCCL_NUM_PROTOCOLS; p++) {
    if (bytes[p] == 0) continue;  // no LL128 FIFO on SHM
    dcPattern(pat, sizeof(pat), seed + (unsigned)p);
    DC_CHECK(dcPut(sDev, s->conn.buffs[p], pat, sizeof(pat)));
    dcPattern(pat, sizeof(pat), seed + 10u + (unsigned)p);
    DC_CHECK(dcPut(sDev, s->conn.buffs[p] + bytes[p] - sizeof(pat), pat, sizeof(pat)));
  }
  return 0;
}

static inline int dcCheckReceiver(const struct mcclConnector* r, int rDev, unsigned seed) {
  unsigned char pat[64], got[64];
  uint64_t tail = 0;
  ssize_t size = 0;
  DC_CHECK(dcGet(rDev, &tail, r->conn.tail, sizeof(tail)) && tail == r->conn.step + 5 + seed);
  DC_CHECK(dcGet(rDev, &size, &r->conn.connFifo[3].size, sizeof(size)) && size == 1000 + (ssize_t)seed);
  size_t bytes[MCCL_NUM_PROTOCOLS];
  bytes[MCCL_PROTO_LL] = (size_t)r->conn.llStepSize * MCCL_STEPS;
  bytes[MCCL_PROTO_LL128] = (size_t)r->conn.ll128StepSize * MCCL_STEPS;
  bytes[MCCL_PROTO_SIMPLE] = (size_t)r->conn.stepSize * MCCL_STEPS;
  for (int p = 0; p < MCCL_NUM_PROTOCOLS; p++) {
    if (bytes[p] == 0) continue;  // no LL128 FIFO on SHM
    dcPattern(pat, sizeof(pat), seed + (unsigned)p);
    DC_CHECK(dcGet(rDev, got, r->conn.buffs[p], sizeof(got)) && memcmp(pat, got, sizeof(pat)) == 0);
    dcPattern(pat, sizeof(pat), seed + 10u + (unsigned)p);
    DC_CHECK(dcGet(rDev, got, r->conn.buffs[p] + bytes[p] - sizeof(got), sizeof(got)) &&
             memcmp(pat, got, sizeof(pat)) == 0);
  }
  return 0;
}

// The consumer's credit: head, written through the receiver's view, read through the sender's.
static inline int dcWriteReceiverHead(const struct mcclConnector* r, int rDev, unsigned seed) {
  uint64_t head = r->conn.step + 3 + seed;
  DC_CHECK(dcPut(rDev, r->conn.head, &head, sizeof(head)));
  return 0;
}

static inline int dcCheckSenderHead(const struct mcclConnector* s, int sDev, unsigned seed) {
  uint64_t head = 0;
  DC_CHECK(dcGet(sDev, &head, s->conn.head, sizeof(head)) && head == s->conn.step + 3 + seed);
  return 0;
}

#endif
