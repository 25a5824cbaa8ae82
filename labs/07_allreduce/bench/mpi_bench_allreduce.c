// Lab 07 benchmark: allreduce_perf's table for lab 07's algorithms beside NCCL's ncclAllReduce.
// mpirun -np N, one process per GPU (rank r on local device r, as nccl-tests -g 1).
//
// The flags, the table, NCCL's rows, the check, the timing, the files and the summary are the
// driver's that final's allreduce_perf also uses (include/mccl_allreduce_bench.h,
// benchlib/mpi_allreduce_bench.c); this file gives it lab 07's communicator and algorithms.
//
// Rows. For each size (a line each, printed as it is measured): NCCL on cudaMalloc buffers, NCCL on
// symmetric windows (ncclMemAlloc + ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC), as nccl-tests
// -R 2; where the library has them), then each of our algorithms: the ring (protocol as the tuning
// table picks it), one-shot, two-shot and "auto" (the table's choice, named in the row). Ours run on
// mcclMemAlloc buffers registered as lab 07 windows. Columns as nccl-tests': size, count, type,
// redop, root, then out-of-place and in-place time (us per call), algbw = bytes / time, busbw = algbw
// * 2(n-1)/n and #wrong; then ratio = NCCL's best time (of its rows) / ours, per placement (> 1: ours
// is faster). An algorithm is chosen per row through MCCL_ALGO / MCCL_PROTO (set, then
// mcclParamResetAll), so each row is exactly what a user forcing it would get.
//
// SHM. Our connections read MCCL_P2P_DISABLE and NCCL reads NCCL_P2P_DISABLE once per process, at
// the first communicator, so the SHM path is timed in a run of its own: --shm sets both before anything
// starts. The symmetric algorithms map peers' memory directly (NVLink), whatever the ring's
// transport, so an SHM run times the ring only (unless --algo names others).
//
// --tune times ring/LL, ring/LL128, ring/SIMPLE, one-shot and two-shot at 8 B .. 64 MiB (out-of-place, NCCL
// left out) and prints the fastest per size and the cut-over points for src/tuning.def's table. The table
// has no LL128 row until these runs place one: --tune prints the sizes where LL128 is the ring's fastest
// protocol, for that row (ring/LL128 runs where every ring edge is P2P over NVLink, else its column is "-").
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <mpi.h>
#include "mccl_alloc.h"
#include "mccl_collectives.h"
#include "mccl_allreduce_bench.h"
#include "mccl_args.h"
#include "mccl_checks.h"
#include "mccl_param.h"

#define KiB (1024UL)
#define MiB (1024UL * 1024UL)
#define SLACK_BYTES 64  // the driver checks this much past the end of every result

enum { kRing, kOneshot, kTwoshot, kAuto, kRingLL, kRingSimple, kOneshotLL, kOneshotSimple, kRingLL128, kNumVariants };
static const struct {
  const char* name;   // --algo spelling
  const char* algo;   // MCCL_ALGO, NULL: the table
  const char* proto;  // MCCL_PROTO, NULL: the table
} kVariant[kNumVariants] = {{"ring", "ring", NULL},          {"oneshot", "oneshot", NULL},
                            {"twoshot", "twoshot", NULL},    {"auto", NULL, NULL},
                            {"ring-ll", "ring", "ll"},       {"ring-simple", "ring", "simple"},
                            {"oneshot-ll", "oneshot", "ll"}, {"oneshot-simple", "oneshot", "simple"},
                            {"ring-ll128", "ring", "ll128"}};

static struct {
  int nChannels, useNccl, shm, tune;
  int variants[kNumVariants], nVariants, algoGiven;
} opt;
static mcclArBenchOpts bo;  // the common flags

static int rank, nranks, sim;

static const char* const kOptions[] = {"--algo=", "--channels=", "--no-nccl", "--shm", "--tune", NULL};

