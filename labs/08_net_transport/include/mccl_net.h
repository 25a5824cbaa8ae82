/**
 * @file mccl_net.h
 * @brief Lab 08: the network plugin interface (NCCL's ncclNet_t), its loader, and the NET transport
 * that moves a connection's FIFO slots between hosts through it, driven by the proxy's progress thread.
 * @ingroup lab08
 *
 * Mirrors NCCL 2.28.9 src/include/plugin/net/net_v*.h (the ncclNet_t shape), src/plugin/net.cc
 * (ncclNetPluginLoad: dlopen of a separate shared object) and src/transport/net.cc (the NET
 * transport's setup, connect and proxy progress).
 */
#ifndef MCCL_NET_H_
#define MCCL_NET_H_

#include <stddef.h>
#include "mccl_allreduce.h"
#include "mccl_result.h"
#include "mccl_transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @defgroup lab08 Lab 08: NET transport over a network plugin (Open MPI)
 * @{ */

/** @brief Bytes of a listen handle (NCCL_NET_HANDLE_MAXSIZE): what the receiver's setup gives the sender. */
#define MCCL_NET_HANDLE_MAXSIZE 128
/** @brief regMr type: host memory (NCCL_PTR_HOST). */
#define MCCL_PTR_HOST 0x1
/** @brief Name of the plugin symbol a plugin library exports (NCCL's "ncclNetPlugin_v<N>"). */
#define MCCL_NET_PLUGIN_SYMBOL "mcclNetPlugin_v1"
/** @brief Library loaded when MCCL_NET_PLUGIN is unset. */
#define MCCL_NET_PLUGIN_DEFAULT "libmccl-net-mpi.so"

/** @brief What a network device offers (the parts of NCCL's ncclNetProperties_t minccl reads). */
typedef struct {
  char name[64];  /**< device name, for logs */
  int ptrSupport; /**< MCCL_PTR_HOST: buffers regMr accepts */
  int speed;      /**< Mbps (0: unknown) */
  int maxComms;   /**< connections the device can hold */
  int maxRecvs;   /**< receives one irecv may group (1 here) */
} mcclNetProperties_t;

/** @brief How a plugin logs through minccl's logger: level as mcclDebugLogLevel, printf format. */
typedef void (*mcclNetLogger_t)(int level, const char* file, int line, const char* fmt, ...);

/**
 * @brief A network plugin (NCCL's ncclNet_t). Every call returns at once: connect and accept may
 * leave *comm NULL ("call again"), isend and irecv may leave *request NULL (no resource: post again
 * later), and test says whether a request is done. Only the proxy's threads call it once connected.
 */
typedef struct {
  const char* name; /**< e.g. "MPI" */
  /** Initialise the plugin (once per process; collective over every process that uses it). */
  mcclResult_t (*init)(mcclNetLogger_t logFunction);
  /** Number of network devices. */
  mcclResult_t (*devices)(int* ndev);
  /** Properties of device dev. */
  mcclResult_t (*getProperties)(int dev, mcclNetProperties_t* props);
  /** Create a listening endpoint on dev; fill handle (at most MCCL_NET_HANDLE_MAXSIZE bytes) for the peer's connect. */
  mcclResult_t (*listen)(int dev, void* handle, void** listenComm);
  /** Connect to the peer that listened with handle; *sendComm stays NULL until the connection is ready. */
  mcclResult_t (*connect)(int dev, void* handle, void** sendComm);
  /** Accept a connection on listenComm; *recvComm stays NULL until a peer has connected. */
  mcclResult_t (*accept)(void* listenComm, void** recvComm);
  /** Register a buffer (type MCCL_PTR_HOST) for isend/irecv on comm. */
  mcclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  /** Deregister what regMr registered. */
  mcclResult_t (*deregMr)(void* comm, void* mhandle);
  /** Post a send of size bytes; *request NULL: retry later. */
  mcclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  /** Post n receives (n is 1 here) of at most sizes[i] bytes; *request NULL: retry later. */
  mcclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
  /** Whether request is done; on completion *done is 1, sizes[0] holds the bytes moved and the request is freed. */
  mcclResult_t (*test)(void* request, int* done, int* sizes);
  /** Close a send connection (no request may be pending on it). */
  mcclResult_t (*closeSend)(void* sendComm);
  /** Close a receive connection (pending receives are cancelled). */
  mcclResult_t (*closeRecv)(void* recvComm);
  /** Close a listening endpoint. */
  mcclResult_t (*closeListen)(void* listenComm);
} mcclNet_t;

/**
 * @brief Load and initialise the network plugin once per process (NCCL's ncclNetPluginLoad +
 * ncclNetInit): dlopen of MCCL_NET_PLUGIN (default MCCL_NET_PLUGIN_DEFAULT, looked up on the library
 * path, then next to the library holding minccl, then in the build tree's lib/), its
 * MCCL_NET_PLUGIN_SYMBOL, then its init. Collective over every process of the job the first time
 * (the MPI plugin duplicates MPI_COMM_WORLD). Later calls return the same plugin or the same error.
 * @param[out] net  the plugin.
 * @return mcclSuccess; mcclInvalidArgument (NULL net); mcclSystemError (the library or its symbol
 *         is missing, named in the WARN); the plugin's init error (e.g. MPI without MPI_THREAD_MULTIPLE).
 */
mcclResult_t mcclNetGet(const mcclNet_t** net);

/** @brief The NET transport (NCCL's netTransport), at TRANSPORT_NET of mcclTransports. */
extern struct mcclTransport mcclNetTransport;

/**
 * @brief The transport table of a program that has NET (NCCL's ncclTransports[]): [TRANSPORT_P2P]
 * &mcclP2pTransport, [TRANSPORT_SHM] &mcclShmTransport, [TRANSPORT_NET] &mcclNetTransport. This lab is
 * the lowest that sees every transport, so the table lives here; pass it to mcclLabCommInit (or
 * mcclLabCommAlloc) as final/ does, and ranks on different hosts connect through NET. Lab 06's
 * mcclLocalTransports is the same without NET.
 */
extern struct mcclTransport* const mcclTransports[MCCL_NUM_TRANSPORTS];

/**
 * @brief The transports of one channel's ring edges at this rank: the send connection to ring.next
 * and the receive connection from ring.prev (TRANSPORT_P2P, TRANSPORT_SHM or TRANSPORT_NET).
 * @param[in]  comm       a communicator of more than one rank.
 * @param[in]  channel    0 .. comm->nChannels-1.
 * @param[out] send       the transport of the edge this rank -> ring.next.
 * @param[out] recv       the transport of the edge ring.prev -> this rank.
 * @return mcclSuccess; mcclInvalidArgument (NULL pointers, a bad channel, a one-rank communicator).
 */
mcclResult_t mcclNetRingTransports(const mcclLabComm* comm, int channel, int* send, int* recv);

/** @brief Steps a rank's NET ring connections moved (mcclNetGetStats). */
typedef struct {
  uint64_t llSteps;     /**< steps that carried LL lines (the proxies saw every line's flag) */
  uint64_t simpleSteps; /**< the others: SIMPLE data, or empty steps (0 bytes serve both protocols) */
} mcclNetStats;

/**
 * @brief What this rank's NET ring connections (every channel's send to ring.next and receive from
 * ring.prev that is NET) have moved since they were connected, counted by the proxy as each step
 * completes: tells whether a collective went as LL lines or as SIMPLE slots over the network.
 * @param[in]  comm      the communicator.
 * @param[out] sent      the send connections' steps (NULL: not wanted).
 * @param[out] received  the receive connections' steps (NULL: not wanted).
 * @return mcclSuccess (zeros when no edge is NET); mcclInvalidArgument (NULL comm).
 */
mcclResult_t mcclNetGetStats(const mcclLabComm* comm, mcclNetStats* sent, mcclNetStats* received);

/**
 * @brief Host count of a communicator: distinct host hashes among its peer records.
 * @param[in]  comm    the communicator.
 * @param[out] nHosts  1 when every rank is on one host (or MCCL_HOSTID value).
 * @return mcclSuccess; mcclInvalidArgument (NULL pointers).
 */
mcclResult_t mcclNetCommHosts(const mcclLabComm* comm, int* nHosts);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
