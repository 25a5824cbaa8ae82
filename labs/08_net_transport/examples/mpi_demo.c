// Lab 08 demo, under mpirun: each rank poses as a host of its own (MCCL_HOSTID, unless already set),
// creates a lab 07 communicator whose ring edges between "hosts" are NET, says which transport each
// of its edges took, and runs one allreduce whose slots travel through the MPI plugin.
//   mpirun -np 4 build/sim/bin/08_net_transport/mpi_demo
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "mccl_args.h"
#include "mccl_collectives.h"
#include "mccl_net.h"

static const char* transportName(int t) {
  return t == TRANSPORT_P2P ? "P2P" : t == TRANSPORT_SHM ? "SHM" : t == TRANSPORT_NET ? "NET" : "?";
}

int main(int argc, char** argv) {
  mcclArgsCheck(argc, argv, 0, "", "  Under mpirun: each rank a posed host, ring edges over NET, one allreduce.");
  int provided = 0, rank = 0, nranks = 1, ndev = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);  // the proxy thread calls MPI too
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  char id[32];
  snprintf(id, sizeof(id), "demo-host-%d", rank);
  setenv("MCCL_HOSTID", id, 0);  // step 1: a host of its own (before anything reads the host hash)
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
    printf("rank %d: no device\n", rank);
    MPI_Finalize();
    return 1;
  }
  mcclUniqueId uid;
  if (rank == 0 && mcclGetUniqueId(&uid) != mcclSuccess) MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Bcast(&uid, sizeof(uid), MPI_BYTE, 0, MPI_COMM_WORLD);
  cudaSetDevice(rank % ndev);
  mcclLabComm* comm = NULL;  // step 2: the ring, NET between hosts (the plugin is loaded here)
  if (mcclLabCommInit(&comm, nranks, &uid, rank, rank % ndev, 1, mcclTransports) != mcclSuccess)  // with NET
    MPI_Abort(MPI_COMM_WORLD, 1);
  int send = -1, recv = -1;
  if (nranks > 1) mcclNetRingTransports(comm, 0, &send, &recv);
  printf("rank %d (%s): ring prev %d via %s, next %d via %s\n", rank, id, comm->ring.prev, transportName(recv),
         comm->ring.next, transportName(send));
  const size_t count = 1 << 16;  // step 3: an allreduce; its slots go through isend/irecv on the proxy thread
  float *buf = NULL, *host = (float*)malloc(count * sizeof(float));
  cudaMalloc((void**)&buf, count * sizeof(float));
  for (size_t i = 0; i < count; i++) host[i] = (float)(rank + 1);
  cudaMemcpy(buf, host, count * sizeof(float), cudaMemcpyHostToDevice);
  mcclResult_t r = mcclLabAllReduce(buf, buf, count, mcclFloat32, mcclSum, comm, NULL);
  cudaDeviceSynchronize();
  cudaMemcpy(host, buf, count * sizeof(float), cudaMemcpyDeviceToHost);
  printf("rank %d: allreduce %s, element 0 = %g (expected %d)\n", rank, mcclGetErrorString(r), host[0],
         nranks * (nranks + 1) / 2);
  cudaFree(buf);
  free(host);
  mcclLabCommDestroy(comm);
  MPI_Finalize();
  return 0;
}
