// Lab 07: the allreduce kernel for __half (allreduce_kernels.cuh).
#include "allreduce_kernels.cuh"

MCCL_DEFINE_ALLREDUCE_KERNEL(f16, __half);
