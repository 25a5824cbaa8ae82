// final/ benchmark: nccl-tests' all_reduce_perf for libminccl, written against minccl.h alone, with
// NCCL's ncclAllReduce timed in the same run on the same buffers (--nccl, dlopen of MCCL_NCCL_LIB).
// One process per device under mpirun (nccl-tests' -g 1), or one process driving -g N devices
// (mcclCommInitRank of each in a group, the calls of one iteration in a group), or both.
//
// The flags, the table, the check, the timing, the CSV/JSON files, the progress lines and the closing
// summary are those of lab 07's benchmark: both run the driver of
// labs/07_allreduce/include/mccl_allreduce_bench.h; this file gives it minccl.h's allreduce.
//   -R 2 (the default): buffers from mcclMemAlloc, registered with mcclCommWindowRegister
//        (MCCL_WIN_COLL_SYMMETRIC), so the library may pick its symmetric algorithms; with --nccl
//        NCCL also gets a nccl-sym row on ncclMemAlloc buffers registered as its symmetric windows.
//   -R 0: buffers from cudaMalloc, nothing registered (the ring only).
//   --hosts N: the processes pose as N hosts (MCCL_HOSTID and NCCL_HOSTID by block of ranks), so the
//        ring's edges between them take lab 08's NET transport (and NCCL its network): the net path,
//        timed on one machine.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "mccl_allreduce_bench.h"
#include "mccl_args.h"
#include "minccl.h"

#define SLACK_BYTES 64  // the driver checks this much past the end of every result

static const char* const kOptions[] = {"--nccl", "--hosts=", "--oop", NULL};

static const char* kHelp =
    "libminccl's mcclAllReduce as nccl-tests' all_reduce_perf measures it, through minccl.h alone: under mpirun\n"
    "-np N (one device per process, -g 1), or one process driving -g N devices, or both. Columns as\n"
    "nccl-tests'; with --nccl, NCCL's ncclAllReduce (MCCL_NCCL_LIB, NCCL_NVLS_ENABLE=0) on the same buffers\n"
    "first at each size, and ratio = NCCL's best time / ours (> 1: minccl is faster).\n"
    "Defaults in brackets are the GPU's / the sim's.\n"
    "  -b, -e BYTES   smallest, largest size [8, 512M / 8, 32K]\n"
    "  -f N           multiply the size by N between rows [2 / 8]\n"
    "  -n N, -w N     timed calls per row (time per call is reported) and warm-up calls [50, 5 / 2, 1]\n"
    "  -c N           check the results with N calls per row and placement, outside the timing; 0: no check [1]\n"
    "  -d TYPE        int8 uint8 int32 (int) uint32 int64 uint64 float16 (half) float32 (float) float64\n"
    "                 (double) bfloat16, or all [float32]\n"
    "  -o OP          sum prod max min avg, or all [sum]\n"
    "  -G N           capture the -n calls in a CUDA graph and replay it N times (cuda backend, -g 1) [0: eager]\n"
    "  -R 0|2         2: mcclMemAlloc buffers registered as symmetric windows (mcclCommWindowRegister), and\n"
    "                 with --nccl a nccl-sym row (ncclMemAlloc + ncclCommWindowRegister); 0: cudaMalloc [2]\n"
    "  -g N           devices per process, 1..8 [1]\n"
    "  --nccl         also time NCCL's ncclAllReduce (not on the sim)\n"
    "  --hosts N      pose the processes as N hosts, ranks in N contiguous blocks (MCCL_HOSTID and, for --nccl,\n"
    "                 NCCL_HOSTID): edges between them use the NET transport (lab 08's plugin over Open MPI, which\n"
    "                 then runs at MPI_THREAD_MULTIPLE) and NCCL its network; 2 .. processes [off]\n"
    "  --oop          out-of-place calls only: for an algorithm that refuses in-place buffers (MCCL_ALGO=ce)\n"
    "  --csv FILE     also write every row and placement to FILE as CSV (metadata as '# key: value' lines)\n"
    "  --json FILE    the same as one JSON object {\"metadata\": {...}, \"rows\": [...]} (make plot reads both)\n"
    "  --progress     a line per size on stderr (the default when stderr is a terminal)\n"
    "The last lines summarise a few sizes (the sweep's ends, 8K, 2M, 32M, 512M): minccl's time and busbw, NCCL's\n"
    "best, and the ratio.\n"
    "Exit status: 0; 1 when a result was wrong or a call failed; 2 for a bad argument.";