static const char* kHelp =
    "Lab 07's allreduce beside NCCL's ncclAllReduce (MCCL_NCCL_LIB, NCCL_NVLS_ENABLE=0), under mpirun -np N\n"
    "(one GPU per process). Columns as nccl-tests; ratio = NCCL's best time / ours (> 1: ours is faster).\n"
    "Defaults in brackets are the GPU's / the sim's.\n"
    "  -b, -e BYTES   smallest, largest size [8, 512M / 8, 32K; --tune: 8, 64M]\n"
    "  -f N           multiply the size by N between rows [2 / 8]\n"
    "  -n N, -w N     timed calls per row (time per call is reported) and warm-up calls [50, 5 / 2, 1]\n"
    "  -c N           check the results with N calls per row and placement, outside the timing; 0: no check [1]\n"
    "  -d TYPE        int8 uint8 int32 (int) uint32 int64 uint64 float16 (half) float32 (float) float64\n"
    "                 (double) bfloat16, or all [float32]\n"
    "  -o OP          sum prod max min avg, or all [sum]\n"
    "  -G N           capture the -n calls in a CUDA graph and replay it N times (cuda backend only) [0: eager]\n"
    "  -R 0|2         2: also time NCCL on ncclMemAlloc buffers registered as symmetric windows [2]\n"
    "  --algo LIST    comma list of ours: ring oneshot twoshot auto ring-ll ring-simple ring-ll128 oneshot-ll\n"
    "                 oneshot-simple (oneshot-simple: 2 ranks; ring-ll128: P2P over NVLink) [ring,oneshot,twoshot,\n"
    "                 auto; --shm: ring; --tune: ring-ll,ring-ll128,ring-simple,oneshot-ll,oneshot-simple,twoshot]\n"
    "  --channels N   our communicator's channels, 1..64 [MCCL_NCHANNELS]\n"
    "  --no-nccl      do not load NCCL\n"
    "  --shm          MCCL_P2P_DISABLE=1 and NCCL_P2P_DISABLE=1 before init: a run over SHM\n"
    "  --tune         time every algorithm (out-of-place, no NCCL) and print the fastest per size and the\n"
    "                 cut-over points for src/tuning.def\n"
    "  --csv FILE     also write every row and placement to FILE as CSV (metadata as '# key: value' lines)\n"
    "  --json FILE    the same as one JSON object {\"metadata\": {...}, \"rows\": [...]} (make plot reads both)\n"
    "  --progress     a line per size on stderr (the default when stderr is a terminal)\n"
    "The last lines summarise a few sizes (the sweep's ends, 8K, 2M, 32M, 512M): our best row's time and busbw,\n"
    "NCCL's best, and the ratio. Eager launches, a CUDA graph (-G 1) and SHM (--shm) are each a run of their own.";

static void parseAlgos(const char* s) {
  char buf[256], msg[400];
  snprintf(buf, sizeof(buf), "%s", s);
  opt.nVariants = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int v = -1;
    for (int i = 0; i < kNumVariants; i++)
      if (strcasecmp(tok, kVariant[i].name) == 0) v = i;
    if (v < 0) {
      snprintf(msg, sizeof(msg),
               "--algo: '%s' is not one of ring, oneshot, twoshot, auto, ring-ll, ring-simple, ring-ll128, "
               "oneshot-ll, oneshot-simple",
               tok);
      mcclArgsFail(msg);
    }
    int dup = 0;
    for (int i = 0; i < opt.nVariants; i++) dup |= opt.variants[i] == v;
    if (!dup) opt.variants[opt.nVariants++] = v;
  }
  if (opt.nVariants == 0) mcclArgsFail("--algo: the list is empty");
}

