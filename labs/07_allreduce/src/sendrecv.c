// Lab 07: point-to-point send and receive (NCCL 2.28.9 src/collectives.cc ncclSend / ncclRecv, the
// group's p2p fusion in src/enqueue.cc), limited to the ring's neighbours: the ring's per-channel
// connections are the only ones the communicator has (send -> ring.next, recv <- ring.prev).
// One launch of the byte kernel (sendrecv.cu) does both directions, as src/launch.c launches the
// allreduce: the arguments packed as its one parameter, cuLaunchKernel, no host synchronisation.
#include <stdint.h>
#include <string.h>
#include <cuda.h>
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_prims.h"
#include "mccl_sendrecv.h"
#include "sendrecv_args.h"

extern void mcclSendRecvKernel(struct mcclSendRecvArgs args);

// SIMPLE's copies want many threads (as the ring collectives).
#define SR_THREADS 512

mcclResult_t mcclLabSendRecv(const void* sendbuff, size_t sendBytes, int sendPeer, void* recvbuff, size_t recvBytes,
                             int recvPeer, mcclLabComm* comm, cudaStream_t stream) {
  MCCL_ARGCHECK(comm != NULL, "SendRecv: comm is NULL");
  MCCL_ARGCHECK(sendPeer >= 0 || recvPeer >= 0, "SendRecv: neither sendPeer nor recvPeer given (both -1)");
  MCCL_ARGCHECK(sendPeer >= -1 && sendPeer < comm->nRanks, "SendRecv: sendPeer %d (ranks 0 .. %d, or -1)", sendPeer,
                comm->nRanks - 1);
  MCCL_ARGCHECK(recvPeer >= -1 && recvPeer < comm->nRanks, "SendRecv: recvPeer %d (ranks 0 .. %d, or -1)", recvPeer,
                comm->nRanks - 1);
  if (sendPeer < 0) sendBytes = 0;
  if (recvPeer < 0) recvBytes = 0;
  MCCL_ARGCHECK(sendBytes == 0 || sendbuff != NULL, "SendRecv: sendbuff is NULL with %zu bytes", sendBytes);
  MCCL_ARGCHECK(recvBytes == 0 || recvbuff != NULL, "SendRecv: recvbuff is NULL with %zu bytes", recvBytes);
  const int rank = comm->rank;
  const int self = sendPeer == rank || recvPeer == rank;
  if (self) {
    if (sendPeer != rank || recvPeer != rank || sendBytes != recvBytes) {
      WARN(
          "Invalid usage: rank %d: a send to itself needs the receive from itself of the same size in the same group "
          "(send to %d, %zu bytes; receive from %d, %zu bytes)",
          rank, sendPeer, sendBytes, recvPeer, recvBytes);
      return mcclInvalidUsage;
    }
  } else {
    if (sendPeer >= 0 && sendPeer != comm->ring.next) {
      WARN(
          "Invalid usage: rank %d: send to rank %d: minccl sends only to the ring's next rank (%d) or to itself, "
          "over the ring's connections (any-peer send/recv is not implemented)",
          rank, sendPeer, comm->ring.next);
      return mcclInvalidUsage;
    }
    if (recvPeer >= 0 && recvPeer != comm->ring.prev) {
      WARN(
          "Invalid usage: rank %d: receive from rank %d: minccl receives only from the ring's previous rank (%d) or "
          "from itself, over the ring's connections (any-peer send/recv is not implemented)",
          rank, recvPeer, comm->ring.prev);
      return mcclInvalidUsage;
    }
  }
  if (__atomic_load_n(comm->abortFlag, __ATOMIC_ACQUIRE)) {
    WARN("Invalid usage: rank %d's communicator was aborted", rank);
    return mcclInvalidUsage;
  }
  if (sendBytes == 0 && recvBytes == 0) return mcclSuccess;  // NCCL: nothing to move, nothing enqueued
  struct mcclSendRecvArgs a;
  memset(&a, 0, sizeof(a));
  a.nChannels = comm->nChannels;
  a.chunkSteps = MCCL_DEV_DEFAULT_CHUNKSTEPS;
  a.sliceSteps = MCCL_DEV_DEFAULT_CHUNKSTEPS < MCCL_DEV_DEFAULT_SLICESTEPS ? MCCL_DEV_DEFAULT_CHUNKSTEPS
                                                                           : MCCL_DEV_DEFAULT_SLICESTEPS;
  a.self = self;
  a.sendBytes = sendBytes;
  a.recvBytes = recvBytes;
  a.sendbuff = sendbuff;
  a.recvbuff = recvbuff;
  a.recvConns = comm->devRecvConns;
  a.sendConns = comm->devSendConns;
  a.abortFlag = comm->abortFlagDev;
  TRACE(MCCL_COLL, "rank %d: send %zu bytes to %d, recv %zu bytes from %d", rank, sendBytes, sendPeer, recvBytes,
        recvPeer);
  cudaFunction_t fn;
  MCCLCHECK(mcclDevGetFunction(comm->cudaDev, (const void*)mcclSendRecvKernel, &fn));
  void* params[] = {&a};
  CUCHECK(
      cuLaunchKernel((CUfunction)fn, (unsigned)a.nChannels, 1, 1, SR_THREADS, 1, 1, 0, (CUstream)stream, params, NULL));
  return mcclSuccess;
}
