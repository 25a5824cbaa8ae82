// The proxy across processes under mpirun (rank r drives device r % devices): GetFd round trips to
// every peer's proxy, QueryFd, and a ring of SHM connections set up and progressed by the proxies.
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>
#include "mccl_alloc.h"
#include "mccl_checks.h"
#include "mccl_ipc.h"
#include "mccl_proxy.h"
#include "mccl_shm.h"
#include "mccl_test_mpi.h"
#include "mpi_world.h"

// The transports of lab 05's programs: SHM (lab 04's) only; P2P is lab 06's.
static struct mcclTransport* const shmOnly[MCCL_NUM_TRANSPORTS] = {NULL, &mcclShmTransport, NULL};

// Each rank fills a cuMem allocation with its own pattern; every other rank asks the owner's proxy
// for an fd (GetFd with the raw handle value), imports it, maps it and reads the pattern.
static void getFdRoundTrips(void) {
  // The CUDA driver opens fds of its own at initialisation and first allocation: count from after.
  if (pickDevice() >= 0) {
    void* warm = NULL;
    EXPECT_OK(mcclCuMemAlloc(&warm, NULL, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 2 << 20));
    EXPECT_OK(mcclCuMemFree(warm));
  }
  int fds0 = mcclTestCountFds();
  world w;
  mcclResult_t up = worldUp(&w, shmOnly);
  if (w.dev < 0) SKIP("no CUDA device");
  EXPECT_OK(up);
  int rank = mcclTestMpiRank(), n = mcclTestMpiSize();
  size_t size = 2 << 20;
  void* buf = NULL;
  CUmemGenericAllocationHandle handle = 0;
  EXPECT_OK(mcclCuMemAlloc(&buf, &handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, size));
  EXPECT_CUDA_OK(mcclTestMemset(buf, 0x30 + rank, size));
  EXPECT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_OK(mcclProxyRegisterExport(w.proxy, handle));  // offered to peers before they ask
  uint64_t mine[2] = {(uint64_t)handle, size};
  uint64_t* all = malloc(sizeof(mine) * (size_t)n);
  memcpy(all + 2 * rank, mine, sizeof(mine));
  EXPECT_OK(mcclBootstrapAllGather(w.bs, all, sizeof(mine)));
  int ok = 1;
  unsigned char* host = malloc(size);
  for (int k = 1; k < n && ok; k++) {
    int peer = (rank + k) % n;
    CUmemGenericAllocationHandle h = (CUmemGenericAllocationHandle)all[2 * peer];
    int fd = -1;
    mcclResult_t r = mcclProxyClientGetFdBlocking(w.proxy, peer, &h, sizeof(h), &fd);
    ok &= r == mcclSuccess && fd >= 0;
    if (!ok) break;
    mcclIpcDesc desc;
    memset(&desc, 0, sizeof(desc));
    desc.magic = MCCL_IPC_DESC_MAGIC;
    desc.handleType = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    desc.size = all[2 * peer + 1];
    desc.ownerPid = -1;
    desc.ownerDev = peer;
    void* mapped = NULL;
    r = mcclIpcImport(&desc, fd, w.dev, &mapped);
    close(fd);
    ok &= r == mcclSuccess;
    if (!ok) break;
    ok &= cudaMemcpy(host, mapped, size, cudaMemcpyDeviceToHost) == cudaSuccess;
    for (size_t i = 0; ok && i < size; i += 4099) ok &= host[i] == (unsigned char)(0x30 + peer);
    ok &= host[size - 1] == (unsigned char)(0x30 + peer);
    ok &= mcclIpcUnmap(mapped) == mcclSuccess;
  }
  free(host);
  EXPECT_TRUE(ok);
  // A handle the owner never registered: its proxy refuses it before the driver sees it (a real
  // driver crashes on a made-up handle).
  int peer = (rank + 1) % n, fd = -1;
  CUmemGenericAllocationHandle bogus = (CUmemGenericAllocationHandle)0xdead0000beefULL;
  if (n > 1) EXPECT_RES(mcclProxyClientGetFdBlocking(w.proxy, peer, &bogus, sizeof(bogus), &fd), mcclInvalidArgument);
  EXPECT_EQ(fd, -1);
  EXPECT_RES(mcclProxyClientGetFdBlocking(w.proxy, n, &bogus, sizeof(bogus), &fd), mcclInvalidArgument);
  EXPECT_RES(mcclProxyClientGetFdBlocking(w.proxy, peer, &bogus, 4, &fd), mcclInvalidArgument);
  EXPECT_OK(mcclBootstrapBarrier(w.bs));  // nobody frees before every peer has read
  EXPECT_OK(mcclProxyDeregisterExport(w.proxy, handle));
  EXPECT_RES(mcclProxyDeregisterExport(w.proxy, handle), mcclInvalidArgument);
  // Withdrawn: a peer that asks now is refused too (its owner's WARN says how long ago it was withdrawn).
  EXPECT_OK(mcclBootstrapBarrier(w.bs));
  CUmemGenericAllocationHandle late = (CUmemGenericAllocationHandle)all[2 * peer];
  if (n > 1) EXPECT_RES(mcclProxyClientGetFdBlocking(w.proxy, peer, &late, sizeof(late), &fd), mcclInvalidArgument);
  EXPECT_EQ(fd, -1);
  EXPECT_OK(mcclBootstrapBarrier(w.bs));  // every proxy serves until the last late request is answered
  free(all);
  EXPECT_OK(mcclCuMemFree(buf));
  worldDown(&w);
  EXPECT_EQ(mcclTestCountFds(), fds0);
}

