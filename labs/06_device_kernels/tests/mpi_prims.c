// Lab 06 kernels across processes under mpirun: ranks pair up (0-1, 2-3), each drives device
// rank % devices, and mcclDevPairPeerCreate connects them through lab 05's proxies and the bootstrap,
// over SHM and over P2P. A producer kernel in one process feeds a consumer kernel in the other, for
// every protocol the transport carries (LL128 over P2P only), one way, the other way, and both ways at once (two
// kernels per rank); sizes from 1 byte up (256 MiB on the GPU), none a multiple of a slot or of 16 bytes. Every byte is
// checked against a pattern both ranks derive from the shared seed, the destination's tail must still be poison, both
// ends' steps must be where the chunk arithmetic puts them, and the fds and the /dev/shm files this rank used are gone
// at the end.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mccl_alloc.h"
#include "mccl_checks.h"
#include "mccl_devconn.h"
#include "mccl_p2p.h"
#include "mccl_param.h"
#include "mccl_proxy.h"
#include "mccl_test_mpi.h"
#include "prims_test_util.h"
#include "../../05_proxy/tests/mpi_world.h"

#define PT_LOST_MS 120000

// The CUDA driver (and the sim) open fds of their own at first use: count from after.
static void warmUp(void) {
  int dev = pickDevice();
  if (dev < 0) return;
  void* p = NULL;
  if (mcclCuMemAlloc(&p, NULL, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1) == mcclSuccess) mcclCuMemFree(p);
  ptLauncher l;
  if (ptLauncherInit(&l, dev) == mcclSuccess) ptLauncherFree(&l);
}

// Sizes: SIMPLE slots are 512 KiB, LL slots carry 32 KiB. Under mpirun on the sim two or four
// processes share 2 cores, so SIMPLE stops at 16 MiB and LL at 1 MiB there; the GPU goes to 256 MiB.
static const size_t simpleSizes[] = {
    1, 17, 4097, (512 << 10) + 1, (3 << 20) + 5, (16 << 20) + 7, (256 << 20) - 3, 256 << 20};
static const size_t llSizes[] = {1, 9, (32 << 10) + 9, 100003, (1 << 20) + 1, (64 << 20) - 5, 256 << 20};
// Under TSan (every access of every block thread instrumented, four processes) 3 MiB and 100 KB.
static size_t capBytes(int proto) {
  if (!PT_ON_SIM) return 256 << 20;
  if (MCCL_TEST_UNDER_TSAN) return proto != MCCL_PROTO_SIMPLE ? 100003 + 64 : (3 << 20) + 64;
  return proto != MCCL_PROTO_SIMPLE ? (1 << 20) + 64 : (16 << 20) + 64;
}

