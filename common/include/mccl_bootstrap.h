/**
 * @file mccl_bootstrap.h
 * @brief Single-host bootstrap: a unique id, a Unix-socket rendezvous, peer records, tagged
 *        point-to-point messages, allgather and barrier (NCCL's src/bootstrap.cc, in spirit).
 * @ingroup common
 *
 * The application creates one mcclUniqueId (mcclGetUniqueId) and hands it to every rank: with
 * MPI_Bcast under mpirun, or by plain copy when one process runs one thread per rank. Each rank
 * then calls mcclBootstrapInit with the id, its rank and the rank count. Rank 0 hosts the
 * rendezvous (an abstract Unix stream socket named in the id); every rank opens its own listening
 * socket, tells rank 0 where it listens, and receives everybody's peer record (mcclPeerInfo).
 * Afterwards any rank can mcclBootstrapSend / mcclBootstrapRecv a tagged message to any other,
 * and all ranks can mcclBootstrapAllGather and mcclBootstrapBarrier.
 *
 * Every wait is bounded by MCCL_BOOTSTRAP_TIMEOUT (milliseconds; 0 waits forever, as under `make gdb`)
 * and by the optional abort flag:
 * a rank that never arrives gives mcclTimeout, a wrong secret, a duplicate rank or a rank-count
 * mismatch gives mcclInvalidUsage, a peer that died gives mcclRemoteError, an abort gives
 * mcclInternalError (as NCCL); each with a WARN
 * naming what was wrong. Sockets are closed on every path.
 *
 * @code
 * mcclUniqueId id;
 * if (rank == 0) mcclGetUniqueId(&id);
 * MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
 * mcclBootstrap* bs;
 * MCCLCHECK(mcclBootstrapInit(&id, rank, nranks, cudaDev, myProxyAddr, NULL, &bs));
 * mcclPeerInfo peer;
 * MCCLCHECK(mcclBootstrapGetPeerInfo(bs, (rank + 1) % nranks, &peer));
 * MCCLCHECK(mcclBootstrapBarrier(bs));
 * MCCLCHECK(mcclBootstrapClose(bs));
 * @endcode
 */
#ifndef MCCL_BOOTSTRAP_H_
#define MCCL_BOOTSTRAP_H_