static mcclArBenchOpts bo;
static int nLocal;
static int poseHosts;  // --hosts N, 0: off
static mcclComm_t comms[MCCL_ARB_MAX_LOCAL];

static mcclResult_t enqueue(void* ctx, const mcclArBenchTarget* t, int local, const void* src, void* dst, size_t count,
                            int dtype, int op, cudaStream_t stream) {
  (void)ctx, (void)t;
  return mcclAllReduce(src, dst, count, (mcclDataType_t)dtype, (mcclRedOp_t)op, comms[local], stream);
}

static mcclResult_t groupStart(void* ctx) {
  (void)ctx;
  return mcclGroupStart();
}

static mcclResult_t groupEnd(void* ctx) {
  (void)ctx;
  return mcclGroupEnd();
}

static void abortComms(void* ctx) {
  (void)ctx;
  for (int l = 0; l < nLocal; l++)
    if (comms[l]) mcclCommAbort(comms[l]);
  memset(comms, 0, sizeof(comms));
}

#define CHECK(call)                                                                                                  \
  do {                                                                                                               \
    mcclResult_t r_ = (call);                                                                                        \
    if (r_ != mcclSuccess) {                                                                                         \
      fprintf(stderr, "rank %d: %s failed: %s (%s)\n", rank, #call, mcclGetErrorString(r_), mcclGetLastError(NULL)); \
      return r_;                                                                                                     \
    }                                                                                                                \
  } while (0)
#define CUDA(call)                                                                      \
  do {                                                                                  \
    cudaError_t e_ = (call);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, cudaGetErrorString(e_)); \
      return mcclUnhandledCudaError;                                                    \
    }                                                                                   \
  } while (0)

