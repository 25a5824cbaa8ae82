// Shared by lab 06's kernel tests: one launcher per device (its stream and a host-mapped status word),
// seeded patterns with a poison value they never take, the comparison that names the first bad byte,
// and the step a connection must reach after a message (what SIMPLE and LL each advance per chunk).
#ifndef PRIMS_TEST_UTIL_H_
#define PRIMS_TEST_UTIL_H_

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "mccl_devconn.h"
#include "mccl_prims.h"
#include "mccl_test.h"
#include "mccl_utils.h"

// The sim runs at most MCCL_SIM_MAX_BLOCK_THREADS (64) host threads per block: ask for that there
// (a larger request is reduced and reported); the GPU gets the library's default.
#define PT_ON_SIM MCCL_TEST_ON_SIM
static inline int ptThreads(void) {
  return PT_ON_SIM ? 64 : MCCL_DEV_DEFAULT_NTHREADS;
}

// What the destination holds before a kernel writes it; ptFill never produces this byte.
#define PT_POISON 0xA5

// One kernel's launch context: its device, a non-blocking stream (a cudaMemcpy on the legacy
// stream elsewhere must not wait for a spinning kernel) and a status word in mapped pinned host
// memory: the kernel writes it through statusD, the host reads statusH.
typedef struct {
  int dev;
  cudaStream_t stream;
  int* statusH;
  int* statusD;
} ptLauncher;

static inline mcclResult_t ptStatusCreate(int** host, int** dev) {
  void *h = NULL, *d = NULL;
  if (cudaHostAlloc(&h, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess)
    return mcclUnhandledCudaError;
  if (cudaHostGetDevicePointer(&d, h, 0) != cudaSuccess) {
    cudaFreeHost(h);
    return mcclUnhandledCudaError;
  }
  *(volatile int*)h = mcclDevStatusRunning;
  *host = (int*)h;
  *dev = (int*)d;
  return mcclSuccess;
}

static inline mcclResult_t ptLauncherInit(ptLauncher* l, int dev) {
  memset(l, 0, sizeof(*l));
  l->dev = dev;
  if (cudaSetDevice(dev) != cudaSuccess) return mcclUnhandledCudaError;
  if (cudaStreamCreateWithFlags(&l->stream, cudaStreamNonBlocking) != cudaSuccess) return mcclUnhandledCudaError;
  mcclResult_t r = ptStatusCreate(&l->statusH, &l->statusD);
  if (r != mcclSuccess) {
    cudaStreamDestroy(l->stream);
    l->stream = NULL;
  }
  return r;
}

static inline void ptLauncherFree(ptLauncher* l) {
  if (l->stream) {
    cudaSetDevice(l->dev);
    cudaStreamDestroy(l->stream);
  }
  if (l->statusH) cudaFreeHost(l->statusH);
  memset(l, 0, sizeof(*l));
}

// A work description with the launch's status word and abort flag filled in.
static inline struct mcclDevWork ptWork(int op, int proto, int dtype, int redop, size_t count, int nchannels) {
  struct mcclDevWork w;
  memset(&w, 0, sizeof(w));
  w.op = op;
  w.proto = proto;
  w.dtype = dtype;
  w.redop = redop;
  w.count = count;
  w.nchannels = nchannels;
  return w;
}

static inline mcclResult_t ptLaunch(ptLauncher* l, struct mcclDevWork* w, uint32_t* abortD, int nthreads) {
  w->status = l->statusD;
  w->abortFlag = abortD;
  *(volatile int*)l->statusH = mcclDevStatusRunning;
  if (cudaSetDevice(l->dev) != cudaSuccess) return mcclUnhandledCudaError;
  // The tests fill and poison buffers with cudaMemcpy / cudaMemset on the legacy stream, which a
  // launch on this non-blocking stream is not ordered after (and a pageable cudaMemcpy may return
  // before its data lands): wait for the legacy stream, which waits for no non-blocking stream, so a
  // kernel spinning elsewhere on the device does not block this. (Seen on the H200: a receiver's
  // poison memset landed after the kernel had written the data.)
  if (cudaStreamSynchronize(0) != cudaSuccess) return mcclUnhandledCudaError;
  return mcclDevLaunch(w, nthreads, l->stream);
}

static inline mcclResult_t ptWait(ptLauncher* l, volatile uint32_t* abortH, int64_t timeoutMs) {
  if (cudaSetDevice(l->dev) != cudaSuccess) return mcclUnhandledCudaError;
  return mcclDevWait(l->stream, abortH, l->statusH, timeoutMs);
}

// Wait for n launches that depend on each other; a safety net, not a measurement: if one has not
// finished after timeoutMs (a bug, a lost message) its abort flag is set, which the caller shares
// between the launches, so the others leave too and the test fails instead of hanging.
static inline mcclResult_t ptWaitAll(ptLauncher** ls, int n, volatile uint32_t* abortH, int64_t timeoutMs) {
  mcclResult_t first = mcclSuccess;
  for (int i = 0; i < n; i++) {
    mcclResult_t r = ptWait(ls[i], abortH, timeoutMs);
    if (r != mcclSuccess && first == mcclSuccess) first = r;
  }
  return first;
}

// Seeded bytes (xorshift64*), never PT_POISON.
static inline void ptFill(void* p, size_t n, uint64_t seed) {
  unsigned char* b = (unsigned char*)p;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  size_t i = 0;
  while (i < n) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    uint64_t v = x * 0x2545F4914F6CDD1Dull;
    for (int k = 0; k < 8 && i < n; k++, i++) {
      unsigned char c = (unsigned char)(v >> (8 * k));
      b[i] = c == PT_POISON ? (unsigned char)(c + 1) : c;
    }
  }
}

