// Lab 07: the allreduce kernel for int32_t (allreduce_kernels.cuh).
#include "allreduce_kernels.cuh"

MCCL_DEFINE_ALLREDUCE_KERNEL(i32, int32_t);
