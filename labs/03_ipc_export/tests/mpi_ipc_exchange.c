// Lab 03 under mpirun (2 and 4 ranks): every rank exports an allocation, sends the descriptor and
// fd to every peer over its Unix socket, maps every peer's buffer and checks every byte. MPI is used
// only for rank/size, barriers and small descriptor exchanges; fds travel over mcclIpcSocket.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mccl_alloc.h"
#include "mccl_ipc.h"
#include "mccl_ipcsocket.h"
#include "mccl_param.h"
#include "mccl_test_mpi.h"
#include "ipc_test_util.h"

// What a rank sends each peer: who it is and the descriptor; the fd rides along (SCM_RIGHTS).
typedef struct {
  int32_t rank;
  int32_t pad;
  mcclIpcDesc desc;
} exchangeMsg;


// Open MPI and the device backend may open descriptors on first use; count after both are warm.
static int fdBaseline(void) {
  int dev = 0, n = 0, one = 1, all[64];
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) {
    dev = mcclTestMpiRank() % n;
    cudaSetDevice(dev);
    cudaFree(0);
  }
  if (mcclTestMpiSize() <= 64) MPI_Allgather(&one, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  return mcclTestCountFds();
}

static int myDevice(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) return -1;
  return mcclTestMpiRank() % n;
}

static unsigned char patternByte(int rank, uint64_t seed, size_t i) {
  return (unsigned char)(rank * 37 + (seed & 0xff) + i * 13 + (i >> 10));
}

