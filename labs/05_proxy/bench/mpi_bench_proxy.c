// Lab 05 benchmark (mpirun -np 2; rank r drives device r): send/recv through SHM in the proxy's
// copy-engine mode, one way (rank 0 -> rank 1) and both ways at once, sizes 1 MiB .. 1 GiB (64 MiB on
// the sim), median of repeats after warm-up, in nccl-tests' columns. Beside it, in the same run,
// NCCL's ncclSend/ncclRecv with NCCL_P2P_DISABLE=1 (so NCCL uses its SHM transport) and
// NCCL_NVLS_ENABLE=0, loaded with dlopen(MCCL_NCCL_LIB); skipped on the sim or when NCCL is absent.
//
// Our ops run on the proxy's own streams, so they are timed on the host: from a barrier to the
// moment both ranks' waits returned (the max over ranks), which is when the data has landed. NCCL
// is timed the same way (barrier, group, cudaStreamSynchronize) so the two columns compare.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <mpi.h>
#include "mccl_args.h"
#include "mccl_checks.h"
#include "mccl_nccl.h"
#include "mccl_param.h"
#include "mccl_proxy.h"
#include "mccl_shm.h"
#include "mccl_benchout.h"
#include "mccl_utils.h"

#define MiB (1024UL * 1024UL)

typedef struct {
  mcclNcclApi api;
  mcclNcclComm comm;
  cudaStream_t stream;
} ncclApi;

static int rank, nranks;

static double maxOverRanks(double t) {
  MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return t;
}

// Ours: mode 0 one way (rank 0 sends), mode 1 both ways.
static mcclResult_t timeOurs(mcclProxyState* p, struct mcclConnector* s, struct mcclConnector* r, void* src, void* dst,
                             size_t n, int mode, double* sec) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = mcclClockSec();
  mcclProxyRequest rs = -1, rr = -1;
  if (mode == 1 || rank == 1) MCCLCHECK(mcclProxyPostOp(p, r, dst, n, &rr));
  if (mode == 1 || rank == 0) MCCLCHECK(mcclProxyPostOp(p, s, src, n, &rs));
  if (rs >= 0) MCCLCHECK(mcclProxyWait(p, rs));
  if (rr >= 0) MCCLCHECK(mcclProxyWait(p, rr));
  *sec = maxOverRanks(mcclClockSec() - t0);
  return mcclSuccess;
}

static int timeNccl(ncclApi* a, void* src, void* dst, size_t n, int mode, double* sec) {
  int peer = 1 - rank, e = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = mcclClockSec();
  e |= a->api.groupStart();
  if (mode == 1 || rank == 0) e |= a->api.send(src, n / 4, mcclNcclFloat32, peer, a->comm, a->stream);
  if (mode == 1 || rank == 1) e |= a->api.recv(dst, n / 4, mcclNcclFloat32, peer, a->comm, a->stream);
  e |= a->api.groupEnd();
  if (cudaStreamSynchronize(a->stream) != cudaSuccess) e |= 1;
  *sec = maxOverRanks(mcclClockSec() - t0);
  return e;
}

