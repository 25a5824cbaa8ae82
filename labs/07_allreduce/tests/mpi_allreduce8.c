// Lab 07 allreduce on 8 ranks under mpirun (module.mk runs it at 8 only; on sim two ranks share
// each of the 4 devices): every path, in and out of place, on a count that is not a multiple of
// ranks x channels x vector width, against the CPU reference (ar_test_util.h). Kept small: 8
// processes of host threads on CI's 2 cores.
#include "ar_mpi_util.h"

static void eightRanks(void) {
  if (mcclTestMpiDevice() < 0) SKIP("no CUDA device");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no windows");
  if (mcclTestMpiSize() != 8) SKIP("runs on 8 ranks (mpirun -np 8), not %d", mcclTestMpiSize());
  struct arMpi m;
  arMpiSetUp(&m, 2, 1001 * 4, mcclLocalTransports);
  uint64_t seed = mcclTestSeed();
  for (int p = 0; p < AR_NPATHS && !mcclTestMpiAnyStopped(); p++) {
    arMpiRun(&m, &arPaths[p], mcclFloat32, mcclSum, 1001, 0, seed + (uint64_t)p);
    arMpiRun(&m, &arPaths[p], mcclInt8, mcclProd, 333, 1, seed + (uint64_t)p + 100);
  }
  arForce(NULL, NULL);
  arMpiTearDown(&m);
}

MCCL_TEST_MAIN_MPI(MCCL_TEST_CASE(eightRanks))