static void parseOptions(int argc, char** argv) {
  const mcclArBenchSpec spec = {.program = "lab 07 mpi_bench_allreduce",
                                .extraOptions = kOptions,
                                .usage = "[--algo LIST] [--channels N] [--no-nccl] [--shm] [--tune]",
                                .help = kHelp};
  mcclArBenchParse(argc, argv, &spec, &bo);
  opt.tune = mcclArgsOpt(argc, argv, "--tune") != NULL;
  opt.shm = mcclArgsOpt(argc, argv, "--shm") != NULL;
  if (opt.tune && mcclArgsOpt(argc, argv, "-e") == NULL) bo.maxBytes = sim ? 32 * KiB : 64 * MiB;
  if (bo.minBytes > bo.maxBytes) {
    char msg[200];
    snprintf(msg, sizeof(msg), "-b %zu is larger than -e %zu", bo.minBytes, bo.maxBytes);
    mcclArgsFail(msg);
  }
  opt.nChannels = (int)mcclArgsOptInt(argc, argv, "--channels", 0, 1, MCCL_SIGNAL_MAX_BLOCKS);
  opt.useNccl = mcclArgsOpt(argc, argv, "--no-nccl") == NULL && !opt.tune;
  if (opt.tune && bo.graph) mcclArgsFail("--tune times eager launches; leave -G out");
  const char* s = mcclArgsOpt(argc, argv, "--algo");
  opt.algoGiven = s != NULL;
  if (s) {
    parseAlgos(s);
  } else if (opt.tune) {
    parseAlgos("ring-ll,ring-ll128,ring-simple,oneshot-ll,oneshot-simple,twoshot");
  } else if (opt.shm) {
    parseAlgos("ring");
  } else {
    parseAlgos("ring,oneshot,twoshot,auto");
  }
}

// ---- lab 07's allreduce, as the driver calls it ----------------------------------------------------

static struct {
  mcclLabComm* comm;
  int haveWin, symLevel;
} g;

static mcclResult_t enqueue(void* ctx, const mcclArBenchTarget* t, int local, const void* src, void* dst, size_t count,
                            int dtype, int op, cudaStream_t stream) {
  (void)ctx, (void)t, (void)local;
  return mcclLabAllReduce(src, dst, count, (mcclDataType_t)dtype, (mcclRedOp_t)op, g.comm, stream);
}

// MCCL_ALGO / MCCL_PROTO for a variant of ours; the parameters are read again at the next call.
// The driver calls it with the stream drained and every rank between barriers.
static void beginRow(void* ctx, const mcclArBenchTarget* t) {
  (void)ctx;
  int v = t->id;
  if (kVariant[v].algo)
    setenv("MCCL_ALGO", kVariant[v].algo, 1);
  else
    unsetenv("MCCL_ALGO");
  if (kVariant[v].proto)
    setenv("MCCL_PROTO", kVariant[v].proto, 1);
  else
    unsetenv("MCCL_PROTO");
  mcclParamResetAll();
}

// Whether a variant of ours can run at this size (so a forced algorithm is never refused mid-row).
static int variantRuns(void* ctx, const mcclArBenchTarget* t, size_t bytes) {
  (void)ctx;
  const int ll = mcclLabOneShotFits(nranks, bytes, MCCL_PROTO_LL);
  const int simple = mcclLabOneShotFits(nranks, bytes, MCCL_PROTO_SIMPLE);
  if (t->id == kOneshot) return g.symLevel >= 1 && (ll || simple);
  if (t->id == kOneshotLL) return g.symLevel >= 1 && ll;
  if (t->id == kOneshotSimple) return g.symLevel >= 1 && simple;
  if (t->id == kTwoshot) return g.symLevel == 2 && nranks <= MCCL_SYM_MAX_RANKS;
  if (t->id == kRingLL128) return g.comm->ll128Ok;  // refused where a ring edge has no LL128 FIFO
  return 1;
}

static const char* algoName(int a) {
  return a == MCCL_ALGO_ONESHOT ? "oneshot" : a == MCCL_ALGO_TWOSHOT ? "twoshot" : "ring";
}

// The row's label: what runs (the table's or the forced algorithm, with the protocol where it has a choice).
static void rowLabel(void* ctx, const mcclArBenchTarget* t, size_t bytes, char* buf, size_t len) {
  (void)ctx;
  int a = MCCL_ALGO_RING, p = MCCL_PROTO_SIMPLE;
  if (mcclLabSelectAlgorithm(mcclFuncAllReduce, nranks, bytes, g.symLevel, &a, &p) != mcclSuccess) {
    snprintf(buf, len, "%s?", kVariant[t->id].name);
    return;
  }
  const char* proto = mcclProtoName(p);
  const int showProto = a == MCCL_ALGO_RING || (a == MCCL_ALGO_ONESHOT && p == MCCL_PROTO_SIMPLE);
  snprintf(buf, len, "%s%s%s%s", t->id == kAuto ? "auto:" : "", algoName(a), showProto ? "/" : "",
           showProto ? proto : "");
}