static void exchange(mcclDevTransport_t which) {
  warmUp();
  int fds0 = mcclTestCountFds();
  ptShmSet shm = {0}, shmBase = {0};
  ptShmRecord(&shmBase);
  world w;
  mcclResult_t up = worldUp(&w, mcclLocalTransports);
  if (w.dev < 0) SKIP("no CUDA device");
  EXPECT_OK(up);
  int rank = mcclTestMpiRank(), n = mcclTestMpiSize(), peer = rank ^ 1;
  if (peer >= n) SKIP("needs an even number of ranks");
  if (which == mcclDevTransportP2p && !mcclCuMemEnable()) SKIP("cuMem not supported: no P2P");
  const int nch = 2;
  struct mcclDevPairEnd* e = NULL;
  EXPECT_OK(mcclDevPairPeerCreate(w.bs, w.proxy, peer, nch, MCCL_DEVPAIR_SEND | MCCL_DEVPAIR_RECV, which, 0, &e));
  ptShmRecord(&shm);
  struct mcclConnInfo *sc = NULL, *rc = NULL;
  EXPECT_OK(mcclDevConnCreate(e->send, nch, &sc));
  EXPECT_OK(mcclDevConnCreate(e->recv, nch, &rc));
  ptLauncher ls, lr;
  EXPECT_OK(ptLauncherInit(&ls, w.dev));
  EXPECT_OK(ptLauncherInit(&lr, w.dev));
  volatile uint32_t* abortH = NULL;
  uint32_t* abortD = NULL;
  EXPECT_OK(mcclDevAbortFlagCreate(&abortH, &abortD));
  const size_t guard = 64, cap = capBytes(MCCL_PROTO_SIMPLE);
  unsigned char *want = malloc(cap + guard), *got = malloc(cap + guard);
  EXPECT_TRUE(want && got);
  void *src = NULL, *dst = NULL;
  EXPECT_CUDA_OK(cudaMalloc(&src, cap + guard));
  EXPECT_CUDA_OK(cudaMalloc(&dst, cap + guard));
  uint64_t sendSteps[2] = {0, 0}, recvSteps[2] = {0, 0};
  // Each message is seeded from the shared seed, its number and the sender's rank.
  uint64_t seed = mcclTestSeed();
  int msg = 0;
  for (int proto = 0; proto < MCCL_NUM_PROTOCOLS && !mcclTestMpiAnyStopped(); proto++) {
    if (proto == MCCL_PROTO_LL128 && which != mcclDevTransportP2p) continue;  // SHM has no LL128 FIFO
    // LL128 takes LL's sizes: they end mid-line and span several of its slots at the larger ones.
    const size_t* sizes = proto != MCCL_PROTO_SIMPLE ? llSizes : simpleSizes;
    int nsizes = proto != MCCL_PROTO_SIMPLE ? (int)(sizeof(llSizes) / sizeof(llSizes[0]))
                                            : (int)(sizeof(simpleSizes) / sizeof(simpleSizes[0]));
    for (int i = 0; i < nsizes && !mcclTestMpiAnyStopped(); i++) {
      size_t bytes = sizes[i];
      if (bytes > capBytes(proto)) continue;
      // dir 0: even rank -> odd rank; 1: the other way; 2: both at once (a send and a receive kernel per rank).
      for (int dir = 0; dir < 3 && !mcclTestMpiAnyStopped(); dir++, msg++) {
        int sends = dir == 2 || (dir == 0) == ((rank & 1) == 0);
        int recvs = dir == 2 || !sends;
        if (sends) {
          ptFill(want, bytes, seed + (uint64_t)msg * 8 + (uint64_t)rank);
          EXPECT_CUDA_OK(mcclTestCopyToDevice(src, want, bytes));
        }
        if (recvs) EXPECT_CUDA_OK(mcclTestMemset(dst, PT_POISON, bytes + guard));
        if (recvs) {
          struct mcclDevWork r = ptWork(mcclDevOpRecv, proto, mcclUint8, mcclSum, bytes, nch);
          r.dst = dst;
          r.recvConns = rc;
          EXPECT_OK(ptLaunch(&lr, &r, abortD, ptThreads()));
        }
        if (sends) {
          struct mcclDevWork s = ptWork(mcclDevOpSend, proto, mcclUint8, mcclSum, bytes, nch);
          s.src = src;
          s.sendConns = sc;
          EXPECT_OK(ptLaunch(&ls, &s, abortD, ptThreads()));
        }
        ptLauncher* mine[2];
        int nmine = 0;
        if (recvs) mine[nmine++] = &lr;
        if (sends) mine[nmine++] = &ls;
        EXPECT_OK(ptWaitAll(mine, nmine, abortH, PT_LOST_MS));
        if (recvs) {
          ptFill(want, bytes, seed + (uint64_t)msg * 8 + (uint64_t)peer);
          EXPECT_CUDA_OK(cudaMemcpy(got, dst, bytes + guard, cudaMemcpyDeviceToHost));
          size_t nbad = 0;
          int64_t bad = ptCompare(got, want, bytes, &nbad);
          if (bad >= 0)
            mcclTestFailAt(__FILE__, __LINE__,
                           "%s %zu bytes from rank %d: %zu differ, first at %lld: 0x%02x, expected 0x%02x",
                           mcclProtoName(proto), bytes, peer, nbad, (long long)bad, got[bad], want[bad]);
          for (size_t k = 0; k < guard && bad < 0; k++)
            if (got[bytes + k] != PT_POISON)
              mcclTestFailAt(__FILE__, __LINE__, "%zu bytes: byte %zu past the end written", bytes, k);
        }
        for (int c = 0; c < nch; c++) {
          if (sends)
            sendSteps[c] =
                ptStepAfter(sendSteps[c], proto, &e->send[c].conn, bytes, nch, c, MCCL_DEV_DEFAULT_CHUNKSTEPS);
          if (recvs)
            recvSteps[c] =
                ptStepAfter(recvSteps[c], proto, &e->recv[c].conn, bytes, nch, c, MCCL_DEV_DEFAULT_CHUNKSTEPS);
        }
        EXPECT_OK(mcclDevConnReadStep(e->send, nch, sc));
        EXPECT_OK(mcclDevConnReadStep(e->recv, nch, rc));
        for (int c = 0; c < nch; c++) {
          EXPECT_TRUE(e->send[c].conn.step == sendSteps[c]);
          EXPECT_TRUE(e->recv[c].conn.step == recvSteps[c]);
        }
      }
    }
  }
  cudaFree(src);
  cudaFree(dst);
  free(want);
  free(got);
  mcclDevAbortFlagFree(abortH);
  ptLauncherFree(&ls);
  ptLauncherFree(&lr);
  EXPECT_OK(mcclDevConnFree(sc));
  EXPECT_OK(mcclDevConnFree(rc));
  EXPECT_OK(mcclBootstrapBarrier(w.bs));
  EXPECT_OK(mcclDevPairPeerFree(e));
  EXPECT_OK(mcclBootstrapBarrier(w.bs));
  worldDown(&w);
  EXPECT_EQ(mcclTestCountFds(), fds0);
  const char* left = NULL;
  if (ptShmLeft(&shm, &shmBase, &left) != 0) mcclTestFailAt(__FILE__, __LINE__, "%s is still in /dev/shm", left);
  CHECK_STOPPED();
}

static void moveShm(void) {
  exchange(mcclDevTransportShm);
}
static void moveP2p(void) {
  exchange(mcclDevTransportP2p);
}

MCCL_TEST_MAIN_MPI(MCCL_TEST_CASE(moveShm), MCCL_TEST_CASE(moveP2p))
