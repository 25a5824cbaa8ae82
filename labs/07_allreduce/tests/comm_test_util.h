// Lab 07 tests: checks shared by the one-process (4 devices) and the mpirun tests.
#ifndef COMM_TEST_UTIL_H_
#define COMM_TEST_UTIL_H_

#include <stdint.h>
#include <string.h>
#include "mccl_allreduce.h"
#include "mccl_collectives.h"
#include "mccl_test.h"

// The ring is a permutation of all ranks, and prev/next are this rank's neighbours in it.
static inline int ctRingLine(const mcclLabComm* c) {
  int n = c->nRanks;
  int seen[MCCL_LAB_MAX_RANKS] = {0};
  for (int i = 0; i < n; i++) {
    int r = c->ring.userRanks[i];
    if (r < 0 || r >= n || seen[r]++) return __LINE__;
  }
  if (c->ring.userRanks[c->ring.index] != c->rank) return __LINE__;
  if (c->ring.next != c->ring.userRanks[(c->ring.index + 1) % n]) return __LINE__;
  if (c->ring.prev != c->ring.userRanks[(c->ring.index + n - 1) % n]) return __LINE__;
  // device order: the ring visits devices in increasing order (ties by rank)
  for (int i = 1; i < n; i++)
    if (c->peerInfo[c->ring.userRanks[i - 1]].cudaDev > c->peerInfo[c->ring.userRanks[i]].cudaDev) return __LINE__;
  return 0;
}

// Pattern a sender stores into channel c's SIMPLE and LL FIFOs and tail (the word at each FIFO's start).
static inline uint64_t ctPattern(int rank, int c) {
  return 0x5eed000000000000ull | ((uint64_t)rank << 16) | (uint64_t)c;
}

// Store the pattern through this rank's send view of every channel (with its device current).
static inline int ctWriteSends(const mcclLabComm* c) {
  if (cudaSetDevice(c->cudaDev) != cudaSuccess) return __LINE__;
  for (int ch = 0; ch < c->nChannels; ch++) {
    const struct mcclConnInfo* s = &c->ctx.channels[ch].peers[c->ring.next].send[0].conn;
    uint64_t v = ctPattern(c->rank, ch);
    if (mcclTestCopyToDevice(s->buffs[MCCL_PROTO_SIMPLE], &v, sizeof(v)) != cudaSuccess) return __LINE__;
    if (mcclTestCopyToDevice(s->buffs[MCCL_PROTO_LL], &v, sizeof(v)) != cudaSuccess) return __LINE__;
    uint64_t t = v + 1;
    if (mcclTestCopyToDevice(s->tail, &t, sizeof(t)) != cudaSuccess) return __LINE__;
  }
  return 0;
}

// Read what the previous rank stored, through this rank's recv view; the device copies the kernels
// get (devRecvConns/devSendConns) match the connectors.
static inline int ctReadRecvs(const mcclLabComm* c) {
  if (cudaSetDevice(c->cudaDev) != cudaSuccess) return __LINE__;
  struct mcclConnInfo dr[MCCL_MAX_CHANNELS], ds[MCCL_MAX_CHANNELS];
  size_t bytes = sizeof(struct mcclConnInfo) * (size_t)c->nChannels;
  if (cudaMemcpy(dr, c->devRecvConns, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) return __LINE__;
  if (cudaMemcpy(ds, c->devSendConns, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) return __LINE__;
  for (int ch = 0; ch < c->nChannels; ch++) {
    const struct mcclConnInfo* r = &c->ctx.channels[ch].peers[c->ring.prev].recv[0].conn;
    if (memcmp(&dr[ch], r, sizeof(*r)) != 0) return __LINE__;
    if (memcmp(&ds[ch], &c->ctx.channels[ch].peers[c->ring.next].send[0].conn, sizeof(*r)) != 0) return __LINE__;
    struct mcclDevChannelPeer dp;  // the channel's device-side peer, as mcclTransportP2pSetup copied it
    if (cudaMemcpy(&dp, &c->ctx.channels[ch].devPeers[c->ring.prev], sizeof(dp), cudaMemcpyDeviceToHost) != cudaSuccess)
      return __LINE__;
    if (memcmp(&dp.recv[0], r, sizeof(*r)) != 0) return __LINE__;
    uint64_t want = ctPattern(c->ring.prev, ch), got = 0;
    if (cudaMemcpy(&got, r->buffs[MCCL_PROTO_SIMPLE], sizeof(got), cudaMemcpyDeviceToHost) != cudaSuccess)
      return __LINE__;
    if (got != want) return __LINE__;
    if (cudaMemcpy(&got, r->buffs[MCCL_PROTO_LL], sizeof(got), cudaMemcpyDeviceToHost) != cudaSuccess) return __LINE__;
    if (got != want) return __LINE__;
    if (cudaMemcpy(&got, r->tail, sizeof(got), cudaMemcpyDeviceToHost) != cudaSuccess) return __LINE__;
    if (got != want + 1) return __LINE__;
  }
  return 0;
}

// Fill this rank's window buffer with words (rank << 32 | i), then (after every rank did) check
// every peer's buffer through this rank's mapping of it.
static inline int ctWindowFill(const mcclLabComm* c, void* buf, size_t words) {
  uint64_t host[256];
  if (words > 256 || cudaSetDevice(c->cudaDev) != cudaSuccess) return __LINE__;
  for (size_t i = 0; i < words; i++) host[i] = ((uint64_t)c->rank << 32) | i;
  return mcclTestCopyToDevice(buf, host, words * 8) == cudaSuccess ? 0 : __LINE__;
}

static inline int ctWindowCheck(const mcclLabComm* c, const mcclLabWindow* w, size_t words) {
  uint64_t host[256];
  char* dev[MCCL_LAB_MAX_RANKS];
  if (cudaSetDevice(c->cudaDev) != cudaSuccess) return __LINE__;
  if (w->peerPtrs[c->rank] != w->buff) return __LINE__;
  if (cudaMemcpy(dev, w->devPeerPtrs, sizeof(char*) * (size_t)c->nRanks, cudaMemcpyDeviceToHost) != cudaSuccess)
    return __LINE__;
  for (int p = 0; p < c->nRanks; p++) {
    if (dev[p] != (char*)w->peerPtrs[p]) return __LINE__;
    if (cudaMemcpy(host, w->peerPtrs[p], words * 8, cudaMemcpyDeviceToHost) != cudaSuccess) return __LINE__;
    for (size_t i = 0; i < words; i++)
      if (host[i] != (((uint64_t)p << 32) | i)) return __LINE__;
  }
  return 0;
}

#endif
