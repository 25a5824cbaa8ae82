// Lab 07, private: what the enqueue layer's files share (enqueue.c: calls -> tasks; group.c: groups;
// plan.c: tasks -> plans -> launches; tuning.c: the table; comm.c, window.c). Not installed.
#ifndef MCCL_ENQUEUE_INTERNAL_H_
#define MCCL_ENQUEUE_INTERNAL_H_

#include "mccl_collectives.h"
#include "mccl_param.h"

#ifdef __cplusplus
extern "C" {
#endif

// Across hosts the ring's LL lines cross the network (lab 08) at half SIMPLE's payload per byte, and
// each LL step is a message of at most a slot, so LL's saved round trips stop paying for its doubled
// traffic at a few KiB rather than at lab 07's on-node cut-overs: a communicator over several hosts uses
// LL up to here, every collective (the figures: src/tuning-basis.md).
#define MCCL_NET_LL_MAX (16u << 10)

// tuning.c: MCCL_PROTO read once per call in one place: MCCL_PROTO_SIMPLE, MCCL_PROTO_LL, MCCL_PROTO_LL128,
// or -1 unset;
// mcclInvalidArgument (with a WARN) for any other value.
mcclResult_t mcclLabParamProto(int* proto);

// The communicator's last word on a ring's protocol, after the call's own choice (its table and
// MCCL_PROTO): SIMPLE where a NET edge cannot carry LL (simpleOnly), and across hosts SIMPLE above
// MCCL_NET_LL_MAX unless MCCL_PROTO names the protocol. LL128 where some ring edge has no LL128 FIFO:
// refused by name (mcclInvalidUsage). Defined in plan.c.
mcclResult_t mcclLabCommProto(const mcclLabComm* comm, size_t bytes, int proto, int* out);

// MCCL_THREAD_THRESHOLDS, read once at the communicator's creation into comm->threadThresholds (NCCL's
// comm->threadThresholds for the ring); a malformed value warns and leaves them 0. Defined in plan.c.
void mcclLabThreadThresholds(mcclLabComm* comm);

// An operation mcclLabRedOpCreatePreMulSum made: its number (from mcclNumOps up, unique in the process,
// so another communicator's or a destroyed one's is never found), its type, and what a task copies.
struct mcclLabUserOp {
  int op;
  int dtype;
  int isPtr;
  uint64_t arg;
  struct mcclLabUserOp* next;
};
// enqueue.c: drop every operation of a communicator being destroyed.
void mcclLabUserOpsFree(mcclLabComm* comm);

// plan.c: run the communicator's tasks (its device current): connect what the point-to-point tasks
// need, plan, launch every plan, free the tasks. With `estimateUs` non-NULL nothing is connected or
// launched: the tuning model's time of the tasks is added to *estimateUs and the tasks are dropped.
// On an error the remaining tasks are dropped too.
mcclResult_t mcclLabRunTasks(mcclLabComm* comm, float* estimateUs);
// plan.c: the connection step alone (blocks until the peers' matching groups connect their ends).
mcclResult_t mcclLabConnectP2p(mcclLabComm* comm);
// plan.c: drop the communicator's tasks unrun; returns how many there were.
int mcclLabTasksDrop(mcclLabComm* comm);
// plan.c: free the task structs kept for reuse (at destroy).
void mcclLabTasksFree(mcclLabComm* comm);

// group.c: the depth of this thread's groups; add the communicator to this thread's open group (the
// first task of the group for it). mcclLabGroupForget is in mccl_collectives.h.
int mcclLabGroupDepth(void);
mcclResult_t mcclLabGroupAdd(mcclLabComm* comm);

// window.c: register a window without adding it to the communicator's list (the signal area), and
// free one whatever list it is on.
mcclResult_t labWindowMap(mcclLabComm* comm, void* buff, size_t size, mcclLabWindow** win);
mcclResult_t labWindowUnmap(mcclLabComm* comm, mcclLabWindow* win);

// watchdog.c: the communicator's watchdog. Init is collective (a bootstrap allgather of the record pages'
// names, made by every rank whatever MCCL_WATCHDOG_TIMEOUT says); Free stops its thread and unmaps.
mcclResult_t mcclLabWatchdogInit(mcclLabComm* comm);
void mcclLabWatchdogFree(mcclLabComm* comm);
// At a group's end, with comm->watchdog: Number writes the records of the planner's calls under the numbers that
// follow the last group's (returns how many); each launch of the group carries OpTag, which names the group's first
// call to the watchdog's thread (0: no watchdog, or no call recorded); once the group's launches are made, Publish
// advances the numbering past its calls.
uint64_t mcclLabWatchdogNumber(mcclLabComm* comm);
uint64_t mcclLabWatchdogOpTag(const mcclLabComm* comm);
void mcclLabWatchdogPublish(mcclLabComm* comm, uint64_t nCalls);

// launches.c: the communicator's own launches. Init/Free the ring; Number gives a launch its number (0, none,
// when captured into a graph); Record marks the launch's end with an event recorded after it on its stream
// (a kernel's, or the copy engines' last synchronisation) and keeps the watchdog's tag beside it, in the same word
// (its low MCCL_LAUNCH_OP_BITS bits); Failed marks a numbered launch that was not made as ended; Ended says whether
// launch n has ended; OpTag gives the tag launch n was recorded with (0: none, or not recorded yet).
// mcclLabCommWaitLaunches is in mccl_allreduce.h.
#define MCCL_LAUNCH_OP_BITS 28
mcclResult_t mcclLabLaunchesInit(mcclLabComm* comm);
void mcclLabLaunchesFree(mcclLabComm* comm);
uint64_t mcclLabLaunchNumber(mcclLabComm* comm, cudaStream_t stream);
mcclResult_t mcclLabLaunchRecord(mcclLabComm* comm, cudaStream_t stream, uint64_t n, uint64_t opTag);
uint64_t mcclLabLaunchOpTag(const mcclLabComm* comm, uint64_t n);
void mcclLabLaunchFailed(mcclLabComm* comm, uint64_t n);
int mcclLabLaunchEnded(const mcclLabComm* comm, uint64_t n);

#ifdef __cplusplus
}
#endif
#endif
