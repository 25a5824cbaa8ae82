// Lab 07, private: what one launch of the ring collectives needs (AllGather, ReduceScatter,
// Broadcast, Reduce), in a header that compiles as C11 (collectives.c fills it), C++ (the sim's
// kernels) and CUDA (nvcc). NCCL's twin is the part of ncclDevWorkColl those runRing functions read.
#ifndef MCCL_COLL_ARGS_H_
#define MCCL_COLL_ARGS_H_

#include <stddef.h>
#include <stdint.h>
#include "mccl_allreduce_args.h"
#include "mccl_conn.h"

// The collectives (NCCL's ncclFunc_t values, in its order, without AllReduce and SendRecv).
enum mcclCollFunc {
  mcclCollBroadcast = 0,
  mcclCollReduce = 1,
  mcclCollAllGather = 2,
  mcclCollReduceScatter = 3,
  mcclNumCollFuncs = 4
};

struct mcclCollArgs {
  int func;        // enum mcclCollFunc
  int proto;       // MCCL_PROTO_SIMPLE or MCCL_PROTO_LL
  int nChannels;   // blocks, one per ring channel
  int nRanks;      // ranks
  int root;        // Broadcast / Reduce: the root's rank
  int dtype;       // mcclDataType_t; the copy kernel (Broadcast, AllGather) moves bytes
  int op;          // mcclRedOp_t (Reduce, ReduceScatter)
  int chunkSteps;  // SIMPLE: FIFO slots per chunk
  int sliceSteps;  // SIMPLE: slots per slice
  int trace;       // 1: the role threads narrate their waits and posts (MCCL_KERNEL_TRACE)
  // Elements of the kernel's type per rank: AllGather sendcount and ReduceScatter recvcount (the
  // per-rank block of the larger buffer), Broadcast / Reduce count. The copy kernel's are bytes.
  size_t count;
  const void* sendbuff;
  void* recvbuff;
  uint64_t redOpArg;               // avg's divisor: nRanks (NCCL's redOpArg); 1 otherwise
  struct mcclConnInfo* recvConns;  // [nChannels] device array: recv from the ring's prev on channel c
  struct mcclConnInfo* sendConns;  // [nChannels] device array: send to the ring's next on channel c
  volatile uint32_t* abortFlag;    // device view of the communicator's host-mapped abort flag
  // The ring seen from this rank, as NCCL's ncclRing::userRanks: ringRanks[0] is this rank,
  // ringRanks[1] the next one, ringRanks[nRanks-1] the previous one.
  int ringRanks[MCCL_LAB_MAX_RANKS];
};

#endif