// A fresh (rank, hash) namespace per test, agreed by all ranks; a short timeout so that a broken
// exchange fails fast instead of hanging the job.
static uint64_t sharedHash(void) {
  unsigned long long h = mcclTestRand() ^ ((uint64_t)getpid() << 20);
  MPI_Bcast(&h, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  setenv("MCCL_IPC_TIMEOUT", "10000", 1);
  mcclParamResetAll();
  return h;
}


static void expectPeerBytes(const void* mapped, size_t size, int peer, uint64_t seed) {
  unsigned char* got = malloc(size);
  EXPECT_TRUE(got != NULL);
  cudaError_t err = cudaMemcpy(got, mapped, size, cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) free(got);
  EXPECT_CUDA_OK(err);
  for (size_t i = 0; i < size; i++)
    if (got[i] != patternByte(peer, seed, i)) {
      unsigned g = got[i], w = patternByte(peer, seed, i);
      free(got);
      mcclTestFailAt(__FILE__, __LINE__, "peer %d byte %zu: expected 0x%02x, got 0x%02x", peer, i, w, g);
      return;
    }
  free(got);
}

// Shared set-up: device, allocation with the rank's pattern, export, socket.
typedef struct {
  int rank, nranks, dev, fd;
  size_t size;
  uint64_t hash, seed;
  void* buf;
  mcclIpcDesc desc;
  mcclIpcSocket sock;
} rankState;

static void setUp(rankState* st) {
  memset(st, 0, sizeof(*st));
  st->fd = -1;
  st->sock.fd = -1;
  st->rank = mcclTestMpiRank();
  st->nranks = mcclTestMpiSize();
  st->hash = sharedHash();
  st->seed = mcclTestRand();
  st->dev = myDevice();
  if (st->dev < 0) SKIP("no device");
  EXPECT_CUDA_OK(cudaSetDevice(st->dev));
  st->size = 2 * granularity(st->dev) + granularity(st->dev) / 2;  // rounded up by lab 01
  EXPECT_OK(mcclCuMemAlloc(&st->buf, NULL, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, st->size));
  EXPECT_OK(mcclIpcExport(st->buf, &st->desc, &st->fd));
  EXPECT_EQ(st->desc.handleType, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  EXPECT_GE(st->desc.size, st->size);
  // The whole exported allocation (rounded up to the granularity) carries the pattern.
  size_t n = (size_t)st->desc.size;
  unsigned char* host = malloc(n);
  EXPECT_TRUE(host != NULL);
  for (size_t i = 0; i < n; i++) host[i] = patternByte(st->rank, st->seed, i);
  cudaError_t err = mcclTestCopyToDevice(st->buf, host, n);
  free(host);
  EXPECT_CUDA_OK(err);
  EXPECT_OK(mcclIpcSocketInit(&st->sock, st->rank, st->hash, NULL));
}

// Sends our descriptor + fd to every peer, receives one from each, and checks the header against
// the copy every rank got through MPI. Fills peerFd/peerDesc indexed by rank.
static void exchangeAll(rankState* st, int* peerFd, mcclIpcDesc* peerDesc) {
  mcclIpcDesc* viaMpi = calloc((size_t)st->nranks, sizeof(mcclIpcDesc));
  EXPECT_TRUE(viaMpi != NULL);
  MPI_Allgather(&st->desc, sizeof(mcclIpcDesc), MPI_BYTE, viaMpi, sizeof(mcclIpcDesc), MPI_BYTE, MPI_COMM_WORLD);
  exchangeMsg msg;
  memset(&msg, 0, sizeof(msg));
  msg.rank = st->rank;
  msg.desc = st->desc;
  for (int k = 1; k < st->nranks; k++) {
    int peer = (st->rank + k) % st->nranks;
    mcclResult_t res = mcclIpcSocketSendMsg(&st->sock, &msg, sizeof(msg), st->fd, peer, st->hash);
    if (res != mcclSuccess) free(viaMpi);
    EXPECT_OK(res);
  }
  for (int k = 1; k < st->nranks; k++) {
    exchangeMsg in;
    int fd = -1;
    mcclResult_t res = mcclIpcSocketRecvMsg(&st->sock, &in, sizeof(in), &fd);
    if (res != mcclSuccess) free(viaMpi);
    EXPECT_OK(res);
    int ok = in.rank >= 0 && in.rank < st->nranks && in.rank != st->rank && peerFd[in.rank] == -1 && fd >= 0 &&
             memcmp(&in.desc, &viaMpi[in.rank], sizeof(mcclIpcDesc)) == 0;
    if (!ok) {
      int same = in.rank >= 0 && in.rank < st->nranks && memcmp(&in.desc, &viaMpi[in.rank], sizeof(mcclIpcDesc)) == 0;
      if (fd >= 0) close(fd);
      free(viaMpi);
      mcclTestFailAt(__FILE__, __LINE__, "bad message: from rank %d, fd %d, descriptor %s the MPI copy", in.rank, fd,
                     same ? "equal to" : "differs from");
      return;
    }
    peerFd[in.rank] = fd;
    peerDesc[in.rank] = in.desc;
  }
  free(viaMpi);
}

static void tearDown(rankState* st) {
  if (st->fd >= 0) close(st->fd);
  mcclIpcSocketClose(&st->sock);
  if (st->buf) mcclCuMemFree(st->buf);
}

// Every rank maps every peer's buffer on its own device and reads all of it.
static void allPairsExchange(void) {
  int fdBase = fdBaseline();
  rankState st;
  setUp(&st);
  CHECK_STOPPED();
  int peerFd[64];
  mcclIpcDesc peerDesc[64];
  EXPECT_LE(st.nranks, 64);
  for (int r = 0; r < 64; r++) peerFd[r] = -1;
  exchangeAll(&st, peerFd, peerDesc);
  CHECK_STOPPED();
  for (int peer = 0; peer < st.nranks; peer++) {
    if (peer == st.rank) continue;
    void* mapped = NULL;
    EXPECT_OK(mcclIpcImport(&peerDesc[peer], peerFd[peer], st.dev, &mapped));
    EXPECT_EQ(close(peerFd[peer]), 0);
    peerFd[peer] = -1;
    expectPeerBytes(mapped, (size_t)peerDesc[peer].size, peer, st.seed);
    CHECK_STOPPED();
    EXPECT_OK(mcclIpcUnmap(mapped));
  }
  MPI_Barrier(MPI_COMM_WORLD);  // nobody frees before every peer has read
  tearDown(&st);
  EXPECT_EQ(mcclTestCountFds(), fdBase);
}

// The exporters free their memory (and close their fds) before the importers read it.
static void exporterFreesFirst(void) {
  int fdBase = fdBaseline();
  rankState st;
  setUp(&st);
  CHECK_STOPPED();
  int peerFd[64];
  mcclIpcDesc peerDesc[64];
  void* mapped[64] = {NULL};
  for (int r = 0; r < 64; r++) peerFd[r] = -1;
  exchangeAll(&st, peerFd, peerDesc);
  CHECK_STOPPED();
  for (int peer = 0; peer < st.nranks; peer++) {
    if (peer == st.rank) continue;
    EXPECT_OK(mcclIpcImport(&peerDesc[peer], peerFd[peer], st.dev, &mapped[peer]));
    close(peerFd[peer]);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  tearDown(&st);  // our buffer is gone from our side
  MPI_Barrier(MPI_COMM_WORLD);
  for (int peer = 0; peer < st.nranks; peer++) {
    if (peer == st.rank) continue;
    expectPeerBytes(mapped[peer], (size_t)peerDesc[peer].size, peer, st.seed);
    CHECK_STOPPED();
    EXPECT_OK(mcclIpcUnmap(mapped[peer]));
  }
  EXPECT_EQ(mcclTestCountFds(), fdBase);
}

// Each rank sends its right neighbour damaged descriptors with a real fd: each import fails with
// a clear code, maps nothing, and the receiver's fds balance. Then the true one still works.
static void badDescriptorFromPeer(void) {
  int fdBase = fdBaseline();
  rankState st;
  setUp(&st);
  CHECK_STOPPED();
  int right = (st.rank + 1) % st.nranks, left = (st.rank + st.nranks - 1) % st.nranks;
  size_t gran = granularity(st.dev);
  enum { kTooBig, kNotGranular, kBadType, kBadMagic, kGood, kCases };
  mcclResult_t want[kCases] = {mcclUnhandledCudaError, mcclInvalidArgument, mcclInvalidArgument, mcclInvalidArgument,
                               mcclSuccess};
  for (int c = 0; c < kCases; c++) {
    exchangeMsg out;
    memset(&out, 0, sizeof(out));
    out.rank = st.rank;
    out.desc = st.desc;
    if (c == kTooBig) out.desc.size += 4 * gran;
    if (c == kNotGranular) out.desc.size -= 4096;
    if (c == kBadType) out.desc.handleType = 0x40;
    if (c == kBadMagic) out.desc.magic ^= 1;
    EXPECT_OK(mcclIpcSocketSendMsg(&st.sock, &out, sizeof(out), st.fd, right, st.hash));
    exchangeMsg in;
    int fd = -1;
    EXPECT_OK(mcclIpcSocketRecvMsg(&st.sock, &in, sizeof(in), &fd));
    EXPECT_EQ(in.rank, left);
    EXPECT_GE(fd, 0);
    void* mapped = (void*)0x1;
    mcclResult_t res = mcclIpcImport(&in.desc, fd, st.dev, &mapped);
    EXPECT_EQ(close(fd), 0);
    if (res != want[c]) {
      mcclTestFailAt(__FILE__, __LINE__, "case %d: import returned %d (%s), expected %d (%s)", c, res,
                     mcclGetErrorString(res), want[c], mcclGetErrorString(want[c]));
      return;
    }
    if (c == kGood) {
      expectPeerBytes(mapped, (size_t)in.desc.size, left, st.seed);
      CHECK_STOPPED();
      EXPECT_OK(mcclIpcUnmap(mapped));
    } else {
      EXPECT_TRUE(mapped == (void*)0x1);
    }
  }
  // A closed fd: the import refuses before touching the driver.
  int dupFd = dup(st.fd);
  EXPECT_EQ(close(dupFd), 0);
  void* mapped = NULL;
  EXPECT_RES(mcclIpcImport(&st.desc, dupFd, st.dev, &mapped), mcclInvalidArgument);
  MPI_Barrier(MPI_COMM_WORLD);
  tearDown(&st);
  EXPECT_EQ(mcclTestCountFds(), fdBase);
}

MCCL_TEST_MAIN_MPI(MCCL_TEST_CASE(allPairsExchange), MCCL_TEST_CASE(exporterFreesFirst),
                   MCCL_TEST_CASE(badDescriptorFromPeer))
