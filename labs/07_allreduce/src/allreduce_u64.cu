// Lab 07: the allreduce kernel for uint64_t (allreduce_kernels.cuh).
#include "allreduce_kernels.cuh"

MCCL_DEFINE_ALLREDUCE_KERNEL(u64, uint64_t);
