/**
 * @file mccl_socket.h
 * @brief Socket helpers that the bootstrap, the proxy and the IPC socket share (NCCL's
 *        `src/include/socket.h`): the abstract Unix address, and moving a whole message over a stream.
 * @ingroup common
 *
 * The bootstrap and the proxy name their sockets in Linux's abstract namespace, as the IPC socket
 * does by default (MCCL_IPC_USE_ABSTRACT): a name that is no file and goes with its last fd, so a
 * killed rank leaves nothing behind in /tmp. Both sides must pass the same length to bind() and
 * connect(), since the abstract name is every byte of sun_path within that length:
 * mcclSocketAbstractAddr computes it one way for everyone.
 *
 * @code
 * struct sockaddr_un addr;
 * socklen_t len = mcclSocketAbstractAddr("mccl-proxy-1234", &addr);
 * SYSCHECK(bind(fd, (struct sockaddr*)&addr, len), "bind");
 * @endcode
 */
#ifndef MCCL_SOCKET_H_
#define MCCL_SOCKET_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup common
 * @{ */

/**
 * @brief Fills @p addr with the abstract address of @p name: sun_path[0] is '\0', the name follows
 *        without a trailing NUL, cut to what sun_path holds.
 * @param[in]  name  the name, without the leading '@' that ss(8) prints.
 * @param[out] addr  the address (zeroed first).
 * @return the length to pass to bind(), connect() or sendmsg() with @p addr.
 */
socklen_t mcclSocketAbstractAddr(const char* name, struct sockaddr_un* addr);

/** How mcclSocketSendAll / mcclSocketRecvAll ended. The caller words the failure (it knows what the
 *  message was), as NCCL's ncclSocketSend/Recv leave the context to theirs. */
typedef enum {
  mcclSocketDone = 0, /**< every byte moved */
  mcclSocketClosed,   /**< the peer closed the stream first (end of stream, EPIPE, ECONNRESET) */
  mcclSocketFailed,   /**< another error; errno says which */
  mcclSocketTimedOut, /**< the deadline passed */
  mcclSocketAborted   /**< the abort flag was raised */
} mcclSocketStatus;

/** No deadline, for mcclSocketSendAll / mcclSocketRecvAll. */
#define MCCL_SOCKET_NO_DEADLINE UINT64_MAX

/**
 * @brief Sends all @p size bytes of @p data on the stream @p fd, blocking or not, waiting in poll()
 *        (a 50 ms slice at a time, to see @p abortFlag) while the socket is full.
 * @param[in]  fd         a connected stream socket.
 * @param[in]  data       the bytes to send.
 * @param[in]  size       how many.
 * @param[in]  deadline   mcclClockMs() time to give up at, or MCCL_SOCKET_NO_DEADLINE.
 * @param[in]  abortFlag  checked between waits; NULL for none.
 * @param[out] done       bytes sent, also on failure (may be NULL).
 * @return mcclSocketDone, or how it ended without every byte sent.
 */
mcclSocketStatus mcclSocketSendAll(int fd, const void* data, size_t size, uint64_t deadline,
                                   volatile uint32_t* abortFlag, size_t* done);

/**
 * @brief Receives exactly @p size bytes into @p data, as mcclSocketSendAll sends them.
 * @param[in]  fd         a connected stream socket.
 * @param[out] data       where the bytes go.
 * @param[in]  size       how many.
 * @param[in]  deadline   mcclClockMs() time to give up at, or MCCL_SOCKET_NO_DEADLINE.
 * @param[in]  abortFlag  checked between waits; NULL for none.
 * @param[out] done       bytes received, also on failure (may be NULL): with mcclSocketClosed, 0 means
 *                        the peer closed between messages.
 * @return mcclSocketDone, or how it ended without every byte received (end of stream: mcclSocketClosed).
 */
mcclSocketStatus mcclSocketRecvAll(int fd, void* data, size_t size, uint64_t deadline, volatile uint32_t* abortFlag,
                                   size_t* done);

/** @} */

#ifdef __cplusplus
}
#endif

#endif  // MCCL_SOCKET_H_
