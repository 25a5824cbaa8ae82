/**
 * @file mccl_shmutils.h
 * @brief Lab 04: a /dev/shm segment shared by two processes, with a reference count that unlinks
 * the file once every peer has attached (NCCL's shmutils.h: ncclShmOpen / ncclShmClose / ncclShmUnlink).
 * @ingroup lab04
 */
#ifndef MCCL_SHMUTILS_H_
#define MCCL_SHMUTILS_H_

#include <stddef.h>
#include "mccl_result.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup lab04
 * @{ */

/** @brief Opaque handle of an open segment (NCCL's ncclShmHandle_t). */
typedef void* mcclShmHandle_t;

/** @brief Room for a segment path (SHM_PATH_MAX). */
#define MCCL_SHM_PATH_MAX 128
/** @brief Directory of the segments. */
#define MCCL_SHM_DIR "/dev/shm"
/** @brief Prefix of every segment this library creates; mkstemp's six random characters follow. */
#define MCCL_SHM_PREFIX "/dev/shm/mccl-"

/**
 * @brief Create or attach a shared-memory segment of shmSize usable bytes (NCCL's ncclShmOpen).
 *
 * Creating (refcount > 0): with shmPath "" the file is made by mkstemp under MCCL_SHM_PREFIX (mode
 * 0600, O_EXCL, a random name written back into shmPath); with a path given it is created with
 * O_CREAT|O_EXCL, mode 0600 (an existing file is an error, never reused). The file is sized with
 * posix_fallocate, so a full /dev/shm fails here with a WARN naming /dev/shm and its free and total
 * size, rather than with SIGBUS on first touch. An int after the usable bytes holds refcount.
 *
 * Attaching (refcount < 0): opens shmPath, checks its size, maps it and decrements the count;
 * whoever takes it to 0 unlinks the file, so once every peer is attached nothing is left in
 * /dev/shm even if all processes crash. A creator whose peers never came unlinks in mcclShmClose.
 *
 * With devShmPtr non-NULL the mapping is registered with cudaHostRegister(Portable|Mapped) and its
 * device address comes from cudaHostGetDevicePointer, so copies to and from it are pinned DMA.
 *
 * @param[in,out] shmPath     "" (create: receives the path) or a path; at most shmPathSize bytes.
 * @param[in]     shmPathSize bytes of shmPath, at least sizeof(MCCL_SHM_PREFIX "XXXXXX").
 * @param[in]     shmSize     usable bytes, > 0; the creator and attachers must agree.
 * @param[out]    shmPtr      host address of the mapping.
 * @param[out]    devShmPtr   its device address, or NULL to skip registration.
 * @param[in]     refcount    > 0 create with this many expected attachers; < 0 attach (-1).
 * @param[out]    handle      the segment, for mcclShmClose.
 * @return mcclSuccess; mcclInvalidArgument (NULL pointers, zero size, refcount 0, short path
 *         buffer, an existing file to create, a file smaller than shmSize to attach);
 *         mcclSystemError (open/fallocate/mmap failed: /dev/shm full, missing file);
 *         mcclUnhandledCudaError (registration refused). Outputs are written only on success;
 *         on failure nothing is left: no fd, no mapping, no file this call created.
 *
 * @code
 * // process A                                  // process B, given A's path
 * char path[MCCL_SHM_PATH_MAX] = "";
 * void *a; mcclShmHandle_t ha;
 * MCCLCHECK(mcclShmOpen(path, sizeof(path), n, &a, NULL, 1, &ha));
 * // ... send path to B ...                     void *b; mcclShmHandle_t hb;
 *                                               MCCLCHECK(mcclShmOpen(path, sizeof(path), n, &b, NULL, -1, &hb));
 *                                               // the file is gone from /dev/shm now; a and b share pages
 * MCCLCHECK(mcclShmClose(ha));                  MCCLCHECK(mcclShmClose(hb));
 * @endcode
 */
mcclResult_t mcclShmOpen(char* shmPath, size_t shmPathSize, size_t shmSize, void** shmPtr, void** devShmPtr,
                         int refcount, mcclShmHandle_t* handle);

/**
 * @brief Unregister, unmap and close a segment; a creator whose count never reached 0 also
 * unlinks the file (NCCL's ncclShmClose).
 * @param[in] handle  from mcclShmOpen, or NULL (a no-op).
 * @return mcclSuccess; mcclSystemError (unlink/munmap failed); mcclUnhandledCudaError. The handle
 *         is freed in every case.
 */
mcclResult_t mcclShmClose(mcclShmHandle_t handle);

/**
 * @brief Unlink a created segment now, whether or not peers attached (NCCL's ncclShmUnlink), e.g.
 * when the peer is known to have failed. The mapping stays valid until mcclShmClose.
 * @param[in] handle  from mcclShmOpen, or NULL (a no-op).
 * @return mcclSuccess; mcclSystemError when unlink fails.
 */
mcclResult_t mcclShmUnlink(mcclShmHandle_t handle);

/**
 * @brief The segment's open descriptor, which stays valid until mcclShmClose: another part of this
 * process may attach an unlinked segment through "/proc/self/fd/<fd>" (mcclShmOpen with refcount -1
 * on that path; an attach through /proc never unlinks anything).
 * @param[in] handle  from mcclShmOpen.
 * @return the descriptor, or -1 for a NULL handle.
 */
int mcclShmGetFd(mcclShmHandle_t handle);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
