// Lab 07: the communicator's own launches. Each launch outside a CUDA graph capture takes a number, and an
// event recorded after it on its stream marks its end, so the host learns which launches have ended without
// synchronising anything (cudaEventQuery). The event is the driver's: it completes once the kernel has ended
// and every one of its writes is done, and it costs the kernel nothing. A kernel that stored its own number in
// host memory at its end would need a system-scope release there, a fence that waits for the kernel's stores
// across NVLink and PCIe, on the path of every eager call.
//
// Two readers: teardown, which must outlive the kernels that read the communicator's memory but not wait
// for other people's work (NCCL's commDestroySync waits on the communicator's own streams; minccl launches
// on the caller's streams, so it waits on its own launches instead of on the device), and the watchdog,
// which asks whether a collective's launches have ended.
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "enqueue_internal.h"
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_utils.h"

// A slot's word (eventLaunch): the number of the launch whose end its event marks, and, while the watchdog is on,
// the first op of that launch's group, in one store, the one every launch makes anyway. The launch number keeps its
// low LAUNCH_BITS bits: slots are compared only with launches less than a ring apart (a slot not recorded yet,
// zero, reads as an earlier launch).
#define LAUNCH_BITS (64 - MCCL_LAUNCH_OP_BITS)
#define LAUNCH_MASK ((1ull << LAUNCH_BITS) - 1)
#define OP_MASK ((1ull << (64 - LAUNCH_BITS)) - 1)
static uint64_t slotLaunch(uint64_t word) {
  return word >> (64 - LAUNCH_BITS);
}
// Launch n against the launch a slot holds: 0 the same, > 0 the slot's is later, < 0 earlier.
static int64_t slotCompare(uint64_t word, uint64_t n) {
  const uint64_t d = (slotLaunch(word) - n) & LAUNCH_MASK;
  return d == 0 ? 0 : d < (LAUNCH_MASK >> 1) ? 1 : -1;
}

mcclResult_t mcclLabLaunchesInit(mcclLabComm* comm) {
  struct mcclLabLaunches* l = &comm->launches;
  l->events = (cudaEvent_t*)calloc(MCCL_LAUNCH_RING, sizeof(*l->events));
  l->eventLaunch = (uint64_t*)calloc(MCCL_LAUNCH_RING, sizeof(*l->eventLaunch));
  l->failed = (uint64_t*)calloc(MCCL_LAUNCH_RING, sizeof(*l->failed));
  if (l->events == NULL || l->eventLaunch == NULL || l->failed == NULL) {
    mcclLabLaunchesFree(comm);
    WARN("Out of memory for rank %d's launch ring", comm->rank);
    return mcclSystemError;
  }
  return mcclSuccess;
}

void mcclLabLaunchesFree(mcclLabComm* comm) {
  struct mcclLabLaunches* l = &comm->launches;
  for (int s = 0; l->events && s < MCCL_LAUNCH_RING; s++)
    if (l->events[s]) cudaEventDestroy(l->events[s]);
  free(l->events);
  free(l->eventLaunch);
  free(l->failed);
  memset(l, 0, sizeof(*l));
}

uint64_t mcclLabLaunchNumber(mcclLabComm* comm, cudaStream_t stream) {
  struct mcclLabLaunches* l = &comm->launches;
  if (l->events == NULL) return 0;
  // A launch captured into a graph runs at each replay, which the host never sees end: not numbered.
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &cs) != cudaSuccess) {
    // The query fails where a capture is under way elsewhere (the legacy stream during a global capture):
    // not numbered either, and the error is the query's, so it is not left for the application to find.
    (void)cudaGetLastError();
    cs = cudaStreamCaptureStatusActive;
  }
  if (cs != cudaStreamCaptureStatusNone) return 0;
  // Atomic: the watchdog's thread reads it (mcclLabLaunchEnded); only this thread writes it.
  const uint64_t n = l->last + 1;
  __atomic_store_n(&l->last, n, __ATOMIC_RELAXED);
  return n;
}

void mcclLabLaunchFailed(mcclLabComm* comm, uint64_t n) {
  if (n != 0) __atomic_store_n(&comm->launches.failed[n % MCCL_LAUNCH_RING], n, __ATOMIC_RELEASE);
}

mcclResult_t mcclLabLaunchRecord(mcclLabComm* comm, cudaStream_t stream, uint64_t n, uint64_t opTag) {
  struct mcclLabLaunches* l = &comm->launches;
  if (n == 0) return mcclSuccess;
  const size_t s = n % MCCL_LAUNCH_RING;
  if (l->events[s] == NULL) {
    cudaEvent_t ev;
    CUDACHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    __atomic_store_n(&l->events[s], ev, __ATOMIC_RELEASE);  // the watchdog's thread may look from now on
  }
  CUDACHECK(cudaEventRecord(l->events[s], stream));
  __atomic_store_n(&l->eventLaunch[s], (n & LAUNCH_MASK) << (64 - LAUNCH_BITS) | (opTag & OP_MASK), __ATOMIC_RELEASE);
  return mcclSuccess;
}

int mcclLabLaunchEnded(const mcclLabComm* comm, uint64_t n) {
  const struct mcclLabLaunches* l = &comm->launches;
  if (n == 0 || l->events == NULL) return 1;
  if (n + MCCL_LAUNCH_RING <= __atomic_load_n(&l->last, __ATOMIC_RELAXED))
    return 1;  // its slot went to a later launch: far in the past
  const size_t s = n % MCCL_LAUNCH_RING;
  if (__atomic_load_n(&l->failed[s], __ATOMIC_ACQUIRE) == n) return 1;  // it never started
  const uint64_t word = __atomic_load_n(&l->eventLaunch[s], __ATOMIC_ACQUIRE);
  const int64_t cmp = slotCompare(word, n);
  if (cmp > 0) return 1;  // a later launch took the slot
  cudaEvent_t ev = __atomic_load_n(&l->events[s], __ATOMIC_ACQUIRE);
  return cmp == 0 && ev != NULL && cudaEventQuery(ev) == cudaSuccess;
}

uint64_t mcclLabLaunchOpTag(const mcclLabComm* comm, uint64_t n) {
  const struct mcclLabLaunches* l = &comm->launches;
  if (n == 0 || l->eventLaunch == NULL) return 0;
  const uint64_t word = __atomic_load_n(&l->eventLaunch[n % MCCL_LAUNCH_RING], __ATOMIC_ACQUIRE);
  return slotCompare(word, n) == 0 ? word & OP_MASK : 0;
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
