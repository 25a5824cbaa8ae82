// Lab 07: the communicator's own launches. Each launch outside a CUDA graph capture takes a number, and
// its last block to end stores that number in a host-mapped ring (dev_common.cuh, mcclLaunchEnded), so the
// host learns which launches have ended without synchronising anything.
//
// Two readers: teardown, which must outlive the kernels that read the communicator's memory but not wait
// for other people's work (NCCL's commDestroySync waits on the communicator's own streams; minccl launches
// on the caller's streams, so it waits on its own kernels instead of on the device), and the watchdog,
// which asks whether a collective's launches have ended.
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "enqueue_internal.h"
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_devconn.h"
#include "mccl_utils.h"

mcclResult_t mcclLabLaunchesInit(mcclLabComm* comm) {
  struct mcclLabLaunches* l = &comm->launches;
  void *h = NULL, *d = NULL;
  // Lab 06's host memory: teardown frees it without waiting for the device's other streams.
  MCCLCHECK(mcclDevHostCalloc(&h, &d, sizeof(uint64_t) * MCCL_LAUNCH_RING));
  l->done = (uint64_t*)h;
  l->doneDev = (uint64_t*)d;
  // Lab 06's allocator: freed at teardown without waiting for the device's other streams.
  MCCLCHECK(mcclDevCalloc((void**)&l->blocksDev, sizeof(uint32_t) * MCCL_LAUNCH_RING));
  return mcclSuccess;
}

void mcclLabLaunchesFree(mcclLabComm* comm) {
  struct mcclLabLaunches* l = &comm->launches;
  for (int s = 0; l->events && s < MCCL_LAUNCH_RING; s++)
    if (l->events[s]) cudaEventDestroy(l->events[s]);
  free(l->events);
  free(l->eventLaunch);
  mcclDevHostFree(l->done);
  mcclDevFree(l->blocksDev);
  memset(l, 0, sizeof(*l));
}

void mcclLabLaunchNumber(mcclLabComm* comm, cudaStream_t stream, struct mcclDevKernelArgs* a) {
  struct mcclLabLaunches* l = &comm->launches;
  a->launch = 0;
  if (l->done == NULL) return;
  // A launch captured into a graph runs at each replay, which the host never sees end: not numbered.
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &cs) != cudaSuccess) {
    // The query fails where a capture is under way elsewhere (the legacy stream during a global capture):
    // not numbered either, and the error is the query's, so it is not left for the application to find.
    (void)cudaGetLastError();
    cs = cudaStreamCaptureStatusActive;
  }
  if (cs != cudaStreamCaptureStatusNone) return;
  // Atomic: the watchdog's thread reads it (mcclLabLaunchEnded); only this thread writes it.
  a->launch = l->last + 1;
  __atomic_store_n(&l->last, a->launch, __ATOMIC_RELAXED);
  a->launchDone = l->doneDev;
  a->launchBlocks = l->blocksDev;
}

void mcclLabLaunchFailed(mcclLabComm* comm, const struct mcclDevKernelArgs* a) {
  if (a->launch != 0) __atomic_store_n(&comm->launches.done[a->launch % MCCL_LAUNCH_RING], a->launch, __ATOMIC_RELEASE);
}

mcclResult_t mcclLabLaunchRecord(mcclLabComm* comm, cudaStream_t stream, uint64_t n) {
  struct mcclLabLaunches* l = &comm->launches;
  if (n == 0) return mcclSuccess;
  if (l->events == NULL) {
    cudaEvent_t* ev = (cudaEvent_t*)calloc(MCCL_LAUNCH_RING, sizeof(*ev));
    uint64_t* at = (uint64_t*)calloc(MCCL_LAUNCH_RING, sizeof(*at));
    if (ev == NULL || at == NULL) {
      free(ev);
      free(at);
      WARN("Out of memory for rank %d's launch events", comm->rank);
      return mcclSystemError;
    }
    l->eventLaunch = at;
    __atomic_store_n(&l->events, ev, __ATOMIC_RELEASE);  // the watchdog's thread may look from now on
  }
  const size_t s = n % MCCL_LAUNCH_RING;
  if (l->events[s] == NULL) CUDACHECK(cudaEventCreateWithFlags(&l->events[s], cudaEventDisableTiming));
  CUDACHECK(cudaEventRecord(l->events[s], stream));
  __atomic_store_n(&l->eventLaunch[s], n, __ATOMIC_RELEASE);
  return mcclSuccess;
}

int mcclLabLaunchEnded(const mcclLabComm* comm, uint64_t n) {
  const struct mcclLabLaunches* l = &comm->launches;
  if (n == 0 || l->done == NULL) return 1;
  if (n + MCCL_LAUNCH_RING <= __atomic_load_n(&l->last, __ATOMIC_RELAXED))
    return 1;  // its slot went to a later launch: far in the past
  const size_t s = n % MCCL_LAUNCH_RING;
  if (__atomic_load_n(&l->done[s], __ATOMIC_ACQUIRE) >= n) return 1;
  cudaEvent_t* ev = __atomic_load_n(&l->events, __ATOMIC_ACQUIRE);
  const uint64_t at = ev ? __atomic_load_n(&l->eventLaunch[s], __ATOMIC_ACQUIRE) : 0;
  if (at > n) return 1;  // a later launch took the slot
  return at == n && cudaEventQuery(ev[s]) == cudaSuccess;
}

mcclResult_t mcclLabCommWaitLaunches(mcclLabComm* comm) {
  if (comm == NULL) return mcclInvalidArgument;
  const uint64_t last = comm->launches.last;
  const uint64_t first = last >= MCCL_LAUNCH_RING ? last - MCCL_LAUNCH_RING + 1 : 1;
  // Kernels end by themselves once they see the abort flag; the copy engines' waits are released.
  if (mcclIsAborted(comm->abortFlag) && comm->ceColl.ops != NULL && comm->ceColl.ops->release != NULL)
    comm->ceColl.ops->release(comm);
  int saved = -1;
  if (cudaGetDevice(&saved) != cudaSuccess) saved = -1;
  cudaSetDevice(comm->cudaDev);
  mcclResult_t res = mcclSuccess;
  for (uint64_t n = first; n <= last && res == mcclSuccess; n++) {
    for (unsigned spins = 0; !mcclLabLaunchEnded(comm, n); spins++) {
      // A device fault ends no kernel: its error is sticky and every query returns it.
      if (spins % 1024 == 1023) {
        const cudaError_t e = cudaStreamQuery(cudaStreamLegacy);
        if (e != cudaSuccess && e != cudaErrorNotReady) {
          WARN("Cuda failure %d '%s' while rank %d waited for its kernels to end", (int)e, cudaGetErrorString(e),
               comm->rank);
          res = mcclUnhandledCudaError;
          break;
        }
      }
      if (spins < 64) {
        sched_yield();
      } else {
        struct timespec ts = {0, 100 * 1000};
        nanosleep(&ts, NULL);
      }
    }
  }
  if (saved >= 0) cudaSetDevice(saved);
  return res;
}
