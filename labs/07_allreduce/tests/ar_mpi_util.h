// Lab 07 mpirun tests: one rank per process on device rank % devices, its communicator, a send and
// a recv buffer registered as windows (with cuMem), and one allreduce checked against ar_test_util.h's reference.
#ifndef AR_MPI_UTIL_H_
#define AR_MPI_UTIL_H_

#include <stdlib.h>
#include "ar_test_util.h"
#include "mccl_alloc.h"
#include "mccl_test.h"
#include "mccl_test_mpi.h"

struct arMpi {
  mcclLabComm* comm;
  void *send, *recv, *host;
  mcclLabWindow *sendWin, *recvWin;
  cudaStream_t stream;
  size_t bytes;
};


// transports: the communicator's transport table (lab 07's tests: lab 06's mcclLocalTransports; lab 08's:
// its mcclTransports, which adds NET).
static inline void arMpiSetUp(struct arMpi* m, int nChannels, size_t bytes, struct mcclTransport* const* transports) {
  memset(m, 0, sizeof(*m));
  int dev = mcclTestMpiDevice();
  mcclUniqueId id;
  memset(&id, 0, sizeof(id));
  if (mcclTestMpiRank() == 0) EXPECT_OK(mcclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  EXPECT_CUDA_OK(cudaSetDevice(dev));
  EXPECT_OK(mcclLabCommInit(&m->comm, mcclTestMpiSize(), &id, mcclTestMpiRank(), dev, nChannels, transports));
  m->bytes = bytes;
  EXPECT_OK(mcclMemAlloc(&m->send, bytes));
  EXPECT_OK(mcclMemAlloc(&m->recv, bytes));
  if (mcclCuMemEnable()) {  // windows need cuMem (mcclMemAlloc is cudaMalloc without it): two-shot's tests skip then
    EXPECT_OK(mcclLabWindowRegister(m->comm, m->send, bytes, &m->sendWin));
    EXPECT_OK(mcclLabWindowRegister(m->comm, m->recv, bytes, &m->recvWin));
  }
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
  m->host = malloc(bytes);
  EXPECT_TRUE(m->host != NULL);
}

static inline void arMpiTearDown(struct arMpi* m) {
  MPI_Barrier(MPI_COMM_WORLD);  // every rank is done with the peers' buffers before any unmaps
  if (m->stream) EXPECT_CUDA_OK(cudaStreamDestroy(m->stream));
  if (m->sendWin) EXPECT_OK(mcclLabWindowDeregister(m->comm, m->sendWin));
  if (m->recvWin) EXPECT_OK(mcclLabWindowDeregister(m->comm, m->recvWin));
  if (m->send) EXPECT_OK(mcclMemFree(m->send));
  if (m->recv) EXPECT_OK(mcclMemFree(m->recv));
  EXPECT_OK(mcclLabCommDestroy(m->comm));
  free(m->host);
  memset(m, 0, sizeof(*m));
}

// One allreduce along `path` on this rank (every rank calls it with the same arguments), checked
// here; the verdicts are combined by the harness. A path that does not run on this many ranks is left out.
static inline void arMpiRun(struct arMpi* m, const struct arPath* path, mcclDataType_t t, mcclRedOp_t op, size_t count,
                            int inPlace, uint64_t seed) {
  if (!arPathRuns(path, m->comm->nRanks)) return;
  size_t bytes = count * mcclTypeSize(t);
  char why[160];
  arForce(path->algo, path->proto);
  if (!inPlace) {
    memset(m->host, 0xa5, bytes);
    EXPECT_CUDA_OK(mcclTestCopyToDevice(m->recv, m->host, bytes));
  }
  arFill(m->host, t, op, count, m->comm->rank, seed);
  EXPECT_CUDA_OK(mcclTestCopyToDevice(inPlace ? m->recv : m->send, m->host, bytes));
  EXPECT_OK(mcclLabAllReduce(inPlace ? m->recv : m->send, m->recv, count, t, op, m->comm, m->stream));
  EXPECT_CUDA_OK(cudaStreamSynchronize(m->stream));
  EXPECT_CUDA_OK(cudaMemcpy(m->host, m->recv, bytes, cudaMemcpyDeviceToHost));
  if (arCheck(m->host, t, op, count, m->comm->nRanks, seed, why, sizeof(why)))
    mcclTestFailAt(__FILE__, __LINE__, "%s %s %s count %zu %s: rank %d: %s", path->name, mcclTypeName(t),
                   mcclOpName(op), count, inPlace ? "in place" : "out of place", m->comm->rank, why);
}

#endif
