// Lab 04: /dev/shm segments with a reference count, as NCCL 2.28.9 src/misc/shmutils.cc
// (ncclShmOpen, ncclShmClose, ncclShmUnlink).
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_shmutils.h"

struct shmHandleInternal {
  int fd;
  char* shmPath;     // set on the creator only: it may still have to unlink
  char* shmPtr;
  void* devShmPtr;   // non-NULL when the mapping is registered with CUDA
  size_t shmSize;
  size_t realShmSize;
  int* refcount;
};

// The count sits after the usable bytes, rounded up so the atomic int is aligned.
static size_t refOffset(size_t shmSize) { return (shmSize + 7) & ~(size_t)7; }

// Says how full the directory of `path` is, for the error a full /dev/shm gives.
static void warnNoSpace(const char* path, size_t bytes, int err) {
  char dir[MCCL_SHM_PATH_MAX];
  snprintf(dir, sizeof(dir), "%s", path);
  struct statvfs vfs;
  const char* d = dirname(dir);
  if (statvfs(d, &vfs) == 0) {
    WARN("Could not allocate %zu bytes of shared memory for %s: %s. %s has %llu bytes free of %llu; in a "
         "container raise it (docker run --shm-size=1g, or a larger tmpfs on %s) or free stale mccl-* files",
         bytes, path, strerror(err), d, (unsigned long long)vfs.f_bavail * vfs.f_frsize,
         (unsigned long long)vfs.f_blocks * vfs.f_frsize, d);
  } else {
    WARN("Could not allocate %zu bytes of shared memory for %s: %s (and statvfs(%s) failed: %s)", bytes, path,
         strerror(err), d, strerror(errno));
  }
}

mcclResult_t mcclShmOpen(char* shmPath, size_t shmPathSize, size_t shmSize, void** shmPtr, void** devShmPtr,
                         int refcount, mcclShmHandle_t* handle) {
  mcclResult_t res = mcclSuccess;
  struct shmHandleInternal* h = NULL;
  int fd = -1, created = 0, generated = 0;
  char* hptr = NULL;
  void* dptr = NULL;
  const int create = refcount > 0;

  MCCL_ARGCHECK(shmPath != NULL, "shmPath is NULL");
  MCCL_ARGCHECK(shmPtr != NULL, "shmPtr is NULL");
  MCCL_ARGCHECK(handle != NULL, "handle is NULL");
  MCCL_ARGCHECK(refcount != 0, "refcount is 0 (> 0 creates, < 0 attaches)");
  MCCL_ARGCHECK(shmSize > 0 && shmSize <= (size_t)INT64_MAX / 2, "shmSize %zu (must be 1 .. 2^62)", shmSize);
  MCCL_ARGCHECK(shmPathSize >= sizeof(MCCL_SHM_PREFIX "XXXXXX") && shmPathSize <= 4096,
                "shmPathSize %zu (must be %zu .. 4096)", shmPathSize, sizeof(MCCL_SHM_PREFIX "XXXXXX"));
  MCCL_ARGCHECK(memchr(shmPath, '\0', shmPathSize) != NULL, "shmPath is not NUL-terminated within %zu bytes",
                shmPathSize);
  MCCL_ARGCHECK(create || shmPath[0] != '\0', "shmPath is empty (attaching needs the creator's path)");
  const size_t realShmSize = refOffset(shmSize) + sizeof(int);

  // EXERCISE(04.shm_open)
  h = (struct shmHandleInternal*)calloc(1, sizeof(*h));
  if (h == NULL) {
    WARN("Out of memory allocating a shm handle");
    return mcclSystemError;
  }

  if (create) {
    if (shmPath[0] == '\0') {
      // mkstemp: O_CREAT|O_EXCL with mode 0600 and a random name nobody can predict or pre-create.
      snprintf(shmPath, shmPathSize, "%sXXXXXX", MCCL_SHM_PREFIX);
      generated = 1;
      SYSCHECKGOTO(fd = mkostemp(shmPath, O_CLOEXEC), res, fail);
    } else {
      do {
        fd = open(shmPath, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, S_IRUSR | S_IWUSR);
      } while (fd < 0 && errno == EINTR);
      if (fd < 0 && errno == EEXIST) {
        WARN("Invalid argument: shmPath %s already exists; refusing to reuse a file we did not create", shmPath);
        res = mcclInvalidArgument;
        goto fail;
      }
      if (fd < 0) {
        WARN("Could not create shared memory file %s: %s", shmPath, strerror(errno));
        res = mcclSystemError;
        goto fail;
      }
    }
    created = 1;
    // Reserve every page now: a sparse file on a full tmpfs would map fine and SIGBUS later.
    int err;
    do { err = posix_fallocate(fd, 0, (off_t)realShmSize); } while (err == EINTR);
    if (err != 0) {
      warnNoSpace(shmPath, realShmSize, err);
      res = mcclSystemError;
      goto fail;
    }
    INFO(MCCL_ALLOC | MCCL_SHM, "Allocated %zu bytes of shared memory in %s", realShmSize, shmPath);
  } else {
    struct stat st;
    do { fd = open(shmPath, O_RDWR | O_CLOEXEC); } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
      WARN("Could not open shared memory file %s to attach: %s (the creator closed it, or /dev/shm is not shared "
           "with it)", shmPath, strerror(errno));
      res = mcclSystemError;
      goto fail;
    }
    SYSCHECKGOTO(fstat(fd, &st), res, fail);
    if ((size_t)st.st_size < realShmSize) {
      WARN("Invalid argument: shared memory file %s has %lld bytes, shmSize %zu needs %zu", shmPath,
           (long long)st.st_size, shmSize, realShmSize);
      res = mcclInvalidArgument;
      goto fail;
    }
  }

  hptr = (char*)mmap(NULL, realShmSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (hptr == MAP_FAILED) {
    WARN("Could not map %s (%zu bytes): %s", shmPath, realShmSize, strerror(errno));
    hptr = NULL;
    res = mcclSystemError;
    goto fail;
  }
  // No memset: pages fallocate'd on tmpfs already read as zero.

  if (devShmPtr) {
    // Pinning the pages makes cudaMemcpyAsync to and from them a DMA, not a staged copy.
    CUDACHECKGOTO(cudaHostRegister(hptr, realShmSize, cudaHostRegisterPortable | cudaHostRegisterMapped), res, fail);
    if (cudaHostGetDevicePointer(&dptr, hptr, 0) != cudaSuccess) {
      WARN("Cuda failure in cudaHostGetDevicePointer for %s", shmPath);
      cudaHostUnregister(hptr);
      res = mcclUnhandledCudaError;
      goto fail;
    }
  }

  int* ref = (int*)(hptr + refOffset(shmSize));
  if (create) {
    __atomic_store_n(ref, refcount, __ATOMIC_RELEASE);
  } else {
    // Whoever takes the count to 0 is the last to attach: the name is no longer needed, and
    // unlinking now means a crash of everyone leaves nothing behind in /dev/shm.
    // An attach through /proc/self/fd/N is to a segment its creator unlinked already: nothing to do.
    int remaining = __atomic_sub_fetch(ref, 1, __ATOMIC_ACQ_REL);
    if (remaining == 0 && strncmp(shmPath, "/proc/", 6) != 0 && unlink(shmPath) != 0 && errno != ENOENT)
      INFO(MCCL_ALLOC | MCCL_SHM, "unlink shared memory %s failed: %s", shmPath, strerror(errno));
  }

  h->fd = fd;
  h->shmPtr = hptr;
  h->devShmPtr = dptr;
  h->shmSize = shmSize;
  h->realShmSize = realShmSize;
  h->refcount = ref;
  if (create) {
    h->shmPath = strdup(shmPath);
    if (h->shmPath == NULL) {
      WARN("Out of memory copying the shm path");
      res = mcclSystemError;
      if (dptr) cudaHostUnregister(hptr);
      goto fail;
    }
  }
  *shmPtr = hptr;
  if (devShmPtr) *devShmPtr = dptr;
  *handle = (mcclShmHandle_t)h;
  return mcclSuccess;

fail:
  // The name goes first, while this process still holds the file: no one may find it held by no one.
  if (created) unlink(shmPath);
  if (hptr) munmap(hptr, realShmSize);
  if (fd >= 0) close(fd);
  if (generated) shmPath[0] = '\0';  // the path is an output: leave it as it came
  free(h);
  return res;
  // END EXERCISE(04.shm_open)
}