static void abortComm(void* ctx) {
  (void)ctx;
  if (g.comm) mcclLabCommAbort(g.comm);
}

// ---- --tune ---------------------------------------------------------------------------------------

static struct {
  size_t bytes;
  double sec[kNumVariants];  // out-of-place seconds per variant (rows with wrong data: 0)
} tune[MCCL_ARB_MAX_SIZES];
static int nTune, tuneDone;

// The first (type, operation) only: the sizes of the next one start again from -b.
static void tuneRow(void* ctx, const mcclArBenchTarget* t, size_t bytes, const mcclArBenchRow* r) {
  (void)ctx;
  if (nTune > 0 && bytes < tune[nTune - 1].bytes) tuneDone = 1;
  if (tuneDone) return;
  if (nTune == 0 || tune[nTune - 1].bytes != bytes) {
    if (nTune == MCCL_ARB_MAX_SIZES) return;
    memset(&tune[nTune], 0, sizeof(tune[nTune]));
    tune[nTune++].bytes = bytes;
  }
  tune[nTune - 1].sec[t->id] = r->wrong[0] <= 0 ? r->sec[0] : 0;
}

static void tuneSummary(void) {
  if (rank != 0) return;
  printf("\n# ==== --tune: out-of-place us per call, %d ranks, %d channels (rows with wrong data left out)\n", nranks,
         g.comm->nChannels);
  printf("#%11s", "size");
  for (int i = 0; i < opt.nVariants; i++) printf(" %12s", kVariant[opt.variants[i]].name);
  printf("  fastest\n");
  size_t lastOne = 0, lastOneSimple = 0, lastTwo = 0, lastLL = 0, firstLL128 = 0, lastLL128 = 0, lastBare = 0;
  for (int s = 0; s < nTune; s++) {
    printf("%12zu", tune[s].bytes);
    int best = -1;
    for (int i = 0; i < opt.nVariants; i++) {
      int v = opt.variants[i];
      double t = tune[s].sec[v];
      if (t > 0)
        printf(" %12.2f", t * 1e6);
      else
        printf(" %12s", "-");
      if (t > 0 && (best < 0 || t < tune[s].sec[best])) best = v;
    }
    printf("  %s\n", best < 0 ? "-" : kVariant[best].name);
    if (best == kOneshot || best == kOneshotLL) lastOne = tune[s].bytes;
    if (best == kOneshotSimple) lastOneSimple = tune[s].bytes;
    if (best == kTwoshot) lastTwo = tune[s].bytes;
    double ll = tune[s].sec[kRingLL], simple = tune[s].sec[kRingSimple], ll128 = tune[s].sec[kRingLL128];
    // One-shot with LL against the ring alone (two-shot left out): the row's oneShotBareMax.
    double one = tune[s].sec[kOneshotLL] > 0 ? tune[s].sec[kOneshotLL] : tune[s].sec[kOneshot];
    if (one > 0 && (ll <= 0 || one < ll) && (simple <= 0 || one < simple) && (ll128 <= 0 || one < ll128))
      lastBare = tune[s].bytes;
    if (ll > 0 && (simple <= 0 || ll < simple)) lastLL = tune[s].bytes;
    if (ll128 > 0 && (ll <= 0 || ll128 < ll) && (simple <= 0 || ll128 < simple)) {
      if (firstLL128 == 0) firstLL128 = tune[s].bytes;
      lastLL128 = tune[s].bytes;
    }
  }
  const char* suffix = nranks <= 2 ? "2R" : nranks <= 4 ? "4R" : "8R";
  char a[32], b[32], c[32];
  printf("# cut-over points (largest size where each is fastest; check the table for a non-monotonic middle):\n");
  printf("#   MCCL_TUNE_ONESHOT_MAX_%s = %zu (%s)\n", suffix, lastOne, mcclArBenchFmtSize(lastOne, a, sizeof(a)));
  if (nranks == 2) {
    if (lastOneSimple < lastOne) lastOneSimple = lastOne;  // never fastest: its range is empty
    printf("#   MCCL_TUNE_ONESHOT_SIMPLE_MAX_2R = %zu (%s)\n", lastOneSimple,
           mcclArBenchFmtSize(lastOneSimple, b, sizeof(b)));
    if (lastTwo < lastOneSimple) lastTwo = lastOneSimple;
  }
  if (lastTwo < lastOne) lastTwo = lastOne;  // two-shot never fastest: its range is empty
  printf(
      "#   MCCL_TUNE_TWOSHOT_MAX_%s = %zu (%s)%s\n", suffix, lastTwo, mcclArBenchFmtSize(lastTwo, b, sizeof(b)),
      nTune && lastTwo && lastTwo == tune[nTune - 1].bytes ? " (fastest up to the largest size tuned: raise -e)" : "");
  if (lastBare < lastOne) lastBare = lastOne;
  printf(
      "#   MCCL_TUNE_ONESHOT_BARE_MAX_%s = %zu (%s): one-shot (LL) against the ring alone, for buffers outside "
      "windows\n",
      suffix, lastBare, mcclArBenchFmtSize(lastBare, c, sizeof(c)));
  // Up to 4 ranks the LL cut-over has a row of its own; beyond, one value serves (MCCL_TUNE_LL_MAX).
  printf("#   MCCL_TUNE_LL_MAX%s%s = %zu (%s)\n", nranks <= 4 ? "_" : "", nranks <= 4 ? suffix : "", lastLL,
         mcclArBenchFmtSize(lastLL, c, sizeof(c)));
  // AllReduce's ring has no LL128 row in tuning.def (only AllGather's): where it won, for such a row.
  if (!g.comm->ll128Ok)
    printf("#   ring/LL128: not run (a ring edge is not P2P over NVLink)\n");
  else if (firstLL128 == 0)
    printf("#   ring/LL128: never the ring's fastest protocol here\n");
  else
    printf(
        "#   ring/LL128: the ring's fastest protocol from %zu (%s) to %zu (%s) bytes (no allreduce row in "
        "tuning.def)\n",
        firstLL128, mcclArBenchFmtSize(firstLL128, a, sizeof(a)), lastLL128,
        mcclArBenchFmtSize(lastLL128, b, sizeof(b)));
  fflush(stdout);
}

