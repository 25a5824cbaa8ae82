/**
 * @file mccl_ipcsocket.h
 * @brief Lab 03: Unix-domain datagram sockets that carry a small header and, optionally, one file
 * descriptor (SCM_RIGHTS) between processes of one host, as NCCL's ipcsocket.
 * @ingroup lab03
 */
#ifndef MCCL_IPCSOCKET_H_
#define MCCL_IPCSOCKET_H_

#include <stdint.h>
#include "mccl_result.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup lab03 Lab 03: IPC export
 * @brief Export a VMM allocation as a POSIX fd (or a fabric handle), pass the fd to another
 * process over a Unix-domain socket, import and map it there: NCCL 2.28.9 src/misc/ipcsocket.cc
 * (ncclIpcSocketInit/Close/SendMsg/RecvMsg/SendFd/RecvFd) and src/transport/p2p.cc
 * (ncclP2pAllocateShareableBuffer, ncclP2pImportShareableBuffer).
 *
 * A socket is named from a (rank, hash) pair, so any process that knows both can send to it
 * without a connection: the hash keeps two jobs (or two uses in one job) apart, the rank picks
 * the process. Names live in the Linux abstract namespace by default (MCCL_IPC_USE_ABSTRACT=1:
 * nothing on disk, nothing to unlink, but only visible inside one network namespace), or as
 * files under MCCL_IPC_DIR (MCCL_IPC_USE_ABSTRACT=0). Both ends must use the same setting.
 *
 * Every socket is non-blocking: sends and receives poll, check the abort flag, and give up with
 * mcclTimeout after MCCL_IPC_TIMEOUT milliseconds (0 or less: wait forever, abort flag only). A
 * send retries while the peer's socket does not exist yet or its queue is full, so the two sides
 * need not be started in order; a receive whose peer died ends in mcclTimeout.
 *
 * Every socket has SO_PASSCRED on, so the kernel attaches the sender's pid/uid/gid to each
 * message. A received fd is accepted only from a sender whose uid equals our real uid; any other
 * is closed at once and the receive fails with mcclRemoteError.
 *
 * Results common to every call: mcclInvalidArgument for a NULL handle, a closed socket or an
 * out-of-range length (a WARN names the argument and value); mcclSystemError when a system call
 * fails; mcclInternalError when the abort flag is seen set (as NCCL does); mcclTimeout.
 * @{
 */

/** @brief Longest socket name kept in mcclIpcSocket::socketName (sun_path is 108 bytes). */
#define MCCL_IPC_SOCKNAME_LEN 108
/** @brief Largest header one message may carry, in bytes. */
#define MCCL_IPC_MAX_HDR 4096

/** @brief One bound datagram socket (NCCL's struct ncclIpcSocket). */
typedef struct mcclIpcSocket {
  int fd;                                  /**< the socket, -1 when closed */
  int isAbstract;                          /**< 1: abstract name; 0: a file to unlink on close */
  char socketName[MCCL_IPC_SOCKNAME_LEN];  /**< printable name; abstract names start with '@' */
  volatile uint32_t* abortFlag;            /**< polled while waiting; non-zero aborts; may be NULL */
} mcclIpcSocket;

/**
 * @brief Create a datagram socket and bind it to the name of (rank, hash).
 *
 * The name is "mccl-socket-<rank>-<hash in hex>", abstract ("@...") or under MCCL_IPC_DIR.
 * A leftover file of that name (a crashed run) is unlinked first. The socket is non-blocking and
 * has SO_PASSCRED set.
 *
 * @param[out] handle     the socket (fd -1 and an empty name on failure).
 * @param[in]  rank       this process's rank, >= 0.
 * @param[in]  hash       any value both sides agree on (e.g. a random id shared at start-up).
 * @param[in]  abortFlag  polled while waiting in send/recv, or NULL.
 * @return mcclSuccess; mcclInvalidArgument (NULL handle, negative rank, name too long);
 *         mcclSystemError (socket/bind failed, e.g. EADDRINUSE when (rank, hash) is taken).
 */
mcclResult_t mcclIpcSocketInit(mcclIpcSocket* handle, int rank, uint64_t hash, volatile uint32_t* abortFlag);

/**
 * @brief Close the socket and, for a filesystem name, unlink it. Closing a closed socket is a no-op.
 * @param[in,out] handle  the socket; fd is -1 afterwards.
 * @return mcclSuccess; mcclInvalidArgument for NULL.
 */
mcclResult_t mcclIpcSocketClose(mcclIpcSocket* handle);

/**
 * @brief The socket's file descriptor, e.g. to poll it with others (NCCL's ncclIpcSocketGetFd).
 * @param[in]  handle  the socket.
 * @param[out] fd      its descriptor.
 * @return mcclSuccess; mcclInvalidArgument for NULL arguments.
 */
mcclResult_t mcclIpcSocketGetFd(mcclIpcSocket* handle, int* fd);

/**
 * @brief Send one datagram: hdrLen bytes of hdr and, when sendFd >= 0, a duplicate of sendFd
 * (SCM_RIGHTS) to the socket of (rank, hash).
 *
 * The caller keeps sendFd (the kernel puts a new descriptor for the same open file in the
 * receiver); close it when no longer needed. With hdr NULL a one-byte dummy is sent, as NCCL does.
 *
 * @param[in] handle  our socket (the sender's address the receiver sees).
 * @param[in] hdr     bytes to send, or NULL.
 * @param[in] hdrLen  0 .. MCCL_IPC_MAX_HDR (0 when hdr is NULL).
 * @param[in] sendFd  descriptor to pass, or -1 for none.
 * @param[in] rank    the receiver's rank.
 * @param[in] hash    the receiver's hash.
 * @return mcclSuccess; mcclInvalidArgument (bad length, sendFd not an open descriptor);
 *         mcclTimeout (the peer's socket never appeared or stayed full); mcclSystemError;
 *         mcclInternalError (aborted).
 */
mcclResult_t mcclIpcSocketSendMsg(mcclIpcSocket* handle, const void* hdr, int hdrLen, int sendFd, int rank,
                                  uint64_t hash);

/**
 * @brief Receive one datagram of exactly hdrLen bytes, and the fd it carries.
 *
 * Before an fd is handed over the sender's credentials are checked (uid must equal ours). A
 * message of another length, a truncated control part, or a second fd is rejected; any fd that
 * arrived with a rejected message is closed. Outputs are written only on success.
 *
 * @param[in]  handle  our socket.
 * @param[out] hdr     hdrLen bytes, or NULL to accept a header-less (dummy) message.
 * @param[in]  hdrLen  0 .. MCCL_IPC_MAX_HDR (0 when hdr is NULL).
 * @param[out] recvFd  the received descriptor (the caller owns and closes it), -1 if the message
 *                     carried none; NULL if no fd is expected (one that comes anyway is closed).
 * @return mcclSuccess; mcclInvalidArgument; mcclRemoteError (wrong length, fd from another uid,
 *         no credentials); mcclTimeout (nothing arrived in MCCL_IPC_TIMEOUT ms); mcclSystemError;
 *         mcclInternalError (aborted).
 *
 * @code
 * // process A (rank 0)                        // process B (rank 1)
 * mcclIpcSocket s;                             mcclIpcSocket s;
 * MCCLCHECK(mcclIpcSocketInit(&s, 0, h, NULL)); MCCLCHECK(mcclIpcSocketInit(&s, 1, h, NULL));
 * MCCLCHECK(mcclIpcSocketSendMsg(&s, &desc, sizeof(desc), fd, 1, h));
 *                                              int fd;
 *                                              MCCLCHECK(mcclIpcSocketRecvMsg(&s, &desc, sizeof(desc), &fd));
 * close(fd);                                   // ... import fd ..., then close(fd)
 * MCCLCHECK(mcclIpcSocketClose(&s));           MCCLCHECK(mcclIpcSocketClose(&s));
 * @endcode
 */
mcclResult_t mcclIpcSocketRecvMsg(mcclIpcSocket* handle, void* hdr, int hdrLen, int* recvFd);

/**
 * @brief Send only a descriptor (NCCL's ncclIpcSocketSendFd): SendMsg with no header.
 * @param[in] handle  our socket.
 * @param[in] sendFd  the descriptor, >= 0; the caller keeps it.
 * @param[in] rank    the receiver's rank.
 * @param[in] hash    the receiver's hash.
 * @return as mcclIpcSocketSendMsg; mcclInvalidArgument when sendFd < 0.
 */
mcclResult_t mcclIpcSocketSendFd(mcclIpcSocket* handle, int sendFd, int rank, uint64_t hash);

/**
 * @brief Receive only a descriptor (NCCL's ncclIpcSocketRecvFd): a message without one is an error.
 * @param[in]  handle  our socket.
 * @param[out] recvFd  the descriptor (caller closes it).
 * @return as mcclIpcSocketRecvMsg; mcclRemoteError when the message carried no descriptor.
 */
mcclResult_t mcclIpcSocketRecvFd(mcclIpcSocket* handle, int* recvFd);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
