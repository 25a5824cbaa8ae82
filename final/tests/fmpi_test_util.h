// final/ mpirun tests (mpi_coll.c, mpi_net.c): one rank per process on device rank % devices, its
// communicator from an MPI-broadcast id, a send and a recv buffer (cudaMalloc), a stream and a host
// buffer.
#ifndef FMPI_TEST_UTIL_H_
#define FMPI_TEST_UTIL_H_

#include <stdlib.h>
#include <string.h>
#include "mccl_test.h"
#include "mccl_test_mpi.h"
#include "minccl.h"

struct fmpiWorld {
  mcclComm_t comm;
  void *send, *recv, *host;
  cudaStream_t stream;
  size_t bytes;
  int rank, nranks, ndev;
};

static inline void fmpiSetUp(struct fmpiWorld* w, size_t bytes) {
  memset(w, 0, sizeof(*w));
  if (cudaGetDeviceCount(&w->ndev) != cudaSuccess || w->ndev < 1) SKIP("no CUDA device");
  w->rank = mcclTestMpiRank();
  w->nranks = mcclTestMpiSize();
  mcclUniqueId id;
  memset(&id, 0, sizeof(id));
  if (w->rank == 0) EXPECT_OK(mcclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  EXPECT_CUDA_OK(cudaSetDevice(w->rank % w->ndev));
  EXPECT_OK(mcclCommInitRank(&w->comm, w->nranks, id, w->rank));
  w->bytes = bytes;
  EXPECT_CUDA_OK(cudaMalloc(&w->send, bytes));
  EXPECT_CUDA_OK(cudaMalloc(&w->recv, bytes));
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking));
  w->host = malloc(bytes);
  EXPECT_TRUE(w->host != NULL);
}

static inline void fmpiTearDown(struct fmpiWorld* w) {
  if (w->stream) EXPECT_CUDA_OK(cudaStreamDestroy(w->stream));
  if (w->send) EXPECT_CUDA_OK(cudaFree(w->send));
  if (w->recv) EXPECT_CUDA_OK(cudaFree(w->recv));
  if (w->comm) EXPECT_OK(mcclCommDestroy(w->comm));
  free(w->host);
  memset(w, 0, sizeof(*w));
}
#endif