// ---- set-up --------------------------------------------------------------------------------------

static mcclResult_t run(int argc, char** argv, long* wrong) {
  MPI_Comm local;
  int localRank = 0, ndev = 0;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &localRank);
  MPI_Comm_free(&local);
  CUDACHECK(cudaGetDeviceCount(&ndev));
  int dev = localRank % ndev;
  CUDACHECK(cudaSetDevice(dev));
  size_t allocBytes = bo.maxBytes + SLACK_BYTES;  // -e rounded down to whole elements of any type fits

  // Our communicator, buffers and windows.
  mcclUniqueId id;
  memset(&id, 0, sizeof(id));
  if (rank == 0) MCCLCHECK(mcclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  MCCLCHECK(mcclLabCommInit(&g.comm, nranks, &id, rank, dev, opt.nChannels, mcclLocalTransports));
  cudaStream_t stream;
  CUDACHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void *send = NULL, *recv = NULL;
  mcclLabWindow *sendWin = NULL, *recvWin = NULL;
  MCCLCHECK(mcclMemAlloc(&send, allocBytes));
  MCCLCHECK(mcclMemAlloc(&recv, allocBytes));
  int ok = mcclCuMemEnable() && g.comm->signalWin != NULL;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  g.haveWin = ok;
  if (g.haveWin) {
    MCCLCHECK(mcclLabWindowRegister(g.comm, send, allocBytes, &sendWin));
    MCCLCHECK(mcclLabWindowRegister(g.comm, recv, allocBytes, &recvWin));
  }
  g.symLevel = g.comm->signalWin == NULL ? 0 : g.haveWin ? 2 : 1;
  int shmMode = nranks > 1 && g.comm->transport[0] == TRANSPORT_SHM;

  mcclArBenchSetup s = {.program = "lab 07 mpi_bench_allreduce",
                        .nLocal = 1,
                        .devs = {dev},
                        .streams = {stream},
                        .ops = {.enqueue = enqueue,
                                .beginRow = beginRow,
                                .runs = variantRuns,
                                .label = rowLabel,
                                .onRow = opt.tune ? tuneRow : NULL,
                                .abort = abortComm},
                        .useNccl = opt.useNccl && !opt.tune,
                        .ncclWhyNot = opt.tune ? "--tune" : "--no-nccl",
                        .oopOnly = opt.tune,
                        .shmMode = shmMode,
                        .summary = !opt.tune};
  for (int i = 0; i < opt.nVariants; i++)
    s.ours[s.nOurs++] = (mcclArBenchTarget){.lib = "minccl",
                                            .variant = kVariant[opt.variants[i]].name,
                                            .id = opt.variants[i],
                                            .send = {send},
                                            .recv = {recv}};
  char channels[16];
  snprintf(channels, sizeof(channels), "%d", g.comm->nChannels);
  s.metaKey[0] = "channels", s.metaValue[0] = channels;
  s.metaKey[1] = "transport", s.metaValue[1] = nranks < 2 ? "none" : shmMode ? "SHM" : "P2P";
  s.nMeta = 2;

  if (rank == 0) {
    printf("# lab 07 allreduce%s, %s backend, %d ranks (one device each), %d channels, ring over %s%s\n",
           opt.tune ? " --tune" : "", MCCL_BACKEND_NAME, nranks, g.comm->nChannels,
           nranks < 2 ? "nothing (1 rank)"
           : shmMode  ? "SHM"
                      : "P2P",
           g.symLevel == 2   ? "; symmetric windows"
           : g.symLevel == 1 ? "; signal area only (no two-shot)"
                             : "; ring only");
    if (shmMode && !opt.algoGiven) printf("# SHM run: the ring only (the symmetric algorithms do not use SHM)\n");
    fflush(stdout);
  }
  MCCLCHECK(mcclArBenchRun(&s, &bo, argc, argv, wrong));
  if (opt.tune) tuneSummary();

  MPI_Barrier(MPI_COMM_WORLD);  // every rank is done with the peers' buffers before they go
  if (sendWin) MCCLCHECK(mcclLabWindowDeregister(g.comm, sendWin));
  if (recvWin) MCCLCHECK(mcclLabWindowDeregister(g.comm, recvWin));
  MCCLCHECK(mcclMemFree(send));
  MCCLCHECK(mcclMemFree(recv));
  CUDACHECK(cudaStreamDestroy(stream));
  MCCLCHECK(mcclLabCommDestroy(g.comm));
  unsetenv("MCCL_ALGO");
  unsetenv("MCCL_PROTO");
  return mcclSuccess;
}

int main(int argc, char** argv) {
  sim = strcmp(MCCL_BACKEND_NAME, "sim") == 0;
  parseOptions(argc, argv);
  if (opt.shm) {  // before any communicator: both libraries read these once
    setenv("MCCL_P2P_DISABLE", "1", 1);
    setenv("NCCL_P2P_DISABLE", "1", 1);
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  int ndev = 0, rc = 0;
  long wrong = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
    if (rank == 0) printf("# lab 07 bench: skipped, no CUDA device\n");
  } else if (nranks > MCCL_LAB_MAX_RANKS) {
    if (rank == 0) printf("# lab 07 bench: at most %d ranks\n", MCCL_LAB_MAX_RANKS);
    rc = 2;
  } else {
    mcclResult_t r = run(argc, argv, &wrong);
    rc = mcclArBenchExitStatus("lab 07 bench", rank, r, wrong);
  }
  MPI_Finalize();
  return rc;
}
