// Lab 10's benchmark: a compute kernel for the overlap measurement. Every thread runs a chain of FMAs on
// registers and touches memory only to keep its result, so a slowdown beside a collective comes from the SMs the
// collective takes (blocks, issue slots), not from HBM traffic. bench/mpi_bench_ce.c launches it as the labs
// launch (lab 06's mcclDevGetFunction + cuLaunchKernel) and declares its argument the same way.
struct mcclCeFmaArgs {
  float* out;  // one word per block, written only if the chain's result is the impossible value below
  int iters;
};

extern "C" __global__ void mcclCeFmaKernel(struct mcclCeFmaArgs a) {
  float x0 = 1.0f + threadIdx.x * 1e-7f, x1 = x0 * 0.5f, x2 = x0 * 0.25f, x3 = x0 * 0.125f;
  const float m = 0.999999f, c = 1e-7f * (float)(blockIdx.x + 1);
  for (int i = 0; i < a.iters; i++) {  // four independent chains (nvcc fuses each line into one FMA)
    x0 = x0 * m + c;
    x1 = x1 * m + c;
    x2 = x2 * m + c;
    x3 = x3 * m + c;
  }
  if (x0 + x1 + x2 + x3 == -1.0f) a.out[blockIdx.x] = x0;  // never true; the compiler cannot drop the chains
}
MCCL_KERNEL_REGISTER(mcclCeFmaKernel);
