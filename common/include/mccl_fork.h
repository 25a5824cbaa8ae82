/**
 * @file mccl_fork.h
 * @brief Forked peer processes for demos, tests and benchmarks: the child never outlives its
 *        parent, and a failure on either side ends both (as mpirun ends a job when one rank fails).
 * @ingroup common
 *
 * Two processes that wait for each other with the timeouts off (`MCCL_*_TIMEOUT=0`, as under
 * `make gdb`) would otherwise wait forever for a peer that failed or died. Three rules close
 * every such wait:
 * - the parent dies: mcclForkChild set `PR_SET_PDEATHSIG` (SIGKILL) in the child;
 * - the child fails (exits non-zero or is killed): the watcher of mcclChildWatchStart raises the
 *   parent's abort flag, which every mccl wait polls (sockets, bootstrap, proxy, SHM FIFO);
 * - the parent fails: mcclChildWatchEnd with `selfFailed` kills the child before reaping it.
 *
 * @code
 * volatile uint32_t abortFlag = 0;
 * pid_t child = mcclForkChild();
 * if (child == 0) _exit(runPeer() == mcclSuccess ? 0 : 1);
 * mcclChildWatch* watch;
 * MCCLCHECK(mcclChildWatchStart(child, &abortFlag, &watch));
 * mcclResult_t res = runMe(&abortFlag);   // every wait polls abortFlag
 * int status;
 * MCCLCHECK(mcclChildWatchEnd(watch, res != mcclSuccess, &status));
 * @endcode
 */
#ifndef MCCL_FORK_H_
#define MCCL_FORK_H_

#include <stdint.h>
#include <sys/types.h>
#include "mccl_result.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup common
 * @{ */

/**
 * @brief fork() for a peer process that must not outlive the caller.
 *
 * Flushes stdio first (so buffered output is not printed twice). In the child, sets
 * `PR_SET_PDEATHSIG` to SIGKILL and exits at once if the parent died before that (the race NCCL's
 * and MPI launchers close the same way). The death signal follows the forking *thread*: call it
 * from a thread that lives as long as the child should.
 * @return as fork(): 0 in the child, the child's pid in the parent, -1 (errno set) on failure.
 */
pid_t mcclForkChild(void);

/** @brief A thread that watches one child process; opaque. */
typedef struct mcclChildWatch mcclChildWatch;

/**
 * @brief Starts watching @p child: if it exits with a non-zero status or is killed, a WARN names
 *        it and `*abortFlag` becomes 1 (release store). The child is not reaped.
 * @param[in]  child      pid from mcclForkChild.
 * @param[in]  abortFlag  the flag the caller's waits poll; must outlive the watch.
 * @param[out] watch      written on success.
 * @return mcclSuccess; mcclInvalidArgument for a pid <= 0 or a NULL pointer; mcclSystemError when
 *         no thread could be started.
 */
mcclResult_t mcclChildWatchStart(pid_t child, volatile uint32_t* abortFlag, mcclChildWatch** watch);

/**
 * @brief Ends the watch and reaps the child. When @p selfFailed is non-zero the child is killed
 *        first (SIGKILL): it may be waiting for this process forever.
 * @param[in]  watch       from mcclChildWatchStart; freed.
 * @param[in]  selfFailed  non-zero if this process failed.
 * @param[out] status      the child's wait status (as waitpid), or NULL.
 * @return mcclSuccess; mcclInvalidArgument for a NULL watch; mcclSystemError if waitpid failed.
 */
mcclResult_t mcclChildWatchEnd(mcclChildWatch* watch, int selfFailed, int* status);

/** @} */

#ifdef __cplusplus
}
#endif

#endif