// QueryFd: the proxy of the next rank receives our eventfd and names its number there; through
// /proc/<pid>/fd that number refers to the same open file.
static void queryFdRoundTrip(void) {
  int fds0 = mcclTestCountFds();
  world w;
  mcclResult_t up = worldUp(&w, shmOnly);
  if (w.dev < 0) SKIP("no CUDA device");
  EXPECT_OK(up);
  int rank = mcclTestMpiRank(), n = mcclTestMpiSize(), next = (rank + 1) % n;
  int efd = eventfd(0, EFD_CLOEXEC);
  EXPECT_GE(efd, 0);
  int rmt = -1;
  EXPECT_OK(mcclProxyClientQueryFdBlocking(w.proxy, next, efd, &rmt));
  EXPECT_GE(rmt, 0);
  mcclPeerInfo info;
  EXPECT_OK(mcclBootstrapGetPeerInfo(w.bs, next, &info));
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", info.pid, rmt);
  struct stat a, b;
  EXPECT_EQ(fstat(efd, &a), 0);
  int st = stat(path, &b);
  EXPECT_EQ(st, 0);
  EXPECT_TRUE(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
  close(efd);
  EXPECT_OK(mcclBootstrapBarrier(w.bs));
  worldDown(&w);
  EXPECT_EQ(mcclTestCountFds(), fds0);
}

// A ring: each rank sends to rank+1 and receives from rank-1 through SHM, setup RPCs and the
// cuMem fd exchange done by the proxies, every message progressed by the progress threads.
static void shmRingThroughProxy(void) {
  int fds0 = mcclTestCountFds();
  world w;
  mcclResult_t up = worldUp(&w, shmOnly);
  if (w.dev < 0) SKIP("no CUDA device");
  EXPECT_OK(up);
  int rank = mcclTestMpiRank(), n = mcclTestMpiSize();
  if (n < 2) SKIP("needs 2 ranks");
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  mcclPeerInfo me, pn, pp;
  EXPECT_OK(mcclBootstrapGetPeerInfo(w.bs, rank, &me));
  EXPECT_OK(mcclBootstrapGetPeerInfo(w.bs, next, &pn));
  EXPECT_OK(mcclBootstrapGetPeerInfo(w.bs, prev, &pp));
  struct mcclTransportCtx ctx;
  EXPECT_OK(mcclTransportCtxInit(&ctx, rank, n, me.cudaDev));
  ctx.bootstrap = w.bs;
  ctx.proxyState = w.proxy;
  int can = 0;
  EXPECT_OK(mcclShmTransport.canConnect(&can, &ctx, &me, &pn));
  EXPECT_EQ(can, 1);
  struct mcclConnector s, r;
  EXPECT_OK(mcclConnectorInit(&s, TRANSPORT_SHM, &mcclShmTransport, 1, rank));
  EXPECT_OK(mcclConnectorInit(&r, TRANSPORT_SHM, &mcclShmTransport, 0, rank));
  EXPECT_OK(mcclProxyConnect(w.proxy, &s));
  EXPECT_OK(mcclProxyConnect(w.proxy, &r));
  struct mcclConnect si, ri, peerSi, peerRi;
  EXPECT_OK(mcclShmTransport.send.setup(&ctx, NULL, &me, &pn, &si, &s, 0, 0));
  EXPECT_OK(mcclShmTransport.recv.setup(&ctx, NULL, &me, &pp, &ri, &r, 0, 0));
  // My recv info goes to prev (its sender), my send info to next (its receiver).
  EXPECT_OK(mcclBootstrapSend(w.bs, prev, 1, &ri, sizeof(ri)));
  EXPECT_OK(mcclBootstrapSend(w.bs, next, 2, &si, sizeof(si)));
  EXPECT_OK(mcclBootstrapRecv(w.bs, next, 1, &peerRi, sizeof(peerRi)));
  EXPECT_OK(mcclBootstrapRecv(w.bs, prev, 2, &peerSi, sizeof(peerSi)));
  EXPECT_OK(mcclShmTransport.send.connect(&ctx, &peerRi, 1, 0, &s));
  EXPECT_OK(mcclShmTransport.recv.connect(&ctx, &peerSi, 1, 0, &r));
  size_t max = 5 << 20;
  unsigned char *src = NULL, *dst = NULL;
  EXPECT_CUDA_OK(cudaMalloc((void**)&src, max));
  EXPECT_CUDA_OK(cudaMalloc((void**)&dst, max));
  unsigned char* h = malloc(max);
  unsigned char* want = malloc(max);
  int ok = 1;
  for (int it = 0; it < 5 && ok; it++) {
    // Sizes from the shared seed, so both ends of every connection agree.
    size_t sizes[5] = {0, 1, 4 << 20, (size_t)(mcclTestRand() % max), 123457};
    size_t nb = sizes[it];
    for (size_t i = 0; i < nb; i++) h[i] = (unsigned char)(i * 13 + (size_t)rank * 7 + (size_t)it);
    for (size_t i = 0; i < nb; i++) want[i] = (unsigned char)(i * 13 + (size_t)prev * 7 + (size_t)it);
    ok &= mcclTestCopyToDevice(src, h, nb) == cudaSuccess;
    ok &= mcclTestMemset(dst, 0xee, max) == cudaSuccess;
    ok &= cudaDeviceSynchronize() == cudaSuccess;  // the proxy's stream is non-blocking: fills must be done
    mcclProxyRequest rs, rr;
    ok &= mcclProxyPostOp(w.proxy, &r, dst, nb, &rr) == mcclSuccess;
    ok &= mcclProxyPostOp(w.proxy, &s, src, nb, &rs) == mcclSuccess;
    ok &= mcclProxyWait(w.proxy, rs) == mcclSuccess;
    ok &= mcclProxyWait(w.proxy, rr) == mcclSuccess;
    ok &= cudaMemcpy(h, dst, nb, cudaMemcpyDeviceToHost) == cudaSuccess;
    ok &= memcmp(h, want, nb) == 0;
  }
  free(h);
  free(want);
  EXPECT_TRUE(ok);
  EXPECT_OK(mcclBootstrapBarrier(w.bs));
  EXPECT_OK(mcclConnectorFree(&s));
  EXPECT_OK(mcclConnectorFree(&r));
  EXPECT_CUDA_OK(cudaFree(src));
  EXPECT_CUDA_OK(cudaFree(dst));
  worldDown(&w);
  EXPECT_EQ(mcclTestCountFds(), fds0);
}

MCCL_TEST_MAIN_MPI(MCCL_TEST_CASE(getFdRoundTrips), MCCL_TEST_CASE(queryFdRoundTrip),
                   MCCL_TEST_CASE(shmRingThroughProxy))
