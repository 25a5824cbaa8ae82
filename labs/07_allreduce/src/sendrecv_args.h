// Lab 07, private: what one send/receive launch needs, in a header that compiles as C11
// (sendrecv.c fills it), C++ (the sim's kernels) and CUDA (nvcc). NCCL's twins are ncclDevWorkP2p
// (one work: a round's send and receive) and the kernel arguments that carry a plan's works.
#ifndef MCCL_SENDRECV_ARGS_H_
#define MCCL_SENDRECV_ARGS_H_

#include <stddef.h>
#include <stdint.h>
#include "mccl_allreduce_args.h"
#include "mccl_conn.h"

// Works one launch carries; a group with more is cut into several launches, as NCCL cuts a
// planner's tasks into several kernel plans when one plan's budget is full.
#define MCCL_P2P_MAX_WORKS 16
// The connection index point-to-point uses on every channel (NCCL's addP2pToPlan: connIndex 1),
// apart from the ring's (0), also to the ring's neighbours.
// Parts of a direction start at multiples of this (NCCL's ncclP2pPartBounds: 4 KiB).
#define MCCL_P2P_PART_ALIGN 4096

// One round of the schedule (NCCL's ncclDevWorkP2p): a send to sendRank and a receive from
// recvRank, each cut into parts spread over the channels channelBase, channelBase + 1, ...
// (modulo nP2pChannels). sendRank == the launch's rank: a copy of sendBytes from sendAddr to recvAddr.
struct mcclP2pWork {
  const void* sendAddr;
  void* recvAddr;
  uint64_t sendBytes;
  uint64_t recvBytes;
  int32_t sendRank;     // -1: no send in this round
  int32_t recvRank;     // -1: no receive in this round
  int32_t nSendParts;   // channels the send is cut over (0: no bytes)
  int32_t nRecvParts;   // channels the receive is cut over (0: no bytes)
  int32_t channelBase;  // channel of part 0
  int32_t llMask;       // MCCL_P2P_SEND_LL | MCCL_P2P_RECV_LL: the directions that use LL (else SIMPLE)
};
// mcclP2pWork.llMask bits: a direction of at most MCCL_P2P_LL_THRESHOLD bytes a part moves as LL lines
// (NCCL's addP2pToPlan: protoLL when bytes <= nChannels * NCCL_P2P_LL_THRESHOLD); both ends decide
// from the same byte count, so they agree.
#define MCCL_P2P_SEND_LL 1
#define MCCL_P2P_RECV_LL 2

struct mcclSendRecvArgs {
  int nWorks;        // works[0 .. nWorks), run in this order by every block
  int nP2pChannels;  // blocks: a power of two, at most the communicator's channels
  int chunkSteps;    // FIFO slots per chunk
  int sliceSteps;    // slots per slice
  int rank;          // this rank (a work with sendRank == rank is a local copy)
  int trace;         // 1: the role threads narrate their waits and posts (MCCL_KERNEL_TRACE)
  volatile uint32_t* abortFlag;                                 // device view of the host-mapped abort flag
  struct mcclDevChannelPeer* devPeers[MCCL_SIGNAL_MAX_BLOCKS];  // per channel (at most the comm's): its [nRanks] peers
  struct mcclP2pWork works[MCCL_P2P_MAX_WORKS];
};

#endif
