// Lab 07, private: what one send/receive launch needs, in a header that compiles as C11
// (sendrecv.c fills it), C++ (the sim's kernels) and CUDA (nvcc). NCCL's twin is the part of
// ncclDevWorkP2p that src/device/sendrecv.h reads.
#ifndef MCCL_SENDRECV_ARGS_H_
#define MCCL_SENDRECV_ARGS_H_

#include <stddef.h>
#include <stdint.h>
#include "mccl_allreduce_args.h"
#include "mccl_conn.h"

struct mcclSendRecvArgs {
  int nChannels;   // blocks, one per ring channel
  int chunkSteps;  // FIFO slots per chunk
  int sliceSteps;  // slots per slice
  int self;        // 1: copy sendbuff to recvbuff on this device (sendBytes bytes), no connection used
  size_t sendBytes;  // 0: no send
  size_t recvBytes;  // 0: no receive
  const void* sendbuff;
  void* recvbuff;
  struct mcclConnInfo* recvConns;  // [nChannels] device array: recv from the ring's prev on channel c
  struct mcclConnInfo* sendConns;  // [nChannels] device array: send to the ring's next on channel c
  volatile uint32_t* abortFlag;    // device view of the communicator's host-mapped abort flag
};

#endif
