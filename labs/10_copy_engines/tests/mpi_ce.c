// Lab 10 across processes under mpirun (2, 3 and 4 ranks): the copy engines write into windows each process
// imported from the others (lab 07's windows, lab 03's fds), and the streams synchronise through flags in the
// peers' signal areas. Every function at awkward sizes, in and out of place, straight to the copy engines and
// through lab 07's calls under CTA policy ZERO (no kernel), checked on every rank.
#include "ce_test_util.h"
#include "mccl_param.h"
#include "mccl_test_mpi.h"

static void setUp(struct ceRank* r) {
  memset(r, 0, sizeof(*r));
  if (mcclTestMpiDevice() < 0) SKIP("no CUDA device");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no windows");
  mcclUniqueId id;
  memset(&id, 0, sizeof(id));
  if (mcclTestMpiRank() == 0) EXPECT_OK(mcclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  EXPECT_CUDA_OK(cudaSetDevice(mcclTestMpiDevice()));
  EXPECT_OK(mcclLabCommInit(&r->comm, mcclTestMpiSize(), &id, mcclTestMpiRank(), mcclTestMpiDevice(), 1,
                            mcclLocalTransports));
  CHECK_STOPPED();
  r->comm->ceColl.ops = &mcclCeOps;
  r->comm->ctaPolicy = MCCL_CTA_POLICY_ZERO;
  ceAlloc(r);
  CHECK_STOPPED();
  EXPECT_OK(mcclLabWindowRegister(r->comm, r->win, CE_WIN, &r->w));
}

static void tearDown(struct ceRank* r) {
  if (r->stream) EXPECT_CUDA_OK(cudaStreamSynchronize(r->stream));
  MPI_Barrier(MPI_COMM_WORLD);  // every rank is done with the peers' memory before any unmaps
  ceFree(r);
  if (r->comm) EXPECT_OK(mcclLabCommDestroy(r->comm));
}

// Every function, size and element size, out of place and in place, with the root moving; `viaLab07` picks the
// path. Under lab 07's calls the communicator must launch no kernel.
static void run(int viaLab07) {
  struct ceRank r;
  setUp(&r);
  const int n = mcclTestMpiSize(), me = mcclTestMpiRank();
  uint64_t tag = mcclTestSeed();
  const uint64_t before = r.comm ? r.comm->nLaunches : 0;
  for (int f = 0; f < 5 && !mcclTestMpiAnyStopped(); f++)
    for (size_t s = 0; s < sizeof(ceCounts) / sizeof(ceCounts[0]) && !mcclTestMpiAnyStopped(); s++)
      for (int form = 0; form < 3 && !mcclTestMpiAnyStopped(); form++) {
        if (form == 2 && ceFuncs[f] == mcclFuncAlltoAll) continue;
        const size_t esize = ceEsizes[(s + (size_t)form) % 4];
        struct ceCall c = {ceFuncs[f], ceCounts[s], esize, (int)(s + (size_t)form) % n, form == 2, form == 0, viaLab07};
        ceSetUp(&r, &c, n, me, tag);
        EXPECT_OK(ceIssue(&r, &c, me));
        ceCheck(&r, &c, n, me, tag);
        tag++;
      }
  if (!mcclTestStopped() && viaLab07) EXPECT_EQ(r.comm->nLaunches, before);
  tearDown(&r);
}

// The assisted allreduce through lab 07's call (MCCL_ALGO=ce), chunks small enough for many rounds: a sum on
// every type, float32 on every operation; one reduce kernel per call, of 5 blocks (MCCL_CE_AR_BLOCKS).
static void assistedAllReduce(void) {
  struct ceRank r;
  setUp(&r);
  static const size_t counts[] = {77, 1000, 5003};
  const int n = mcclTestMpiSize(), me = mcclTestMpiRank();
  setenv("MCCL_CE_AR_CHUNK", "1024", 1);
  setenv("MCCL_CE_AR_BLOCKS", "5", 1);
  setenv("MCCL_ALGO", "ce", 1);
  mcclParamResetAll();
  uint64_t tag = mcclTestSeed() % 1000;
  const uint64_t before = r.comm ? r.comm->nLaunches : 0;
  int calls = 0;
  for (int t = 0; t < mcclNumTypes + 4 && !mcclTestMpiAnyStopped(); t++, calls++) {
    const mcclDataType_t type = t < mcclNumTypes ? (mcclDataType_t)t : mcclFloat32;
    const int op = t < mcclNumTypes ? mcclSum : t - mcclNumTypes;
    ceArSetUp(&r, counts[t % 3], type, op, me, tag);
    EXPECT_OK(ceArIssue(&r, counts[t % 3], type, op, 1));
    ceArCheck(&r, counts[t % 3], type, op, n, tag++);
  }
  if (!mcclTestStopped()) EXPECT_EQ(r.comm->nLaunches, before + (uint64_t)calls);
  unsetenv("MCCL_CE_AR_CHUNK");
  unsetenv("MCCL_CE_AR_BLOCKS");
  unsetenv("MCCL_ALGO");
  mcclParamResetAll();
  tearDown(&r);
}

static void collectives(void) {
  run(0);
}
static void policyZero(void) {
  run(1);
}

MCCL_TEST_MAIN_MPI(MCCL_TEST_CASE(collectives), MCCL_TEST_CASE(policyZero), MCCL_TEST_CASE(assistedAllReduce))
