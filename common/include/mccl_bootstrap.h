/**
 * @file mccl_bootstrap.h
 * @brief The bootstrap, on one host or across hosts: a unique id, a rendezvous, peer records, tagged
 *        point-to-point messages, allgather and barrier (NCCL's src/bootstrap.cc, in spirit).
 * @ingroup common
 *
 * The application creates one mcclUniqueId (mcclGetUniqueId, on rank 0's host) and hands it to
 * every rank: with MPI_Bcast under mpirun, or by plain copy when one process runs one thread per
 * rank. Each rank then calls mcclBootstrapInit with the id, its rank and the rank count. Rank 0
 * hosts the rendezvous; every rank opens its own listeners, tells rank 0 where it listens, and
 * receives everybody's peer record (mcclPeerInfo). Afterwards any rank can mcclBootstrapSend /
 * mcclBootstrapRecv a tagged message to any other, and all ranks can mcclBootstrapAllGather and
 * mcclBootstrapBarrier.
 *
 * Every listener exists twice. An abstract Unix stream socket serves ranks of the same host (equal
 * mcclPeerInfo::hostHash); a TCP socket serves ranks of other hosts. The TCP address is that of the
 * interface MCCL_SOCKET_IFNAME selects (NCCL_SOCKET_IFNAME: name prefixes, ^ excludes, = exact;
 * unset: the first up interface other than lo, docker and virbr, else lo), IPv4 first, IPv6 when
 * the interface has no IPv4 address or MCCL_SOCKET_FAMILY=AF_INET6. The unique id carries the
 * rendezvous both ways: an abstract name and a TCP address (a free port on that interface, below
 * the kernel's ephemeral range, so that no other socket is handed it before rank 0 binds it),
 * plus the host hash of the process that made it; a rank whose host hash equals the id's uses the
 * name, any other rank the address. Peer messages pick the path the same way, so MCCL_HOSTID (or
 * mcclSetThreadHostId) posing ranks of one machine as different hosts sends their traffic over TCP;
 * mcclBootstrapGetStats counts which path each rank used. The bytes are the same on both paths.
 *
 * Every wait is bounded by MCCL_BOOTSTRAP_TIMEOUT (milliseconds; 0 waits forever, as under `make gdb`)
 * and by the optional abort flag:
 * a rank that never arrives gives mcclTimeout, a wrong secret, a duplicate rank or a rank-count
 * mismatch gives mcclInvalidUsage, a peer that died gives mcclRemoteError, an abort gives
 * mcclInternalError (as NCCL); each with a WARN
 * naming what was wrong. Sockets are closed on every path.
 *
 * Any process can connect to a listener (an abstract name accepts any uid, a TCP port any host). So
 * a listener is never read one connection at a time: every rank's listeners (and rank 0's
 * rendezvous during init) are served from one poll loop that accepts all the backlog holds and reads
 * the first message of every connection at once, each connection with its own deadline
 * (MCCL_BOOTSTRAP_ACCEPT_TIMEOUT, 1 s). A connection that stays silent past it, closes first or does
 * not carry the job's secret is closed and counted (mcclBootstrapStats::droppedConnections), and
 * costs nobody else any wait. A rank also empties its backlog before each send.
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
  uint64_t pidNsHash;                     /**< Hash of the boot id and the pid namespace (mcclGetPidNsHash): equal
                                               where `pid` names the same process, whatever MCCL_HOSTID says. */
} mcclPeerInfo;

/** @brief One rank's bootstrap state (opaque). */
typedef struct mcclBootstrap mcclBootstrap;

/** @brief Which path this rank's bootstrap traffic took (mcclBootstrapGetStats). */
typedef struct {
  int rendezvousTcp;     /**< 1: this rank reached rank 0 over TCP; 0: over the Unix socket, or it is rank 0. */
  uint64_t unixSent;     /**< Messages sent to other ranks over their Unix socket (same host). */
  uint64_t tcpSent;      /**< Messages sent to other ranks over TCP (other hosts). */
  uint64_t unixReceived; /**< Messages received from other ranks over this rank's Unix listener. */
  uint64_t tcpReceived;  /**< Messages received from other ranks over this rank's TCP listener. */
  uint64_t droppedConnections; /**< Connections this rank's listeners (rank 0: and the rendezvous) accepted and
                                    closed unread: silent past MCCL_BOOTSTRAP_ACCEPT_TIMEOUT, closed early, or
                                    not carrying the job's secret. A stranger's connections, not a peer's. */
} mcclBootstrapStats;

/**
 * @brief A unique id every rank of a communicator can compute alone from the communicator's own id (no
 * message): the id of a new communicator among some of its ranks, as ncclCommShrink needs after a rank
 * died (NCCL's shrink exchanges it through the parent's bootstrap, which a dead rank may block). The
 * new rank 0 hosts the rendezvous at the parent's TCP address and a new abstract name, with a new
 * secret; each generation gives another id.
 * @param[in]  parent        the parent communicator's id.
 * @param[in]  generation    how many ids this parent derived before (the same on every rank).
 * @param[in]  rootHostHash  the new rank 0's host (mcclPeerInfo::hostHash): it must be the parent id's host.
 * @param[out] out           the derived id.
 * @return mcclSuccess; mcclInvalidArgument (NULL, not an id); mcclInvalidUsage (rank 0 on another host).
 */