#include <stddef.h>
#include <stdint.h>
#include "mccl_result.h"
#include "mccl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup common
 * @{ */

/** @brief Bytes of an abstract socket name carried in a peer record (including the NUL). */
#define MCCL_SOCKET_NAME_LEN 64

/** @brief One rank's fixed-size record, allgathered by mcclBootstrapInit. */
typedef struct {
  int rank;                               /**< The rank this record describes. */
  int pid;                                /**< Its process id. */
  int cudaDev;                            /**< The CUDA device it drives (caller's value). */
  int pad_;                               /**< Keeps the layout the same on every compiler. */
  uint64_t hostHash;                      /**< Hash of the host name and boot id: equal on one host. */
  uint64_t shmDev;                        /**< st_dev of /dev/shm: equal when /dev/shm is shared. */
  char proxyAddr[MCCL_SOCKET_NAME_LEN];   /**< Abstract name its proxy listens on ("" if none). */
} mcclPeerInfo;

/** @brief One rank's bootstrap state (opaque). */
typedef struct mcclBootstrap mcclBootstrap;

/**
 * @brief Make a new unique id (NCCL's ncclGetUniqueId / bootstrapGetUniqueId).
 *
 * Random bytes from getrandom() name the rendezvous socket and make the secret, so two jobs on
 * one host never meet by accident. Nothing is opened: rank 0 binds the name in mcclBootstrapInit.
 * @param[out] out the id; written only on success.
 * @return mcclSuccess; mcclInvalidArgument if out is NULL; mcclSystemError if getrandom fails.
 */
mcclResult_t mcclGetUniqueId(mcclUniqueId* out);

/**
 * @brief Meet the other ranks and exchange peer records (NCCL's bootstrapInit).
 *
 * Blocks until all nranks ranks have arrived, the timeout passes or *abortFlag becomes non-zero.
 * @param[in] id        the id from mcclGetUniqueId, the same bytes on every rank.
 * @param[in] rank      this rank, 0 <= rank < nranks.
 * @param[in] nranks    number of ranks, >= 1.
 * @param[in] cudaDev   device this rank drives, recorded in its mcclPeerInfo.
 * @param[in] proxyAddr abstract socket name of this rank's proxy, or NULL.
 * @param[in] abortFlag optional flag polled during every wait; non-zero aborts (mcclInternalError, as NCCL).
 * @param[out] out      the new state; written only on success.
 * @return mcclSuccess; mcclInvalidArgument (bad id, rank or count; named in the WARN);
 *         mcclInvalidUsage (wrong secret, duplicate rank, rank-count mismatch);
 *         mcclTimeout (a rank never arrived); mcclRemoteError (a peer died); mcclInternalError (aborted);
 *         mcclSystemError.
 */
mcclResult_t mcclBootstrapInit(const mcclUniqueId* id, int rank, int nranks, int cudaDev, const char* proxyAddr,
                               volatile uint32_t* abortFlag, mcclBootstrap** out);

/** @brief This state's rank. @param[in] state from mcclBootstrapInit. @return the rank, -1 if state is NULL. */
int mcclBootstrapRank(const mcclBootstrap* state);
/** @brief The rank count. @param[in] state from mcclBootstrapInit. @return nranks, -1 if state is NULL. */
int mcclBootstrapNRanks(const mcclBootstrap* state);

/**
 * @brief A peer's record as gathered at init.
 * @param[in] state from mcclBootstrapInit.
 * @param[in] peer  0 <= peer < nranks.
 * @param[out] out  the record; written only on success.
 * @return mcclSuccess or mcclInvalidArgument.
 */
mcclResult_t mcclBootstrapGetPeerInfo(const mcclBootstrap* state, int peer, mcclPeerInfo* out);

/**
 * @brief Send size bytes to peer under tag (NCCL's bootstrapSend).
 *
 * Connects to the peer's listening socket, sends a header and the bytes, closes. Returns once
 * the bytes are in the kernel's socket buffer or read by the peer, whichever comes first.
 * @param[in] state from mcclBootstrapInit.
 * @param[in] peer  destination rank (may be this rank).
 * @param[in] tag   any int; the receiver matches (peer, tag).
 * @param[in] data  size bytes (may be NULL when size is 0).
 * @param[in] size  byte count; the receiver must ask for the same.
 * @return mcclSuccess; mcclInvalidArgument; mcclRemoteError (peer gone); mcclTimeout.
 */
mcclResult_t mcclBootstrapSend(mcclBootstrap* state, int peer, int tag, const void* data, size_t size);

/**
 * @brief Receive the message peer sent under tag (NCCL's bootstrapRecv).
 *
 * Messages from other (peer, tag) pairs that arrive meanwhile are kept for later Recv calls.
 * @param[in] state from mcclBootstrapInit.
 * @param[in] peer  source rank.
 * @param[in] tag   the sender's tag.
 * @param[out] data size bytes; written only on success.
 * @param[in] size  byte count; a different size from the sender is mcclInvalidUsage.
 * @return mcclSuccess; mcclInvalidArgument; mcclInvalidUsage; mcclRemoteError; mcclTimeout.
 */
mcclResult_t mcclBootstrapRecv(mcclBootstrap* state, int peer, int tag, void* data, size_t size);

/**
 * @brief Ring allgather (NCCL's bootstrapAllGather): slot r of allData comes from rank r.
 * @param[in] state       from mcclBootstrapInit.
 * @param[in,out] allData nranks * size bytes; this rank's slot is read, the others written.
 * @param[in] size        bytes per rank, > 0.
 * @return mcclSuccess or the first error of the underlying Send/Recv.
 */
mcclResult_t mcclBootstrapAllGather(mcclBootstrap* state, void* allData, size_t size);

/**
 * @brief Wait until every rank has called it (dissemination barrier, NCCL's bootstrapBarrier).
 * @param[in] state from mcclBootstrapInit.
 * @return mcclSuccess or the first error of the underlying Send/Recv.
 */
mcclResult_t mcclBootstrapBarrier(mcclBootstrap* state);

/**
 * @brief Close every socket and free the state (NCCL's bootstrapClose). Warns about unread messages.
 * @param[in] state from mcclBootstrapInit, or NULL (no-op).
 * @return mcclSuccess.
 */
mcclResult_t mcclBootstrapClose(mcclBootstrap* state);

/**
 * @brief Close and free without any further exchange, e.g. after a peer failed (NCCL's bootstrapAbort).
 * @param[in] state from mcclBootstrapInit, or NULL (no-op).
 * @return mcclSuccess.
 */
mcclResult_t mcclBootstrapAbort(mcclBootstrap* state);

/**
 * @brief This host's hash (host name and /proc/sys/kernel/random/boot_id), as NCCL's getHostHash;
 * MCCL_HOSTID, when set, is hashed instead (NCCL_HOSTID), so one machine can pose as several hosts.
 * @return the hash; the same for every process of one host boot (and MCCL_HOSTID).
 */
uint64_t mcclGetHostHash(void);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