static mcclResult_t run(int argc, char** argv, int rank, int nprocs, int localRank, int ndev, long* wrong) {
  int nranks = nprocs * nLocal, version = 0;
  mcclArBenchSetup s = {
      .program = "final allreduce_perf",
      .nLocal = nLocal,
      .ops = {.enqueue = enqueue, .groupStart = groupStart, .groupEnd = groupEnd, .abort = abortComms},
      .useNccl = mcclArgsOpt(argc, argv, "--nccl") != NULL,
      .ncclSameBuffers = 1,
      .ncclWhyNot = "--nccl not given",
      .netMode = poseHosts > 0,
      .oopOnly = mcclArgsOpt(argc, argv, "--oop") != NULL,
      .summary = 1,
      .nOurs = 1};
  mcclArBenchTarget* t = &s.ours[0];
  *t = (mcclArBenchTarget){.lib = "minccl", .variant = "minccl"};
  mcclWindow_t wins[2][MCCL_ARB_MAX_LOCAL] = {{NULL}};
  size_t allocBytes = bo.maxBytes + SLACK_BYTES;  // -e rounded down to whole elements of any type fits
  for (int l = 0; l < nLocal; l++) s.devs[l] = (localRank * nLocal + l) % ndev;

  // The communicators: rank r * nLocal + l on device devs[l], created together in a group.
  mcclUniqueId id;
  memset(&id, 0, sizeof(id));
  if (rank == 0) CHECK(mcclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  CHECK(mcclGroupStart());
  for (int l = 0; l < nLocal; l++) {
    CUDA(cudaSetDevice(s.devs[l]));
    CHECK(mcclCommInitRank(&comms[l], nranks, id, rank * nLocal + l));
  }
  CHECK(mcclGroupEnd());
  for (int l = 0; l < nLocal; l++) {
    CUDA(cudaSetDevice(s.devs[l]));
    CUDA(cudaStreamCreateWithFlags(&s.streams[l], cudaStreamNonBlocking));
    if (bo.reg == 2) {
      CHECK(mcclMemAlloc(&t->send[l], allocBytes));
      CHECK(mcclMemAlloc(&t->recv[l], allocBytes));
    } else {
      CUDA(cudaMalloc(&t->send[l], allocBytes));
      CUDA(cudaMalloc(&t->recv[l], allocBytes));
    }
  }
  if (bo.reg == 2) {  // collective: every local communicator's in one group
    CHECK(mcclGroupStart());
    for (int l = 0; l < nLocal; l++) {
      CHECK(mcclCommWindowRegister(comms[l], t->send[l], allocBytes, &wins[0][l], MCCL_WIN_COLL_SYMMETRIC));
      CHECK(mcclCommWindowRegister(comms[l], t->recv[l], allocBytes, &wins[1][l], MCCL_WIN_COLL_SYMMETRIC));
    }
    CHECK(mcclGroupEnd());
  }
  s.metaKey[0] = "buffers";
  s.metaValue[0] = bo.reg == 2 ? "mcclMemAlloc + mcclCommWindowRegister (symmetric)" : "cudaMalloc";
  s.nMeta = 1;
  char hostsText[64];
  if (poseHosts) {
    snprintf(hostsText, sizeof(hostsText), "%d, posed (MCCL_HOSTID, NCCL_HOSTID)", poseHosts);
    s.metaKey[s.nMeta] = "hosts";
    s.metaValue[s.nMeta++] = hostsText;
  }

  CHECK(mcclGetVersion(&version));
  if (rank == 0) {
    printf("# final allreduce_perf: libminccl %d, %s backend, %d ranks (%d process%s x %d device%s), buffers: %s\n",
           version, MCCL_BACKEND_NAME, nranks, nprocs, nprocs == 1 ? "" : "es", nLocal, nLocal == 1 ? "" : "s",
           s.metaValue[0]);
    if (poseHosts)
      printf("# posed as %d hosts (MCCL_HOSTID, NCCL_HOSTID): the ring edges between them use minccl's NET transport "
             "(plugin %s)\n",
             poseHosts, getenv("MCCL_NET_PLUGIN") ? getenv("MCCL_NET_PLUGIN") : "libmccl-net-mpi.so");
    fflush(stdout);
  }
  CHECK(mcclArBenchRun(&s, &bo, argc, argv, wrong));

  MPI_Barrier(MPI_COMM_WORLD);  // every rank is done with the peers' buffers before they go
  for (int l = 0; l < nLocal; l++) {
    CUDA(cudaSetDevice(s.devs[l]));
    for (int b = 0; b < 2; b++)
      if (wins[b][l]) CHECK(mcclCommWindowDeregister(comms[l], wins[b][l]));
    if (bo.reg == 2) {
      CHECK(mcclMemFree(t->send[l]));
      CHECK(mcclMemFree(t->recv[l]));
    } else {
      CUDA(cudaFree(t->send[l]));
      CUDA(cudaFree(t->recv[l]));
    }
    CUDA(cudaStreamDestroy(s.streams[l]));
    CHECK(mcclCommDestroy(comms[l]));
    comms[l] = NULL;
  }
  return mcclSuccess;
}

int main(int argc, char** argv) {
  const mcclArBenchSpec spec = {.program = "final allreduce_perf",
                                .extraOptions = kOptions,
                                .usage = "[--nccl] [--hosts N] [--oop]",
                                .help = kHelp,
                                .maxLocal = MCCL_ARB_MAX_LOCAL};
  mcclArBenchParse(argc, argv, &spec, &bo);
  nLocal = bo.nLocal;
  poseHosts = (int)mcclArgsOptInt(argc, argv, "--hosts", 0, 2, 4096);
  // The net plugin is called from minccl's proxy thread while this thread calls MPI too.
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, poseHosts ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
  int rank = 0, nprocs = 1, localRank = 0, ndev = 0, rc = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (poseHosts && (poseHosts > nprocs || provided < MPI_THREAD_MULTIPLE)) {
    if (rank == 0 && poseHosts > nprocs)
      fprintf(stderr, "allreduce_perf: --hosts %d: more hosts than the %d process%s (one host holds whole processes)\n",
              poseHosts, nprocs, nprocs == 1 ? "" : "es");
    else if (rank == 0)
      fprintf(stderr,
              "allreduce_perf: --hosts: the net plugin calls MPI from minccl's proxy thread, which needs "
              "MPI_THREAD_MULTIPLE; this MPI library provides level %d\n",
              provided);
    MPI_Finalize();
    return 2;
  }
  if (poseHosts) {  // before the first call that reads the host identity (mcclGetUniqueId)
    char id[64];
    snprintf(id, sizeof(id), "allreduce_perf-host-%d", (int)((long long)rank * poseHosts / nprocs));
    setenv("MCCL_HOSTID", id, 1);
    setenv("NCCL_HOSTID", id, 1);
  }
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &localRank);
  MPI_Comm_free(&local);
  long wrong = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
    if (rank == 0) printf("# allreduce_perf: skipped, no CUDA device\n");
  } else {
    mcclResult_t r = run(argc, argv, rank, nprocs, localRank, ndev, &wrong);
    rc = mcclArBenchExitStatus("allreduce_perf", rank, r, wrong);
  }
  MPI_Finalize();
  return rc;
}
