// Test helper for mpirun tests of lab 05 and the labs above it: one rank per process, each on
// device rank % devices, with its proxy and a bootstrap (the unique id broadcast by MPI). The order
// is lab 05's: the proxy first (its address goes into the peer record), then the bootstrap, then
// the proxy learns every peer's address. The proxy serves the transports of the table the test
// passes (lab 05's tests: SHM only; lab 06's: its P2P and SHM). Header-only, for tests/ (it uses
// the MPI test harness).
#ifndef MCCL_TEST_MPI_WORLD_H_
#define MCCL_TEST_MPI_WORLD_H_

#include <string.h>
#include "mccl_checks.h"
#include "mccl_proxy.h"
#include "mccl_test_mpi.h"

typedef struct {
  mcclProxyState* proxy;
  mcclBootstrap* bs;
  int dev;
} world;

// This rank's device (rank % devices), made current; -1 without a device.
static inline int pickDevice(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) return -1;
  int dev = mcclTestMpiRank() % n;
  return cudaSetDevice(dev) == cudaSuccess ? dev : -1;
}

static inline mcclResult_t worldUp(world* w, struct mcclTransport* const* transports) {
  memset(w, 0, sizeof(*w));
  w->dev = pickDevice();
  if (w->dev < 0) return mcclUnhandledCudaError;
  mcclUniqueId id;
  memset(&id, 0, sizeof(id));
  if (mcclTestMpiRank() == 0 && mcclGetUniqueId(&id) != mcclSuccess) return mcclSystemError;
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  MCCLCHECK(mcclProxyCreate(mcclTestMpiRank(), w->dev, NULL, transports, &w->proxy));
  MCCLCHECK(mcclBootstrapInit(&id, mcclTestMpiRank(), mcclTestMpiSize(), w->dev, mcclProxyGetAddress(w->proxy), NULL,
                              &w->bs));
  MCCLCHECK(mcclProxyInit(w->proxy, w->bs));
  return mcclSuccess;
}

static inline void worldDown(world* w) {
  if (w->bs) mcclBootstrapClose(w->bs);
  if (w->proxy) mcclProxyDestroy(w->proxy);
  memset(w, 0, sizeof(*w));
}

#endif
