// Lab 07: the allreduce kernel for int8_t (allreduce_kernels.cuh).
#include "allreduce_kernels.cuh"

MCCL_DEFINE_ALLREDUCE_KERNEL(i8, int8_t);
