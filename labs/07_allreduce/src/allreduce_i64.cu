// Lab 07: the allreduce kernel for int64_t (allreduce_kernels.cuh).
#include "allreduce_kernels.cuh"

MCCL_DEFINE_ALLREDUCE_KERNEL(i64, int64_t);
