// Lab 07, private: what the host side and the launch code share. Not installed.
#ifndef MCCL_ALLREDUCE_INTERNAL_H_
#define MCCL_ALLREDUCE_INTERNAL_H_

#include "mccl_allreduce.h"
#include "mccl_param.h"

#ifdef __cplusplus
extern "C" {
#endif

// The kernel launch (lab 07's device code, written by the lead in src/*.cu): launch the kernel for
// args->algorithm on `stream` with no host synchronisation. mcclLabAllReduce has checked every
// argument and filled every field of *args before it calls this.
mcclResult_t mcclLabAllReduceLaunch(mcclLabComm* comm, const struct mcclAllReduceArgs* args, cudaStream_t stream);

// Across hosts the ring's LL lines cross the network (lab 08) at half SIMPLE's payload per byte, and
// each LL step is a message of at most a slot: LL beat SIMPLE there up to 8 KiB and lost from 32 KiB
// (one H100 posing as 2 hosts, docs/results/2026-11-25-h100-net.md), so a communicator over several
// hosts uses LL up to here, every collective.
#define MCCL_NET_LL_MAX (16u << 10)

// The communicator's last word on a ring call's protocol, after the call's own choice (its table and
// MCCL_PROTO): SIMPLE where a NET edge cannot carry LL (simpleOnly), and across hosts SIMPLE above
// MCCL_NET_LL_MAX unless MCCL_PROTO names the protocol.
static inline int mcclLabCommProto(const mcclLabComm* comm, size_t bytes, int proto) {
  if (comm->simpleOnly) return MCCL_PROTO_SIMPLE;
  if (comm->multiHost && mcclParamProto() == NULL && bytes > MCCL_NET_LL_MAX) return MCCL_PROTO_SIMPLE;
  return proto;
}

// window.c: register a window without adding it to the communicator's list (the signal area), and
// free one whatever list it is on.
mcclResult_t labWindowMap(mcclLabComm* comm, void* buff, size_t size, mcclLabWindow** win);
mcclResult_t labWindowUnmap(mcclLabComm* comm, mcclLabWindow* win);

#ifdef __cplusplus
}
#endif
#endif