mcclResult_t mcclShmClose(mcclShmHandle_t handle) {
  mcclResult_t res = mcclSuccess;
  struct shmHandleInternal* h = (struct shmHandleInternal*)handle;
  if (h == NULL) return mcclSuccess;
  // A creator whose peers never attached still owns the name.
  if (h->shmPath && h->refcount && __atomic_load_n(h->refcount, __ATOMIC_ACQUIRE) > 0) {
    if (unlink(h->shmPath) != 0 && errno != ENOENT) {
      WARN("unlink shared memory %s failed: %s", h->shmPath, strerror(errno));
      res = mcclSystemError;
    }
  }
  if (h->devShmPtr && cudaHostUnregister(h->shmPtr) != cudaSuccess) {
    WARN("Cuda failure in cudaHostUnregister(%p)", h->shmPtr);
    res = mcclUnhandledCudaError;
  }
  if (h->shmPtr && munmap(h->shmPtr, h->realShmSize) != 0) {
    WARN("munmap of shared memory %p size %zu failed: %s", h->shmPtr, h->realShmSize, strerror(errno));
    res = mcclSystemError;
  }
  if (h->fd >= 0) close(h->fd);
  free(h->shmPath);
  free(h);
  return res;
}

mcclResult_t mcclShmUnlink(mcclShmHandle_t handle) {
  struct shmHandleInternal* h = (struct shmHandleInternal*)handle;
  if (h == NULL || h->shmPath == NULL) return mcclSuccess;
  mcclResult_t res = mcclSuccess;
  if (unlink(h->shmPath) != 0 && errno != ENOENT) {
    WARN("unlink shared memory %s failed: %s", h->shmPath, strerror(errno));
    res = mcclSystemError;
  }
  free(h->shmPath);
  h->shmPath = NULL;
  return res;
}

int mcclShmGetFd(mcclShmHandle_t handle) {
  const struct shmHandleInternal* h = (const struct shmHandleInternal*)handle;
  return h ? h->fd : -1;
}
