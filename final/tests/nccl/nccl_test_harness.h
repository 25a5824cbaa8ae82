// The test harness of the programs written only against NCCL's headers (final/tests/nccl/): the repository's
// output format (PASS/FAIL/SKIP lines, then the counts) without linking any of minccl's code, under mpirun, one
// device per rank. A test fails if it fails on any rank; rank 0 prints. C11 and C++ (CUDA) alike; each program
// is one file that includes it once.
#ifndef NCCL_TEST_HARNESS_H_
#define NCCL_TEST_HARNESS_H_

#include <fnmatch.h>
#include <stdint.h>
// MPI's C API in C++ too (Open MPI's and MPICH's C++ bindings are deprecated, and warn).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include <nccl.h>

static int rank, nranks;
// Non-blocking: it does not wait for the NULL stream, so buffers are filled with copies queued on it
// (a NULL-stream cudaMemcpy from pageable memory may land after a kernel queued here).
static cudaStream_t stream;
static char msg[512];  // the current test's failure or skip message
static int status;     // 0 pass, 1 fail, 2 skip

#define FAILF(...)                                                                        \
  do {                                                                                    \
    if (status != 1) snprintf(msg, sizeof(msg), "%s:%d: ", __FILE__, __LINE__);           \
    if (status != 1) snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg), __VA_ARGS__); \
    status = 1;                                                                           \
  } while (0)
#define EXPECT_NCCL(call, want)                                                                                  \
  do {                                                                                                           \
    ncclResult_t r_ = (call);                                                                                    \
    if (r_ != (want)) FAILF("%s: expected %s, got %s", #call, ncclGetErrorString(want), ncclGetErrorString(r_)); \
  } while (0)
#define CHECK_NCCL(call)                                                           \
  do {                                                                             \
    ncclResult_t r_ = (call);                                                      \
    if (r_ != ncclSuccess) {                                                       \
      FAILF("%s: %s (%s)", #call, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
      return;                                                                      \
    }                                                                              \
  } while (0)
#define CHECK_CUDA(call)                              \
  do {                                                \
    cudaError_t e_ = (call);                          \
    if (e_ != cudaSuccess) {                          \
      FAILF("%s: %s", #call, cudaGetErrorString(e_)); \
      return;                                         \
    }                                                 \
  } while (0)
#define SKIPF(...)                           \
  do {                                       \
    snprintf(msg, sizeof(msg), __VA_ARGS__); \
    status = 2;                              \
    return;                                  \
  } while (0)

// A communicator of every rank: rank 0's unique id, broadcast over MPI (as any NCCL program under mpirun).
static ncclResult_t ncclTestCommInit(ncclComm_t* c) {
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  ncclResult_t r = rank == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  return r != ncclSuccess ? r : ncclCommInitRank(c, nranks, id, rank);
}

// bfloat16 on the host, as its 16 bits: rounded to nearest even (as __float2bfloat16), and back.
static uint16_t ncclTestToBf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static float ncclTestFromBf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

struct testCase {
  const char* name;
  void (*fn)(void);
};

static int selected(const char* pattern, const char* full) {
  if (!pattern || !*pattern) return 1;
  char glob[512];
  snprintf(glob, sizeof(glob), strpbrk(pattern, "*?[") ? "%s" : "*%s*", pattern);
  return fnmatch(glob, full, 0) == 0;
}

// Run `cases` (those the first argument or MCCL_TEST_FILTER selects; `--list [np]` lists them without MPI) as
// suite "<suite>@np<N>", then `cleanup` (what the cases left), on every rank. The exit status: 1 if one failed.
static int ncclTestMain(int argc, char** argv, const char* suite, const struct testCase* cases, int ncases,
                        void (*cleanup)(void)) {
  int list = argc > 1 && strcmp(argv[1], "--list") == 0;
  const char* pattern = argc > 1 && !list ? argv[1] : getenv("MCCL_TEST_FILTER");
  char name[128];
  if (list) {
    snprintf(name, sizeof(name), "%s@np%d", suite, argc > 2 ? atoi(argv[2]) : 1);
    for (int i = 0; i < ncases; i++) {
      char full[256];
      snprintf(full, sizeof(full), "%s.%s", name, cases[i].name);
      if (selected(pattern, full)) printf("%s\n", full);
    }
    return 0;
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  setvbuf(stdout, NULL, _IOLBF, 0);
  snprintf(name, sizeof(name), "%s@np%d", suite, nranks);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
    if (rank == 0) printf("SKIP %s (no device)\n0 passed, 0 failed, 1 skipped\n", name);
    MPI_Finalize();
    return 0;
  }
  cudaSetDevice(rank % ndev);
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  int counts[3] = {0, 0, 0};
  for (int i = 0; i < ncases; i++) {
    char full[256];
    snprintf(full, sizeof(full), "%s.%s", name, cases[i].name);
    if (!selected(pattern, full)) continue;
    status = 0;
    msg[0] = '\0';
    double t0 = MPI_Wtime();
    cases[i].fn();
    double ms = (MPI_Wtime() - t0) * 1e3;
    int worst = status == 1 ? 2 : status == 2 ? 1 : 0;  // fail beats skip beats pass
    MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    int mine = status == 1 ? 2 : status == 2 ? 1 : 0;
    int who = worst && mine == worst ? rank : nranks;
    MPI_Allreduce(MPI_IN_PLACE, &who, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    char text[600] = "";
    if (worst) {
      if (rank == who) snprintf(text, sizeof(text), "rank %d of %d: %s", who, nranks, msg);
      MPI_Bcast(text, sizeof(text), MPI_CHAR, who, MPI_COMM_WORLD);
    }
    int st = worst == 2 ? 1 : worst == 1 ? 2 : 0;
    counts[st]++;
    if (rank == 0) {
      if (st == 0)
        printf("PASS %s (%.0f ms)\n", full, ms);
      else
        printf("%s %s (%s)\n", st == 1 ? "FAIL" : "SKIP", full, text);
    }
  }
  if (cleanup) cleanup();
  cudaStreamDestroy(stream);
  if (rank == 0) printf("%d passed, %d failed, %d skipped\n", counts[0], counts[1], counts[2]);
  MPI_Finalize();
  return counts[1] ? 1 : 0;
}

#endif
