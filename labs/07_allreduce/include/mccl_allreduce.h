/**
 * @file mccl_allreduce.h
 * @brief Lab 07: a communicator for the lab (ranks, bootstrap, proxy, ring channels, symmetric
 * windows) and the allreduce entry point.
 * @ingroup lab07
 */
#ifndef MCCL_ALLREDUCE_H_
#define MCCL_ALLREDUCE_H_

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>
#include "mccl_bootstrap.h"
#include "mccl_channel.h"
#include "mccl_dev_work.h"
#include "mccl_enqueue.h"
#include "mccl_prims.h"
#include "mccl_proxy.h"
#include "mccl_result.h"
#include "mccl_transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup lab07 Lab 07: allreduce and the enqueue layer
 * @brief A communicator, the enqueue layer that turns calls into tasks and a group's tasks into plans of
 * one launch each, and the kernels: a ring allreduce over lab 06's P2P and SHM connections, one-shot /
 * two-shot allreduce on symmetric windows, NCCL's other collectives and point-to-point (NCCL 2.28.9
 * src/init.cc, src/graph/rings.cc, src/transport.cc, src/enqueue.cc, src/group.cc, src/graph/tuning.cc,
 * src/device/all_reduce.h and the other collectives' headers, src/device/symmetric/).
 *
 * @code
 * mcclUniqueId id; if (rank == 0) mcclGetUniqueId(&id); MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
 * mcclLabComm* comm;
 * MCCLCHECK(mcclLabCommInit(&comm, nranks, &id, rank, dev, 0, mcclLocalTransports));  // ring, channels, signal area
 * void* buf; MCCLCHECK(mcclMemAlloc(&buf, bytes));
 * mcclLabWindow* win;
 * MCCLCHECK(mcclLabWindowRegister(comm, buf, bytes, &win));        // collective
 * MCCLCHECK(mcclLabAllReduce(buf, buf, count, mcclFloat32, mcclSum, comm, stream));
 * MCCLCHECK(mcclLabWindowDeregister(comm, win));
 * MCCLCHECK(mcclLabCommDestroy(comm));
 * @endcode
 * @{
 */

/** @brief The ring of one channel (NCCL's ncclRing): neighbours and the order of all ranks. */
struct mcclLabRing {
  int prev;       /**< rank this rank receives from */
  int next;       /**< rank this rank sends to */
  int index;      /**< this rank's position: userRanks[index] == rank */
  int* userRanks; /**< [nRanks] ranks in ring order, starting from ring position 0 */
};

/** @brief A buffer every rank registered, mapped from every rank of this host (NCCL's ncclWindow, symmetric). */
typedef struct mcclLabWindow {
  void* buff;                 /**< this rank's buffer (from mcclMemAlloc; the start of its allocation) */
  size_t size;                /**< bytes registered (the same on every rank) */
  void** peerPtrs;            /**< [nRanks] host array: each rank's buffer as mapped here (peerPtrs[rank] == buff);
                                   NULL for a rank on another host (lab 08), whose memory cannot be mapped */
  char** devPeerPtrs;         /**< [nRanks] device array of the same, for kernels */
  struct mcclLabWindow* next; /**< the communicator's list */
} mcclLabWindow;

struct mcclLabUserOp;
struct mcclLabComm;

/** @brief A collective the copy engines run, as the enqueue layer hands it to them (NCCL's ncclCeCollArgs). */
struct mcclLabCeCollArgs {
  int func;               /**< enum mcclFunc: AllGather, AlltoAll, Gather, Scatter, Broadcast or AllReduce */
  int root;               /**< Gather, Scatter, Broadcast: the root */
  size_t nElts;           /**< elements per rank pair (the call's count) */
  size_t eltSize;         /**< bytes per element */
  const void* sendBuff;   /**< this rank's input */
  void* recvBuff;         /**< this rank's output */
  mcclLabWindow* sendWin; /**< the window holding sendBuff, or NULL (the engines read it where it is) */
  mcclLabWindow* recvWin; /**< the window holding recvBuff: the engines write the peers' copies of it */
  int dtype;              /**< AllReduce: mcclDataType_t */
  int redOp;              /**< AllReduce: enum mcclDevRedOp */
  uint64_t redOpArg;      /**< AllReduce: the operation's argument (an immediate: every rank's is the same) */
};

/** @brief The copy-engine collectives (lab 10 defines them, as mcclCeOps; the layer that creates a communicator
 * gives them to it, as it gives the transport table). */
struct mcclLabCeOps {
  const char* name;                        /**< for the log */
  int (*implemented)(int func, int dtype); /**< whether the engines serve the function (NCCL's ncclCeImplemented) */
  /** Queue the collective on the stream: synchronisations and copies, no kernel, no host wait (NCCL's
   *  ncclLaunchCeColl). */
  mcclResult_t (*launch)(struct mcclLabComm* comm, const struct mcclLabCeCollArgs* args, cudaStream_t stream);
  /** After an abort: let every wait the communicator's streams still have pass (they cannot read the abort
   *  flag as kernels do), so that teardown never waits for a peer that will not come. */
  void (*release)(struct mcclLabComm* comm);
};

/** @brief A communicator's copy-engine state (NCCL's struct ncclCeColl): the flags are in the signal area. */
struct mcclLabCeColl {
  const struct mcclLabCeOps* ops; /**< lab 10's mcclCeOps, or NULL: CTA policy ZERO runs kernels */
  uint32_t seq;                   /**< the last value a memory-op sync wrote (NCCL's ceSeqNum) */
  int useComplete;     /**< which flags the next sync uses: 1 ceComplete, 0 ceReady (NCCL's useCompletePtr) */
  uint64_t arSeq;      /**< the assisted allreduce: rounds so far (its flags' values) */
  cudaStream_t stream;   /**< the assisted allreduce: the reduce-scatter copies' stream (or NULL) */
  cudaStream_t agStream; /**< the assisted allreduce: the all-gather copies' stream, beside the other (or NULL) */
  cudaEvent_t fork;      /**< the assisted allreduce: the event that forks both from the caller's stream */
  cudaEvent_t agDone;    /**< the assisted allreduce: the event that joins the all-gather stream to the other */
  cudaEvent_t rsRound;   /**< the assisted allreduce: recorded after each round's reduce-scatter copies, which that
                              round's all-gather copies wait for */
  cudaEvent_t join;      /**< the assisted allreduce: the event that joins them back to the caller's */
};

/** @brief Launches of one communicator told apart in flight (the ring of struct mcclLabLaunches). */
#define MCCL_LAUNCH_RING 1024

/** @brief The communicator's own launches (src/launches.c): numbered, and a ring of events, each recorded after
 * its launch, that say when it has ended. */
struct mcclLabLaunches {
  uint64_t last;         /**< the last number given (launches captured into a CUDA graph take none) */
  cudaEvent_t* events;   /**< [MCCL_LAUNCH_RING]: the event recorded after the slot's last launch (created at the
                              slot's first launch; NULL before it) */
  uint64_t* eventLaunch; /**< [MCCL_LAUNCH_RING]: the launch whose end the slot's event marks (0: none), in the
                              high bits, and the watchdog's tag of its group's first call in the low ones */
  uint64_t* failed;      /**< [MCCL_LAUNCH_RING]: a numbered launch that was never made, so ended at once */
};

/** @brief A communicator for the lab: what lab 07's kernels and host code need (NCCL's ncclComm, in small). */
typedef struct mcclLabComm {
  int rank;                          /**< this rank */
  int nRanks;                        /**< ranks */
  int cudaDev;                       /**< this rank's device */
  mcclBootstrap* bootstrap;          /**< lab common: peer records, tagged messages */
  mcclProxyState* proxy;             /**< lab 05: setup RPCs, fds of this rank's memory */
  mcclPeerInfo* peerInfo;            /**< [nRanks] every rank's record */
  struct mcclTransportCtx ctx;       /**< the transports' view: buffSizes, channels (ctx.channels[c].peers/devPeers),
                                          the transport table (ctx.transports) */
  int nChannels;                     /**< ring channels (== ctx.nChannels) */
  struct mcclLabRing ring;           /**< the ring every channel follows */
  int transport[MCCL_MAX_CHANNELS];  /**< per channel: TRANSPORT_P2P, TRANSPORT_SHM or TRANSPORT_NET of the send
                                        connection */
  int simpleOnly;                    /**< 1 on every rank when some rank's NET edge (lab 08) cannot carry LL steps
                                        (its LL slot is larger than its SIMPLE slot): SIMPLE only */
  int multiHost;                     /**< 1: the ranks span several hosts (lab 08's NET edges): LL only up to
                                        MCCL_NET_LL_MAX bytes */
  int ll128Ok;                       /**< 1 on every rank when every rank's ring connections carry an LL128 FIFO
                                        (all P2P over NVLink): the rings may run LL128 */
  int noLl128Rank;                   /**< where ll128Ok is 0: the first rank with a ring edge that has none */
  int noLl128Transport;              /**< and that edge's TRANSPORT_SHM, TRANSPORT_NET, or TRANSPORT_P2P (over
                                        PCIe: no NVLink) */
  struct mcclConnInfo* devRecvConns; /**< [nChannels] device: recv from ring.prev, channel c at [c] */
  struct mcclConnInfo* devSendConns; /**< [nChannels] device: send to ring.next, channel c at [c] */
  volatile uint32_t* abortFlag;      /**< host view of the host-mapped abort flag */
  uint32_t* abortFlagDev;            /**< device view of it, for kernels */
  mcclLabWindow* signalWin;          /**< every rank's signal area (MCCL_SIGNAL_BYTES), mapped here; NULL
                                          beyond MCCL_SYM_MAX_RANKS ranks or without cuMem (ring only) */
  uint64_t* seqCounters;             /**< [MCCL_SIGNAL_MAX_BLOCKS] device: symmetric calls so far (kernels keep them) */
  mcclLabWindow* windows;            /**< registered windows */
  struct mcclKernelComm* devComm;    /**< device: the kernels' view of the communicator (ranks, ring, channels) */
  volatile uint32_t* status;         /**< host view of a host-mapped word where a kernel that aborted writes
                                          mcclDevStatusAborted (enum mcclDevStatus; 0 until then) */
  uint32_t* statusDev;               /**< device view of it, for kernels */
  int nP2pChannels;                  /**< point-to-point channels: the channels rounded down to a power of two */
  struct mcclLabPlanner planner;     /**< tasks of this thread's open group (mccl_enqueue.h) */
  uint64_t nLaunches;                /**< kernel launches so far (a test reads it: a group of K calls is one) */
  int lastBlocks;                    /**< blocks of the last kernel launch (a test reads it) */
  int lastKernel;                    /**< enum mcclLabKernel of the last kernel launch (a test reads it) */
  int64_t threadThresholds[3];       /**< per protocol (MCCL_PROTO_*): ring bytes per thread below which a call
                                          gives up channels (MCCL_THREAD_THRESHOLDS; 0: every channel) */
  struct mcclLabLaunches launches;   /**< which of them have ended (teardown and the watchdog wait on it) */
  struct mcclLabUserOp* userOps;     /**< operations created by mcclLabRedOpCreatePreMulSum, a list */
  int ctaPolicy;                     /**< MCCL_CTA_POLICY_*: MCCL_CTA_POLICY when set, else the default (a layer above
                                          sets it from its config) */
  struct mcclLabCeColl ceColl;       /**< the copy-engine collectives, used with MCCL_CTA_POLICY_ZERO */
  struct mcclLabWatchdog* watchdog;  /**< the record of this rank's collectives and the thread that watches them
                                          (src/watchdog.c); NULL with MCCL_WATCHDOG_TIMEOUT=0 or one rank */
  int watchdogResult;                /**< mcclResult_t: mcclSuccess until the watchdog reports (atomic) */
} mcclLabComm;

/**
 * @brief Create this rank's communicator (one process per rank, e.g. under mpirun; NCCL's
 * ncclCommInitRank): proxy, bootstrap, peer records, the ring (ranks ordered by host, device, rank),
 * nChannels channels each connected send -> next and recv <- prev by lab 06's mcclTransportP2pSetup
 * (the first of the table's transports that can connect the pair: P2P, else SHM, else NET where the
 * table has it; MCCL_P2P_DISABLE=1 forces SHM), device arrays of the per-channel connections, a
 * host-mapped abort flag and a signal area mapped by every rank. Collective over the nranks ranks.
 * @param[out] comm       the communicator; written only on success.
 * @param[in]  nranks     1 .. MCCL_LAB_MAX_RANKS.
 * @param[in]  id         from mcclGetUniqueId on one rank, the same on all.
 * @param[in]  rank       0 .. nranks-1.
 * @param[in]  cudaDev    this rank's device.
 * @param[in]  nChannels  1 .. MCCL_SIGNAL_MAX_BLOCKS, or 0 for MCCL_NCHANNELS (unset: 64 on cuda, 2 on the
 *                        sim, MCCL_LAB_MULTIHOST_NCHANNELS when the ranks span several hosts).
 * @param[in]  transports the transport table the communicator and its proxy connect with (mcclTransportIndex
 *                        says what one is): lab 06's mcclLocalTransports (P2P, SHM) in a program that has no
 *                        NET, lab 08's mcclTransports in one that does (final/). It must outlive the
 *                        communicator. Every rank passes the same table.
 * @return mcclSuccess; mcclInvalidArgument (named); errors of the layers below. Nothing is left on failure.
 */
mcclResult_t mcclLabCommInit(mcclLabComm** comm, int nranks, const mcclUniqueId* id, int rank, int cudaDev,
                             int nChannels, struct mcclTransport* const* transports);

/**
 * @brief The ring every channel of a communicator follows (NCCL's rings.cc, without a topology search): the
 * ranks ordered by host, then device, then rank, so that the ranks of one host are neighbours and one process
 * driving several devices meets them in device order; this rank's position and neighbours in it.
 * mcclLabCommInitRank builds its ring with it, from the peer records.
 * @param[in]  peerInfo every rank's record, in rank order (hostHash, cudaDev and rank are read).
 * @param[in]  nRanks   1 .. MCCL_LAB_MAX_RANKS.
 * @param[in]  rank     this rank, 0 .. nRanks-1.
 * @param[out] ring     prev, next, index and userRanks, an array of nRanks the caller frees; written only on
 *                      success.
 * @return mcclSuccess; mcclInvalidArgument (named); mcclSystemError.
 */
mcclResult_t mcclLabRingBuild(const mcclPeerInfo* peerInfo, int nRanks, int rank, struct mcclLabRing* ring);

/**
 * @brief The first half of mcclLabCommInit, which never waits (NCCL's commAlloc): the communicator's
 * memory, its abort flag and status word. A caller that must be able to abort an initialisation from
 * another thread (a non-blocking one, or one run at a group's end) allocates first, so that
 * mcclLabCommAbort has a flag to raise, then runs mcclLabCommInitRank.
 * @param[out] comm        the communicator; written only on success.
 * @param[in]  nranks      1 .. MCCL_LAB_MAX_RANKS.
 * @param[in]  rank        0 .. nranks-1.
 * @param[in]  cudaDev     this rank's device.
 * @param[in]  transports  as mcclLabCommInit.
 * @return mcclSuccess; mcclInvalidArgument (named); mcclSystemError; CUDA errors.
 */
mcclResult_t mcclLabCommAlloc(mcclLabComm** comm, int nranks, int rank, int cudaDev,
                              struct mcclTransport* const* transports);

/**
 * @brief The CTA policy a communicator runs with (NCCL's config.CTAPolicy and NCCL_CTA_POLICY): MCCL_CTA_POLICY
 * when it is set, which overrides the configured one (with an INFO line, as NCCL), else `configured`. A value of
 * MCCL_CTA_POLICY that is no policy gives the default (INFO). mcclLabCommAlloc sets comm->ctaPolicy from it.
 * @param[in] rank        for the log.
 * @param[in] configured  MCCL_CTA_POLICY_DEFAULT, _EFFICIENCY or _ZERO (the caller checked it).
 * @return the policy.
 */
int mcclLabCtaPolicy(int rank, int configured);

/**
 * @brief The second half of mcclLabCommInit (NCCL's initTransportsRank): proxy, bootstrap, ring, channels,
 * signal area. It waits for the other ranks, and ends with an error at once when the communicator's abort
 * flag is raised (mcclLabCommAbort, from any thread). On failure the communicator is left for
 * mcclLabCommDestroy.
 * @param[in,out] comm       from mcclLabCommAlloc, not initialised yet.
 * @param[in]     id         the unique id every rank passes.
 * @param[in]     nChannels  as mcclLabCommInit.
 * @return as mcclLabCommInit.
 */
mcclResult_t mcclLabCommInitRank(mcclLabComm* comm, const mcclUniqueId* id, int nChannels);

/**
 * @brief One process driving ndev devices (NCCL's ncclCommInitAll): one communicator per device,
 * rank i on devlist[i], the ring in device order. Runs the ndev initialisations on threads.
 * @param[out] comms      ndev communicators; written only if every one succeeded.
 * @param[in]  ndev       1 .. MCCL_LAB_MAX_RANKS.
 * @param[in]  devlist    ndev device ordinals, or NULL for 0 .. ndev-1.
 * @param[in]  nChannels  as mcclLabCommInit.
 * @param[in]  transports as mcclLabCommInit.
 * @return mcclSuccess; mcclInvalidArgument; the first error of an initialisation (all are undone).
 */
mcclResult_t mcclLabCommInitAll(mcclLabComm** comms, int ndev, const int* devlist, int nChannels,
                                struct mcclTransport* const* transports);

/**
 * @brief Raise the abort flag: kernels polling it and waits in the proxy and bootstrap end with an
 * error. mcclLabCommDestroy must still be called (and frees everything).
 * @param[in] comm  the communicator.
 * @return mcclSuccess; mcclInvalidArgument (NULL).
 */
mcclResult_t mcclLabCommAbort(mcclLabComm* comm);

/**
 * @brief Wait until every kernel the communicator launched outside a CUDA graph capture has ended, and
 * nothing else: other work on the device (the application's streams) is not waited for. NCCL's
 * commDestroySync waits on the communicator's own streams; minccl's kernels run on the caller's streams,
 * so it reads the ring their last blocks write (struct mcclLabLaunches). After mcclLabCommAbort the kernels
 * see the flag and end within a few spins. Graph replays are not waited for (as in NCCL, a graph that uses
 * the communicator must not run past its destruction).
 * @param[in] comm  the communicator.
 * @return mcclSuccess; mcclInvalidArgument (NULL); mcclUnhandledCudaError (the device failed meanwhile).
 */
mcclResult_t mcclLabCommWaitLaunches(mcclLabComm* comm);

/**
 * @brief Free everything the communicator owns: windows still registered, channels and their
 * connections, the signal area, the device arrays, the proxy (threads, sockets), the bootstrap and
 * the abort flag. Not collective (peers keep their own mappings); it first waits for the communicator's
 * kernels to end (mcclLabCommWaitLaunches). After mcclLabCommAbort the bootstrap is closed without any exchange.
 * @param[in] comm  the communicator, or NULL (a no-op).
 * @return mcclSuccess, or the first error (everything is still freed).
 */
mcclResult_t mcclLabCommDestroy(mcclLabComm* comm);

/**
 * @brief What the communicator's watchdog found (MCCL_WATCHDOG_TIMEOUT): when the oldest collective this
 * rank launched has not completed for that long, or a peer's watchdog said so, it compares every same-host
 * rank's record of that call (function, count, type, operation, root), logs one WARN line that names the
 * difference or the rank that has not made the call, and keeps the result here. Collectives launched into
 * a CUDA graph capture are not watched (the host cannot see a replay end).
 * @param[in]  comm    the communicator.
 * @param[out] report  if non-NULL: the line logged, or NULL while nothing was reported.
 * @return mcclSuccess (nothing reported, or no watchdog); mcclInvalidUsage (the ranks' calls differ:
 *         function, count, type, operation or root); mcclRemoteError (a rank has not made the call, or the
 *         calls agree and still have not completed).
 */
mcclResult_t mcclLabWatchdogResult(const mcclLabComm* comm, const char** report);

/**
 * @brief Register a buffer as a symmetric window (NCCL's ncclCommWindowRegister with
 * NCCL_WIN_COLL_SYMMETRIC): collective; every rank passes a buffer of the same size, from lab 01's
 * mcclMemAlloc (the start of its allocation). Each rank maps every peer's buffer (lab 03 import of an
 * fd the peer's proxy hands out), so kernels load and store peers' buffers directly.
 * @param[in]  comm  the communicator.
 * @param[in]  buff  this rank's buffer.
 * @param[in]  size  bytes (> 0, at most the allocation's size), equal on every rank.
 * @param[out] win   the window; written only on success.
 * A rank that cannot offer its buffer (NULL, size 0, not a VMM allocation's start, a NULL win) still takes
 * part in the exchange with size 0, so every rank fails at once and no rank is left one exchange behind.
 * @return mcclSuccess; mcclInvalidArgument (NULL, size 0, not the start of a VMM allocation, larger
 *         than it, sizes that differ between ranks); errors of the proxy, lab 03 and the bootstrap.
 */
mcclResult_t mcclLabWindowRegister(mcclLabComm* comm, void* buff, size_t size, mcclLabWindow** win);

/**
 * @brief Unmap every peer's buffer as mapped here and free the window, once the communicator's kernels
 * have ended (mcclLabCommWaitLaunches). Not collective: peers keep their own mappings (the driver frees
 * the memory with its last mapping); this rank's buffer stays the caller's (mcclMemFree).
 * @param[in] comm  the communicator.
 * @param[in] win   from mcclLabWindowRegister, or NULL (a no-op).
 * @return mcclSuccess; mcclInvalidArgument (not a window of this communicator); the first error met.
 */
mcclResult_t mcclLabWindowDeregister(mcclLabComm* comm, mcclLabWindow* win);

/**
 * @brief The window holding [ptr, ptr + bytes), if any.
 * @param[in]  comm    the communicator.
 * @param[in]  ptr     a device address.
 * @param[in]  bytes   length.
 * @param[out] win     the window or NULL.
 * @param[out] offset  ptr's offset in it (0 if none).
 * @return mcclSuccess; mcclInvalidArgument (NULL comm or outputs).
 */
mcclResult_t mcclLabWindowFind(const mcclLabComm* comm, const void* ptr, size_t bytes, mcclLabWindow** win,
                               size_t* offset);

/**
 * @brief Whether one-shot can run an AllReduce launch of `bytes` with protocol `proto` (its scratch in the
 * signal area): LL up to MCCL_ONESHOT_MAX_BYTES, SIMPLE on 2 ranks up to MCCL_ONESHOT_SIMPLE_MAX_BYTES; one
 * rank any size (a copy). A group's one-shot works share one launch while their bytes together fit. The
 * signal area itself is the caller's to check.
 * @param[in] nRanks  ranks.
 * @param[in] bytes   bytes per rank.
 * @param[in] proto   MCCL_PROTO_LL or MCCL_PROTO_SIMPLE.
 * @return 1 if it can, else 0.
 */
int mcclLabOneShotFits(int nRanks, size_t bytes, int proto);

/**
 * @brief The algorithm and protocol of a collective (NCCL's tuning: one table by rank count and size,
 * tuning.def, then the MCCL_ALGO / MCCL_PROTO overrides). AllReduce: one-shot needs the communicator's
 * signal area (at most MCCL_SYM_MAX_RANKS ranks, cuMem on) and at most MCCL_ONESHOT_MAX_BYTES with LL, or
 * MCCL_ONESHOT_SIMPLE_MAX_BYTES with SIMPLE on 2 ranks (its protocol: LL up to the table's one-shot size,
 * SIMPLE above); two-shot also needs both buffers in windows and an operation every rank applies alike (a PreMulSum
 * operation of mcclLabRedOpCreatePreMulSum is not: its scalar is each rank's own). Without them the table falls back to
 * the ring, and a forced MCCL_ALGO is refused; a table's one-shot whose protocol MCCL_PROTO makes impossible gives way
 * to the ring. The other collectives run the ring (MCCL_ALGO is the allreduce's); their protocol is their function's
 * MCCL_TUNE_COLL row for the rank count: LL up to its LL cut-over (bytes of the larger buffer), LL128 up to its LL128
 * cut-over, SIMPLE above.
 * @param[in]  func       enum mcclFunc: Broadcast .. AllReduce.
 * @param[in]  nRanks     ranks.
 * @param[in]  bytes      AllReduce: bytes per rank; the others: bytes of the larger buffer.
 * @param[in]  symmetric  0: no signal area; 1: a signal area; 2: and sendbuff and recvbuff in windows; 3: and the
 *                        copy-engine allreduce can run too (lab 10's ops, out of place, not in a graph capture):
 *                        MCCL_ALGO=ce, or the table from its MCCL_TUNE_CE_AR_MIN row's bytes.
 * @param[out] algo       enum mcclAlgo.
 * @param[out] proto      MCCL_PROTO_SIMPLE or MCCL_PROTO_LL.
 * @return mcclSuccess; mcclInvalidArgument (bad MCCL_ALGO / MCCL_PROTO value, func or symmetric out of
 *         range, or a symmetric algorithm forced where it cannot run).
 */
mcclResult_t mcclLabSelectAlgorithm(int func, int nRanks, size_t bytes, int symmetric, int* algo, int* proto);

/**
 * @brief The ring's protocol for buffers that do not start on a 16-byte boundary (or an AllGather's or
 * ReduceScatter's per-rank bytes that are not a multiple of 16): the table's LL128 becomes LL up to twice the
 * function's LL cut-over and SIMPLE above it; any other protocol is kept. The enqueue layer asks it for a ring
 * whose protocol no MCCL_PROTO forced.
 * @param[in] func    enum mcclFunc (a collective).
 * @param[in] nRanks  ranks.
 * @param[in] bytes   as mcclLabSelectAlgorithm's.
 * @param[in] proto   the table's protocol for those bytes.
 * @return MCCL_PROTO_SIMPLE, MCCL_PROTO_LL or MCCL_PROTO_LL128.
 */
int mcclLabMisalignedProto(int func, int nRanks, size_t bytes, int proto);

/**
 * @brief The tuning model's estimate of one task's time (what mcclLabGroupSimulateEnd adds up): the
 * latency and bus bandwidth of its algorithm and protocol at this rank count (tuning.def), the bytes
 * counted as nccl-tests counts busbw.
 * @param[in] func     enum mcclFunc (Send and Recv: point-to-point).
 * @param[in] algo     enum mcclAlgo.
 * @param[in] proto    MCCL_PROTO_SIMPLE or MCCL_PROTO_LL.
 * @param[in] nRanks   ranks.
 * @param[in] bytes    AllReduce, Broadcast, Reduce, Send, Recv: their bytes; AllGather and ReduceScatter:
 *                     the larger buffer's.
 * @return microseconds (0 for one rank or no bytes).
 */
double mcclLabEstimateTime(int func, int algo, int proto, int nRanks, size_t bytes);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
