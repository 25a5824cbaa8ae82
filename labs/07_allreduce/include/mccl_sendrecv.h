/**
 * @file mccl_sendrecv.h
 * @brief Lab 07: point-to-point send and receive on the ring's connections (NCCL 2.28.9
 * src/collectives.cc ncclSend / ncclRecv, src/device/sendrecv.h), limited to the ring's neighbours.
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

/**
 * @brief Send bytes to the ring's next rank and/or receive bytes from its previous rank, in one
 * kernel launch on `stream` (NCCL fuses a group's sends and receives the same way). Each channel
 * carries a contiguous part of each direction, cut as the ring collectives cut their data, over
 * the channel's send connection (to comm->ring.next) and receive connection (from comm->ring.prev)
 * with lab 06's SIMPLE Primitives. The peer's matching call passes the same byte count (as NCCL
 * requires); a send whose receiver never comes waits until the communicator is aborted.
 *
 * Only the ring's neighbours are reachable: sendPeer must be ring.next, recvPeer ring.prev (with 2
 * ranks both are the other rank). Sending to oneself (sendPeer == recvPeer == rank) is a device copy
 * of sendbuff into recvbuff, and needs both directions in the same call with equal sizes.
 *
 * @code
 * // nccl-tests' sendrecv: each rank sends to (rank+1)%n and receives from (rank-1+n)%n.
 * MCCLCHECK(mcclLabSendRecv(sbuf, bytes, comm->ring.next, rbuf, bytes, comm->ring.prev, comm, stream));
 * @endcode
 * @param[in]  sendbuff   device bytes to send (may be NULL when sendBytes is 0).
 * @param[in]  sendBytes  bytes to send; 0 with sendPeer -1: no send.
 * @param[in]  sendPeer   the receiving rank, or -1 for no send.
 * @param[out] recvbuff   device buffer for the bytes received (may be NULL when recvBytes is 0).
 * @param[in]  recvBytes  bytes to receive.
 * @param[in]  recvPeer   the sending rank, or -1 for no receive.
 * @param[in]  comm       the communicator.
 * @param[in]  stream     the caller's stream.
 * @return mcclSuccess (a count of 0 launches nothing for that direction); mcclInvalidArgument (NULL
 *         comm, NULL buffer with bytes, peer out of range, both peers -1); mcclInvalidUsage (a peer
 *         that is not the ring's neighbour in that direction, named in the WARN; a send to self without
 *         the receive from self of the same size; an aborted communicator); errors of the launch.
 */
mcclResult_t mcclLabSendRecv(const void* sendbuff, size_t sendBytes, int sendPeer, void* recvbuff, size_t recvBytes,
                             int recvPeer, mcclLabComm* comm, cudaStream_t stream);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