mcclResult_t mcclBootstrapDeriveId(const mcclUniqueId* parent, uint32_t generation, uint64_t rootHostHash,
                                   mcclUniqueId* out);

/**
 * @brief Make a new unique id (NCCL's ncclGetUniqueId / bootstrapGetUniqueId).
 *
 * Random bytes from getrandom() name the rendezvous socket and make the secret, so two jobs on
 * one host never meet by accident. The id also carries a TCP address on the interface
 * MCCL_SOCKET_IFNAME selects, with a port the kernel gave (bound and closed again here), and this
 * thread's mcclGetHostHash. Nothing stays open: rank 0 binds both in mcclBootstrapInit, so call
 * this on rank 0's host.
 * @param[out] out the id; written only on success.
 * @return mcclSuccess; mcclInvalidArgument if out is NULL, or MCCL_SOCKET_IFNAME / MCCL_SOCKET_FAMILY
 *         select no usable interface (named in the WARN); mcclSystemError if getrandom or a socket call fails.
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
 * @return mcclSuccess; mcclInvalidArgument (bad id, rank or count, or MCCL_SOCKET_IFNAME /
 *         MCCL_SOCKET_FAMILY selecting no usable interface; named in the WARN);
 *         mcclInvalidUsage (wrong secret, duplicate rank, rank-count mismatch, rank 0 not on the
 *         host whose address the id carries);
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
 * @brief Which path this rank's bootstrap traffic took so far: Unix socket or TCP.
 * @param[in] state from mcclBootstrapInit.
 * @param[out] out  the counts; written only on success.
 * @return mcclSuccess or mcclInvalidArgument.
 */
mcclResult_t mcclBootstrapGetStats(const mcclBootstrap* state, mcclBootstrapStats* out);

/**
 * @brief Has a watched peer's process ended? Never waits.
 *
 * mcclBootstrapInit leaves one connection open with every peer MCCL_PEER_WATCH names (by default those
 * whose pid this machine cannot look up: another machine, container or pid namespace). Nothing is sent
 * on it until mcclBootstrapClose or mcclBootstrapAbort writes one goodbye byte and closes it, so a
 * connection that ends without that byte means the peer's process ended (the kernel closed its
 * sockets); a machine that vanishes is seen by TCP keepalive after about 16 s. Safe to call from
 * several threads at once.
 * @param[in]  state from mcclBootstrapInit.
 * @param[out] peer  the lowest rank seen gone so far (it stays gone), or -1.
 * @return mcclSuccess or mcclInvalidArgument.
 */
mcclResult_t mcclBootstrapPeerGone(mcclBootstrap* state, int* peer);

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
 * Connects to the peer's listening socket (Unix on its host, TCP from another), sends a header and the bytes, closes.
 * Returns once the bytes are in the kernel's socket buffer or read by the peer, whichever comes first.
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

/**
 * @brief Where this process's pid is meaningful: a hash of /proc/sys/kernel/random/boot_id and the
 * pid namespace (/proc/self/ns/pid). Two processes with equal values can check each other with
 * kill(pid, 0); MCCL_HOSTID and mcclSetThreadHostId do not change it (posed hosts share one machine),
 * while other machines and containers with their own pid namespace differ.
 * @return the hash; 0 when neither file can be read (then no pid is compared).
 */
uint64_t mcclGetPidNsHash(void);

/**
 * @brief Whether the process `pid` of this pid namespace (see mcclGetPidNsHash) has ended: no such
 * process (kill(pid, 0) fails with ESRCH), or a zombie, one that has exited but that its parent has
 * not reaped yet ('Z' or 'X' in /proc/PID/stat). kill(pid, 0) alone succeeds on a zombie, and a
 * launcher that waits for its children in order may never reap it while the job runs.
 * @param[in] pid a process id; 0 or less is never gone.
 * @return 1 if gone, 0 if it runs (or cannot be judged: EPERM, /proc unreadable).
 */
int mcclProcessGone(int pid);

/**
 * @brief Pose the calling thread as its own host: mcclGetHostHash on this thread hashes hostId
 * instead of MCCL_HOSTID or the host name (a per-thread MCCL_HOSTID).
 *
 * For one process that runs one thread per rank and wants its ranks on different "hosts", as
 * mpirun ranks do with different MCCL_HOSTID values; the bootstrap's own tests use it to send
 * traffic over TCP. It only changes what this thread's later calls (mcclGetUniqueId,
 * mcclBootstrapInit) record; code that compares host hashes reads them from the peer records.
 * @param[in] hostId the identity, shorter than 256 bytes; NULL or "" restores the default.
 * @return mcclSuccess or mcclInvalidArgument (too long).
 */
mcclResult_t mcclSetThreadHostId(const char* hostId);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
