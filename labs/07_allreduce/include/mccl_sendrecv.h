/**
 * @file mccl_sendrecv.h
 * @brief Lab 07: grouped point-to-point sends and receives between any ranks (NCCL 2.28.9
 * src/collectives.cc ncclSend / ncclRecv, src/enqueue.cc scheduleP2pTasksToPlan / addP2pToPlan,
 * src/transport.cc ncclTransportP2pSetup on connIndex 1, src/device/sendrecv.h).
 * @ingroup lab07
 */
#ifndef MCCL_SENDRECV_H_
#define MCCL_SENDRECV_H_

#include <stddef.h>
#include <cuda_runtime.h>
#include "mccl_allreduce.h"
#include "mccl_result.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup lab07
 * @{ */

/** @brief One send or receive of a group (NCCL's ncclTaskP2p). */
typedef struct mcclLabP2pTask {
  int isSend;   /**< 1: send `bytes` of buff to peer; 0: receive `bytes` from peer into buff */
  int peer;     /**< the other rank, 0 .. nRanks-1; this rank: a device copy (needs both directions) */
  void* buff;   /**< device bytes (only read by a send); may be NULL when bytes is 0 */
  size_t bytes; /**< bytes; the peer's matching task gives the same count */
} mcclLabP2pTask;

/**
 * @brief Run a group of sends and receives to and from any ranks (NCCL's ncclGroupStart, ncclSend /
 * ncclRecv..., ncclGroupEnd on one communicator and stream).
 *
 * Connections are made lazily, on first use, as NCCL's group end does: for each peer of a task that
 * is not connected yet, this rank records every point-to-point channel (the communicator's channels,
 * rounded down to a power of two) on connIndex 1, and lab 06's mcclTransportP2pSetup connects them
 * (P2P, else SHM; MCCL_P2P_DISABLE=1 forces SHM). The peer's call with the matching task records the
 * other ends, so the two setups meet; ranks with nothing to connect take no part. The connections stay
 * in the channels (per peer and channel) until mcclLabCommDestroy. Ring neighbours get connIndex 1
 * connections of their own too, apart from the ring's connIndex 0, as in NCCL.
 *
 * The tasks are then scheduled as NCCL schedules them: round r pairs the send to (rank + r) mod n with
 * the receive from (rank - r) mod n, and a peer's k-th send and k-th receive go in pass k. Each round is
 * one work whose directions are cut into parts over the channels from a base that depends on the round
 * only, so both ends cut alike. One kernel launch carries up to MCCL_P2P_MAX_WORKS works; a group with
 * more is several launches on `stream`. Nothing waits on the host.
 *
 * A send whose receive never comes (no matching task in a peer's group) waits, as in NCCL: in
 * connection setup (the call blocks until MCCL_BOOTSTRAP_TIMEOUT gives mcclTimeout, or the abort flag
 * ends it) or, once connected, in the kernel until mcclLabCommAbort.
 *
 * @code
 * // all-to-all: every rank sends block p to rank p and receives block p from it, itself included.
 * mcclLabP2pTask t[2 * MCCL_LAB_MAX_RANKS];
 * for (int p = 0; p < n; p++) {
 *   t[2 * p] = (mcclLabP2pTask){1, p, sbuf + p * bytes, bytes};
 *   t[2 * p + 1] = (mcclLabP2pTask){0, p, rbuf + p * bytes, bytes};
 * }
 * MCCLCHECK(mcclLabSendRecv(t, 2 * n, comm, stream));
 * @endcode
 * @param[in] tasks   nTasks tasks, in call order.
 * @param[in] nTasks  0 or more (0 does nothing).
 * @param[in] comm    the communicator.
 * @param[in] stream  the caller's stream.
 * @return mcclSuccess; mcclInvalidArgument (NULL comm, NULL tasks with nTasks > 0, a peer out of range,
 *         a NULL buff with bytes, isSend not 0 or 1; named in the WARN); mcclInvalidUsage (a send to self
 *         without the receive from self of the same size, or the reverse; an aborted communicator;
 *         no transport between two ranks); errors of the connection setup (mcclTimeout, ...) and of
 *         the launch.
 */
mcclResult_t mcclLabSendRecv(const mcclLabP2pTask* tasks, int nTasks, mcclLabComm* comm, cudaStream_t stream);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