// dlopen NCCL, or say why not. Environment first: NCCL reads it at init.
static int ncclOpen(ncclApi* a, const char** why) {
  memset(a, 0, sizeof(*a));
  if (strcmp(MCCL_BACKEND_NAME, "sim") == 0) { *why = "sim backend: NCCL needs real GPUs"; return 0; }
  setenv("NCCL_P2P_DISABLE", "1", 1);
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  // Every rank learns whether every rank loaded it, so none waits in a collective init alone.
  int e = mcclNcclOpen(mcclParamNcclLib(), &a->api, why) ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &e, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (e != 0) {
    if (a->api.lib) *why = "NCCL did not load on every rank";
    mcclNcclClose(&a->api);
    return 0;
  }
  mcclNcclUniqueId id;
  memset(&id, 0, sizeof(id));
  e = rank == 0 ? a->api.getUniqueId(&id) : 0;
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  if (e == 0) e = a->api.commInitRank(&a->comm, nranks, id, rank);
  if (e == 0 && cudaStreamCreateWithFlags(&a->stream, cudaStreamNonBlocking) != cudaSuccess) e = 1;
  MPI_Allreduce(MPI_IN_PLACE, &e, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (e != 0) { *why = "NCCL init failed"; return 0; }
  return 1;
}

static long threadCpuUs(pthread_t t) {
  clockid_t c;
  struct timespec ts;
  if (pthread_getcpuclockid(t, &c) != 0 || clock_gettime(c, &ts) != 0) return 0;
  return (long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

// The transports of lab 05's programs: SHM (lab 04's) only; P2P is lab 06's.
static struct mcclTransport* const shmOnly[MCCL_NUM_TRANSPORTS] = {NULL, &mcclShmTransport, NULL};

static mcclResult_t run(void) {
  int sim = strcmp(MCCL_BACKEND_NAME, "sim") == 0;
  int dev = rank;
  CUDACHECK(cudaSetDevice(dev));
  mcclProxyState* p = NULL;
  mcclBootstrap* bs = NULL;
  mcclUniqueId id;
  memset(&id, 0, sizeof(id));
  if (rank == 0) MCCLCHECK(mcclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  MCCLCHECK(mcclProxyCreate(rank, dev, NULL, shmOnly, &p));
  MCCLCHECK(mcclBootstrapInit(&id, rank, 2, dev, mcclProxyGetAddress(p), NULL, &bs));
  MCCLCHECK(mcclProxyInit(p, bs));
  mcclPeerInfo me, peer;
  MCCLCHECK(mcclBootstrapGetPeerInfo(bs, rank, &me));
  MCCLCHECK(mcclBootstrapGetPeerInfo(bs, 1 - rank, &peer));
  struct mcclTransportCtx ctx;
  MCCLCHECK(mcclTransportCtxInit(&ctx, rank, 2, dev));
  ctx.bootstrap = bs;
  ctx.proxyState = p;
  struct mcclConnector s, r;
  MCCLCHECK(mcclConnectorInit(&s, TRANSPORT_SHM, &mcclShmTransport, 1, rank));
  MCCLCHECK(mcclConnectorInit(&r, TRANSPORT_SHM, &mcclShmTransport, 0, rank));
  MCCLCHECK(mcclProxyConnect(p, &s));
  MCCLCHECK(mcclProxyConnect(p, &r));
  struct mcclConnect si, ri, psi, pri;
  MCCLCHECK(mcclShmTransport.send.setup(&ctx, NULL, &me, &peer, &si, &s, 0, 0));
  MCCLCHECK(mcclShmTransport.recv.setup(&ctx, NULL, &me, &peer, &ri, &r, 0, 0));
  MCCLCHECK(mcclBootstrapSend(bs, 1 - rank, 1, &si, sizeof(si)));
  MCCLCHECK(mcclBootstrapSend(bs, 1 - rank, 2, &ri, sizeof(ri)));
  MCCLCHECK(mcclBootstrapRecv(bs, 1 - rank, 1, &psi, sizeof(psi)));
  MCCLCHECK(mcclBootstrapRecv(bs, 1 - rank, 2, &pri, sizeof(pri)));
  MCCLCHECK(mcclShmTransport.send.connect(&ctx, &pri, 1, 0, &s));
  MCCLCHECK(mcclShmTransport.recv.connect(&ctx, &psi, 1, 0, &r));

  size_t maxSize = sim ? 64 * MiB : 1024 * MiB;
  int warm = sim ? 1 : 3, iters = sim ? 3 : 10;
  void *src = NULL, *dst = NULL;
  CUDACHECK(cudaMalloc(&src, maxSize));
  CUDACHECK(cudaMalloc(&dst, maxSize));
  CUDACHECK(cudaMemset(src, 1, maxSize));
  // The memset may return before it lands (NULL stream), and the proxy's copies do not wait for it.
  CUDACHECK(cudaStreamSynchronize(cudaStreamLegacy));
  ncclApi nccl;
  const char* why = "";
  int haveNccl = ncclOpen(&nccl, &why);
  int buffSize = 0;
  MCCLCHECK(mcclShmBuffSize(&buffSize));
  if (rank == 0) {
    printf("# lab 05: SHM send/recv driven by the proxy (copy-engine mode), %s backend, 2 ranks (rank r on device r)\n",
           MCCL_BACKEND_NAME);
    printf("# settings: MCCL_BUFFSIZE=%d MCCL_STEPS=%d (slot %d bytes), warm-up %d, median of %d; host-timed\n",
           buffSize, MCCL_STEPS, buffSize / MCCL_STEPS, warm, iters);
    if (haveNccl) printf("# NCCL: %s with NCCL_P2P_DISABLE=1 NCCL_NVLS_ENABLE=0 (SHM transport)\n", mcclParamNcclLib());
    else printf("# NCCL: skipped (%s)\n", why);
    printf("#%11s %12s %6s %-9s %10s %8s %8s %10s %8s %7s\n", "size", "count", "type", "direction", "time(us)",
           "algbw", "busbw", "nccl(us)", "ncclbw", "ratio");
  }
  for (size_t n = 1 * MiB; n <= maxSize; n *= 2) {
    for (int mode = 0; mode < 2; mode++) {
      double t[16], tn[16];
      for (int i = 0; i < warm + iters; i++) {
        double sec;
        MCCLCHECK(timeOurs(p, &s, &r, src, dst, n, mode, &sec));
        if (i >= warm) t[i - warm] = sec;
      }
      double ours = mcclBenchMedian(t, iters), theirs = 0;
      if (haveNccl) {
        for (int i = 0; i < warm + iters; i++) {
          double sec;
          if (timeNccl(&nccl, src, dst, n, mode, &sec) != 0) { haveNccl = 0; break; }
          if (i >= warm) tn[i - warm] = sec;
        }
        if (haveNccl) theirs = mcclBenchMedian(tn, iters);
      }
      if (rank == 0) {
        double bw = (double)n / ours / 1e9;  // per direction; busbw = algbw for point-to-point
        if (theirs > 0) {
          double nbw = (double)n / theirs / 1e9;
          printf("%12zu %12zu %6s %-9s %10.1f %8.2f %8.2f %10.1f %8.2f %7.2f\n", n, n / 4, "float",
                 mode ? "bothways" : "0->1", ours * 1e6, bw, bw, theirs * 1e6, nbw, bw / nbw);
        } else {
          printf("%12zu %12zu %6s %-9s %10.1f %8.2f %8.2f %10s %8s %7s\n", n, n / 4, "float",
                 mode ? "bothways" : "0->1", ours * 1e6, bw, bw, "-", "-", "-");
        }
        fflush(stdout);
      }
    }
  }
  // An idle proxy's cost, right after the run.
  pthread_t svc, prog;
  MCCLCHECK(mcclProxyGetThreads(p, &svc, &prog));
  struct timespec half = {0, 200 * 1000 * 1000};
  nanosleep(&half, NULL);
  long c0 = threadCpuUs(svc) + threadCpuUs(prog);
  double w0 = mcclClockSec();
  sleep(1);
  double pct = 100.0 * (double)(threadCpuUs(svc) + threadCpuUs(prog) - c0) / ((mcclClockSec() - w0) * 1e6);
  if (rank == 0) printf("# idle proxy (both threads) after the run: %.2f%% of one core\n", pct);
  MPI_Barrier(MPI_COMM_WORLD);
  if (nccl.comm) nccl.api.commDestroy(nccl.comm);
  if (nccl.stream) cudaStreamDestroy(nccl.stream);
  mcclNcclClose(&nccl.api);
  MCCLCHECK(mcclConnectorFree(&s));
  MCCLCHECK(mcclConnectorFree(&r));
  CUDACHECK(cudaFree(src));
  CUDACHECK(cudaFree(dst));
  MCCLCHECK(mcclBootstrapClose(bs));
  MCCLCHECK(mcclProxyDestroy(p));
  return mcclSuccess;
}

int main(int argc, char** argv) {
  mcclArgsCheck(argc, argv, 0, "",
                "Lab 05's benchmark, under mpirun -np 2: send/recv through SHM moved by the proxy, one way and\n"
                "both ways, beside NCCL's SHM path when MCCL_NCCL_LIB (or libnccl.so.2) loads.\n"
                "Settings come from MCCL_* environment variables (docs/parameters.md).");
  setenv("MCCL_BUFFSIZE", "4194304", 0);  // NCCL's 4 MiB unless set: host-driven copies (docs/parameters.md)
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  int ndev = 0, rc = 0;
  if (nranks != 2) {
    if (rank == 0) printf("# lab 05 bench: run with exactly 2 ranks (mpirun -np 2)\n");
  } else if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2) {
    if (rank == 0) printf("# lab 05 bench: skipped, needs 2 CUDA devices\n");
  } else {
    mcclResult_t r = run();
    if (r != mcclSuccess) {
      fprintf(stderr, "rank %d: bench failed: %s\n", rank, mcclGetErrorString(r));
      rc = 1;
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  MPI_Finalize();
  return rc;
}
