// final/ across hosts: mpirun -np 4 posing as 2 hosts x 2 ranks (MCCL_HOSTID per rank, lab 08's
// net_pose.h). P2P and SHM refuse ranks of different hosts, so mcclCommInitRank only succeeds when
// libminccl carries lab 08's NET transport; mcclAllReduce and mcclAllGather are then checked on every
// rank against the CPU reference. MPI runs with MPI_THREAD_MULTIPLE: the net plugin is called from
// minccl's proxy thread.
#define NET_RANKS_PER_HOST 2
#include <stdlib.h>
#include "../../labs/07_allreduce/tests/ar_test_util.h"
#include "../../labs/08_net_transport/tests/net_pose.h"
#include "fcoll_test_util.h"
#include "fmpi_test_util.h"
#include "mccl_test.h"
#include "mccl_test_mpi.h"

#define NET_MAX_COUNT 70001

// mcclAllReduce across the two posed hosts: the table's choice (a ring, SIMPLE: the communicator
// has NET edges) on a small and a multi-step count each way: float32 sum and int32 max, in and out of
// place (each call costs the ring's hops through the proxies, so four calls).
static void allReduceAcrossHosts(void) {
  MCCL_TEST_MPI_REQUIRE_THREAD_MULTIPLE();
  static const size_t counts[] = {1, 1031, NET_MAX_COUNT, 4099};
  struct fmpiWorld w;
  fmpiSetUp(&w, NET_MAX_COUNT * 8);
  CHECK_STOPPED();
  for (int k = 0; k < (int)(sizeof(counts) / sizeof(counts[0])) && !mcclTestMpiAnyStopped(); k++) {
    const mcclDataType_t t = k & 1 ? mcclInt32 : mcclFloat32;
    const mcclRedOp_t op = k & 1 ? mcclMax : mcclSum;
    const int inPlace = (k >> 1) & 1;
    const size_t count = counts[k], bytes = count * mcclTypeSize(t);
    const uint64_t seed = mcclTestSeed() + (uint64_t)k;
    char why[160];
    if (!inPlace) {
      memset(w.host, 0xa5, bytes);
      EXPECT_CUDA_OK(mcclTestCopyToDevice(w.recv, w.host, bytes));
    }
    arFill(w.host, t, op, count, w.rank, seed);
    EXPECT_CUDA_OK(mcclTestCopyToDevice(inPlace ? w.recv : w.send, w.host, bytes));
    EXPECT_OK(mcclAllReduce(inPlace ? w.recv : w.send, w.recv, count, t, op, w.comm, w.stream));
    EXPECT_CUDA_OK(cudaStreamSynchronize(w.stream));
    EXPECT_CUDA_OK(cudaMemcpy(w.host, w.recv, bytes, cudaMemcpyDeviceToHost));
    if (arCheck(w.host, t, op, count, mcclTestMpiSize(), seed, why, sizeof(why)))
      mcclTestFailAt(__FILE__, __LINE__, "%s %s count %zu %s: rank %d: %s", mcclTypeName(t), mcclOpName(op), count,
                     inPlace ? "in place" : "out of place", w.rank, why);
  }
  mcclResult_t ae = mcclInternalError;
  EXPECT_OK(mcclCommGetAsyncError(w.comm, &ae));
  EXPECT_EQ(ae, mcclSuccess);
  fmpiTearDown(&w);
}

// mcclAllGather across the two posed hosts: every rank's block lands on every rank, in and out of
// place.
static void allGatherAcrossHosts(void) {
  MCCL_TEST_MPI_REQUIRE_THREAD_MULTIPLE();
  static const size_t counts[] = {5, 4099};
  struct fmpiWorld w;
  fmpiSetUp(&w, 4099 * 8 * (size_t)mcclTestMpiSize());
  CHECK_STOPPED();
  for (int k = 0; k < 2 && !mcclTestMpiAnyStopped(); k++) {
    struct enqCall c = {mcclFuncAllGather,           k ? mcclFloat64 : mcclInt32, mcclSum, 0, counts[k], 0, k,
                        mcclTestSeed() + (uint64_t)k};
    void *in, *out;
    char what[128], why[200];
    enqDescribe(&c, what, sizeof(what));
    int line = enqPrepare(&c, w.rank, w.nranks, w.send, w.recv, w.host, &in, &out);
    if (line) {
      mcclTestFailAt(__FILE__, line, "%s: setting rank %d's buffers up", what, w.rank);
      break;
    }
    EXPECT_OK(fcollIssue(&c, in, out, w.comm, w.stream));
    EXPECT_CUDA_OK(cudaStreamSynchronize(w.stream));
    if (enqVerify(&c, w.rank, w.nranks, out, why, sizeof(why)))
      mcclTestFailAt(__FILE__, __LINE__, "%s: rank %d: %s", what, w.rank, why);
  }
  fmpiTearDown(&w);
}

MCCL_TEST_MAIN_MPI_THREADS(MPI_THREAD_MULTIPLE, MCCL_TEST_CASE(allReduceAcrossHosts),
                           MCCL_TEST_CASE(allGatherAcrossHosts))
