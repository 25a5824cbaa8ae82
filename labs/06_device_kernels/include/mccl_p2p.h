/**
 * @file mccl_p2p.h
 * @brief Lab 06: the P2P transport: a connection's FIFOs, head and tail in device memory (lab 01),
 * imported by the peer's device through a POSIX fd (lab 03) that the owner's proxy hands out
 * (lab 05 GetFd), so kernels on both GPUs load and store it directly (NCCL's src/transport/p2p.cc,
 * write mode, cuMem path).
 * @ingroup lab06
 */
#ifndef MCCL_P2P_H_
#define MCCL_P2P_H_

#include <stddef.h>
#include <stdint.h>
#include <cuda.h>
#include "mccl_result.h"
#include "mccl_transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup lab06
 * @{ */

/**
 * @brief One device allocation a side's proxySetup made (NCCL's ncclP2pBuff, cuMem case): the
 * sender's mcclSendMem page, or the receiver's mcclRecvMem page followed by the LL FIFO
 * (MCCL_LL_BUFFSIZE) and the SIMPLE FIFO (MCCL_BUFFSIZE).
 */
struct mcclP2pBuff {
  void* directPtr;                     /**< the owner's own device address (meaningless to other processes) */
  size_t size;                         /**< bytes of the allocation, rounded to its granularity (what the peer maps) */
  CUmemGenericAllocationHandle handle; /**< the owner's cuMem handle: the peer asks the owner's proxy for its fd */
};

/** @brief The P2P transport's connect information (NCCL's p2pConnectInfo, write mode): what setup
 *  writes into struct mcclConnect and the peer's connect reads. */
struct mcclP2pConnectInfo {
  int rank;                /**< the owner's rank (whom to ask for the fd) */
  int pid;                 /**< the owner's process: a peer in the same process exports the fd itself */
  uint64_t hostHash;       /**< the owner's host (with pid: "same process") */
  int cudaDev;             /**< the device the memory lives on */
  int pad_;                /**< keeps the layout the same on every compiler */
  struct mcclP2pBuff buff; /**< the allocation */
};

/** @brief Request the setup hook sends to proxySetup (NCCL's ncclP2pRequest, plus what to initialise). */
struct mcclP2pRequest {
  size_t size;          /**< bytes to allocate: the page, plus the LL, LL128 and SIMPLE FIFOs on the receive side */
  int llBuffSize;       /**< bytes of the FIFOs whose lines carry flags, LL then LL128 (zeroed by proxySetup,
                             right after the page); 0 on the send side */
  int pad_;             /**< keeps the layout the same on every compiler */
  uint64_t initialStep; /**< the starting head (sender page) or tail (receiver page) */
};

/// @cond INTERNAL
MCCL_STATIC_ASSERT(sizeof(struct mcclP2pConnectInfo) <= MCCL_CONNECT_SIZE, "P2P connect info must fit mcclConnect");
/// @endcond

/**
 * @brief The P2P transport (NCCL's p2pTransport): name "P2P".
 *
 * canConnect is 1 when MCCL_P2P_DISABLE is not 1, cuMem is enabled (mcclCuMemEnable: the memory is
 * exported as a POSIX fd; there is no legacy cudaIpc path), both peers have the same host hash, both
 * device ordinals exist in this process, and the two devices are the same or cudaDeviceCanAccessPeer
 * says they can map each other's memory. Device ordinals are compared as numbers: processes must see
 * the same device list (NCCL converts PCI bus ids instead; minccl's peer record carries no bus id).
 *
 * setup asks the proxy (proxyCall, on the current device: the proxy thread's in lab 05, the caller's
 * with mcclProxyCallDirect) to allocate the side's memory with mcclCuMemAlloc and initialise it
 * (head or tail = initialStep, LL FIFO zeroed); proxySetup names the handle in
 * mcclProxyConnection::exportHandle so lab 05's proxy will export it. connect imports the peer's
 * allocation on the current device with mcclIpcImport, the fd coming from the connector's getPeerFd
 * (lab 05: the owner's proxy), or, when the owner is this process, from a local
 * cuMemExportToShareableHandle. Afterwards connector->conn holds only device addresses:
 * the sender's buffs and tail point into the receiver's memory, its head into its own page; the
 * receiver's head points into the sender's page. There is no proxyProgress: kernels move the data,
 * and posting a proxy op on a P2P connector fails with mcclInvalidUsage.
 */
extern struct mcclTransport mcclP2pTransport;

/** @} */

#ifdef __cplusplus
}
#endif
#endif
