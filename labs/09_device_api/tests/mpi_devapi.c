// Lab 09 across processes under mpirun (2, 3 and 4 ranks): the device communicator and device windows over
// memory each process imported from the others (lab 07's windows, lab 03's fds), every peer's pointer, 1000
// barrier sessions checked by data, and the lab's kernels at awkward sizes, checked on every rank.
#include "devapi_test_util.h"
#include "mccl_test_mpi.h"

static void setUp(struct dtRank* r) {
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
  dtAlloc(r);
  dtCollectiveSetUp(r);
}

static void tearDown(struct dtRank* r) {
  if (r->stream) EXPECT_CUDA_OK(cudaStreamSynchronize(r->stream));
  MPI_Barrier(MPI_COMM_WORLD);  // every rank is done with the peers' memory before any unmaps
  dtTearDown(r);
  if (r->comm) EXPECT_OK(mcclLabCommDestroy(r->comm));
}

static uint32_t errorsSoFar(struct dtRank* r) {
  uint32_t e = 0xffffffffu;
  if (cudaStreamSynchronize(r->stream) != cudaSuccess) return e;
  if (cudaMemcpy(&e, r->errors, 4, cudaMemcpyDeviceToHost) != cudaSuccess) return 0xffffffffu;
  return e;
}

static void pointersAndBarriers(void) {
  struct dtRank r;
  setUp(&r);
  if (!mcclTestStopped()) {
    EXPECT_EQ(r.dc.lsaSize, mcclTestMpiSize());
    EXPECT_EQ(r.dc.lsaRank, mcclTestMpiRank());
    EXPECT_OK(mcclDevPeerPointerTest(&r.dc, r.devWin, r.errors, r.stream));
    EXPECT_EQ(errorsSoFar(&r), 0);
    EXPECT_OK(mcclDevBarrierTest(&r.dc, r.devWin, 1000, 0, DT_BLOCKS, 32, r.errors, r.stream));
    EXPECT_EQ(errorsSoFar(&r), 0);
    for (int m = 1; m < 4; m++)
      EXPECT_OK(mcclDevBarrierTest(&r.dc, r.devWin, 100, m, DT_BLOCKS, 32, r.errors, r.stream));
    EXPECT_EQ(errorsSoFar(&r), 0);
  }
  tearDown(&r);
}

static void kernels(void) {
  static const size_t counts[] = {1, 7, 1021, 4099};
  struct dtRank r;
  setUp(&r);
  const int n = mcclTestMpiSize(), me = mcclTestMpiRank();
  void* host = malloc(DT_BYTES * 2);
  uint64_t seed = mcclTestSeed();
  for (int t = 0; t < 2 && !mcclTestMpiAnyStopped(); t++) {
    mcclDataType_t type = t ? mcclBfloat16 : mcclFloat32;
    size_t es = t ? 2 : 4;
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]) && !mcclTestMpiAnyStopped(); c++)
      for (int algo = 0; algo < 2; algo++) {
        dtFillAr(host, type, counts[c], me, seed + c);
        EXPECT_CUDA_OK(mcclTestCopyToDevice(r.buf, host, counts[c] * es));
        if (algo == 0)
          EXPECT_OK(mcclDevAllReduceOneShot(&r.dc, r.devWin, 0, r.out, counts[c], type, DT_BLOCKS, r.stream));
        else
          EXPECT_OK(mcclDevAllReduceTwoShot(&r.dc, r.devWin, 0, r.devWin, DT_BYTES / 2, counts[c], type, DT_BLOCKS,
                                            r.stream));
        EXPECT_CUDA_OK(cudaStreamSynchronize(r.stream));
        EXPECT_CUDA_OK(
            cudaMemcpy(host, algo ? (char*)r.buf + DT_BYTES / 2 : r.out, counts[c] * es, cudaMemcpyDeviceToHost));
        long bad = dtCheckAr(host, type, counts[c], n, seed + c);
        if (bad >= 0)
          mcclTestFailAt(__FILE__, __LINE__, "%s count %zu: element %ld wrong", algo ? "two-shot" : "one-shot",
                         counts[c], bad);
        MPI_Barrier(MPI_COMM_WORLD);  // every rank has read before the inputs change
      }
  }
  // Allgather of 4099 bytes.
  unsigned char* b = (unsigned char*)host;
  for (size_t k = 0; k < 4099; k++) b[k] = (unsigned char)(k * 31 + (size_t)me);
  EXPECT_CUDA_OK(mcclTestCopyToDevice(r.buf, b, 4099));
  EXPECT_OK(mcclDevAllGather(&r.dc, r.devWin, 0, r.out, 4099, DT_BLOCKS, r.stream));
  EXPECT_CUDA_OK(cudaStreamSynchronize(r.stream));
  EXPECT_CUDA_OK(cudaMemcpy(b, r.out, 4099 * (size_t)n, cudaMemcpyDeviceToHost));
  for (int p = 0; p < n; p++)
    for (size_t k = 0; k < 4099; k++)
      if (b[(size_t)p * 4099 + k] != (unsigned char)(k * 31 + (size_t)p)) {
        mcclTestFailAt(__FILE__, __LINE__, "allgather: byte %zu of rank %d wrong", k, p);
        k = 4099, p = n;
      }
  MPI_Barrier(MPI_COMM_WORLD);
  // Fused allreduce + RMSNorm, bf16, 3 x 1000, against the two kernels and the reference.
  const int rows = 3, hidden = 1000;
  const size_t elems = (size_t)rows * hidden;
  void* w = malloc((size_t)hidden * 2);
  void* wDev = NULL;
  EXPECT_OK(mcclMemAlloc(&wDev, (size_t)hidden * 2));
  dtFillW(w, mcclBfloat16, (size_t)hidden, seed);
  dtFillX(host, mcclBfloat16, elems, me, seed);
  EXPECT_CUDA_OK(mcclTestCopyToDevice(r.buf, host, elems * 2));
  EXPECT_CUDA_OK(mcclTestCopyToDevice(wDev, w, (size_t)hidden * 2));
  EXPECT_OK(
      mcclDevAllReduceRmsNorm(&r.dc, r.devWin, 0, wDev, r.out, rows, hidden, 1e-6f, mcclBfloat16, DT_BLOCKS, r.stream));
  EXPECT_OK(mcclDevAllReduceOneShot(&r.dc, r.devWin, 0, r.out2, elems, mcclBfloat16, DT_BLOCKS, r.stream));
  EXPECT_OK(mcclDevRmsNorm(r.out2, wDev, r.out2, rows, hidden, 1e-6f, mcclBfloat16, r.stream));
  EXPECT_CUDA_OK(cudaStreamSynchronize(r.stream));
  char* two = (char*)host + DT_BYTES;
  EXPECT_CUDA_OK(cudaMemcpy(host, r.out, elems * 2, cudaMemcpyDeviceToHost));
  EXPECT_CUDA_OK(cudaMemcpy(two, r.out2, elems * 2, cudaMemcpyDeviceToHost));
  EXPECT_EQ(dtCompareClose(host, two, mcclBfloat16, elems), -1);
  EXPECT_EQ(dtCheckRmsNorm(host, w, mcclBfloat16, rows, hidden, n, seed, 1e-6f), -1);
  EXPECT_OK(mcclMemFree(wDev));
  free(w);
  free(host);
  tearDown(&r);
}

MCCL_TEST_MAIN_MPI(MCCL_TEST_CASE(pointersAndBarriers), MCCL_TEST_CASE(kernels))