// Index of the first byte that differs, or -1; *nbad counts all of them.
static inline int64_t ptCompare(const void* got, const void* want, size_t n, size_t* nbad) {
  const unsigned char *g = (const unsigned char*)got, *w = (const unsigned char*)want;
  int64_t first = -1;
  size_t bad = 0;
  if (memcmp(g, w, n) != 0)
    for (size_t i = 0; i < n; i++)
      if (g[i] != w[i]) {
        if (first < 0) first = (int64_t)i;
        bad++;
      }
  if (nbad) *nbad = bad;
  return first;
}

// Where a connection's step must be after one message of `bytes` bytes split over nch channels,
// channel c (as kernels.cuh cuts it: parts of whole 512-byte units, chunk after chunk): SIMPLE first
// rounds the step up to a whole chunk, then moves chunkSteps per chunk (of MCCL_SIMPLE_SLICE_DATA bytes a
// slice); LL one step per slot.
static inline uint64_t ptStepAfter(uint64_t step, int proto, const struct mcclConnInfo* conn, size_t bytes, int nch,
                                   int c, int chunkSteps) {
  uint64_t per = ((bytes + nch - 1) / nch + 511) / 512 * 512;
  uint64_t lo = (uint64_t)c * per < bytes ? (uint64_t)c * per : bytes;
  uint64_t hi = (uint64_t)(c + 1) * per < bytes ? (uint64_t)(c + 1) * per : bytes;
  uint64_t part = hi - lo;
  if (proto == MCCL_PROTO_LL) {
    uint64_t chunk = (uint64_t)conn->llStepSize / 2;  // 8 data bytes per 16-byte line
    return step + (part + chunk - 1) / chunk;
  }
  if (proto == MCCL_PROTO_LL128) {
    // Whole 2 KiB warp slices per slot, 120 data bytes per 128-byte line.
    uint64_t chunk = (uint64_t)conn->ll128StepSize / MCCL_LL128_SLICE_BYTES * (MCCL_LL128_SLICE_BYTES / 128 * 120);
    return step + (part + chunk - 1) / chunk;
  }
  uint64_t cs = (uint64_t)chunkSteps;
  // Slices of the default sliceSteps slots, each less the room a shifted start may take.
  const int ss = chunkSteps < MCCL_DEV_DEFAULT_SLICESTEPS ? chunkSteps : MCCL_DEV_DEFAULT_SLICESTEPS;
  uint64_t chunk = (uint64_t)MCCL_SIMPLE_SLICE_DATA(conn->stepSize * ss) * (cs / (uint64_t)ss);
  return ((step + cs - 1) & ~(cs - 1)) + cs * ((part + chunk - 1) / chunk);
}

// "Nothing left in /dev/shm", measured on this process's own files: other processes on the machine
// (other tests, other users) create and remove entries at any time, so a count of the whole directory
// races with them. Record the /dev/shm files this process maps while its connections are up; after
// they are freed, none of them may still exist (an unlinked file shows as "(deleted)" and is gone).
// Connections between processes use cuMem host memory passed as fds, not /dev/shm files: there the
// set is empty unless something falls back to files.
#define PT_MAX_SHM 64
typedef struct {
  int n;
  char names[PT_MAX_SHM][256];
} ptShmSet;

static inline void ptShmRecord(ptShmSet* s) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == NULL) return;
  char line[512];
  while (fgets(line, sizeof(line), f)) {
    char* path = strstr(line, " /dev/shm/");
    if (path == NULL) continue;
    path++;
    path[strcspn(path, " \n")] = '\0';  // drop the newline and a " (deleted)" suffix
    int seen = 0;
    for (int i = 0; i < s->n && !seen; i++) seen = strcmp(s->names[i], path) == 0;
    if (!seen && s->n < PT_MAX_SHM) snprintf(s->names[s->n++], sizeof(s->names[0]), "%s", path);
  }
  fclose(f);
}

// How many recorded files still exist, leaving out those of `base` (recorded before the connections
// were made: e.g. Open MPI's own segments); the first one's name in *left (when not NULL).
static inline int ptShmLeft(const ptShmSet* s, const ptShmSet* base, const char** left) {
  int n = 0;
  for (int i = 0; i < s->n; i++) {
    int old = 0;
    for (int j = 0; base && j < base->n && !old; j++) old = strcmp(base->names[j], s->names[i]) == 0;
    if (!old && access(s->names[i], F_OK) == 0 && n++ == 0 && left) *left = s->names[i];
  }
  return n;
}

#endif
