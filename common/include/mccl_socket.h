/**
 * @file mccl_socket.h
 * @brief Unix-domain socket helpers that the bootstrap, the proxy and the IPC socket share (NCCL's
 *        `src/include/socket.h`).
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

/** @} */

#ifdef __cplusplus
}
#endif

#endif  // MCCL_SOCKET_H_
