// Lab 07: the allreduce kernel for uint32_t (allreduce_kernels.cuh).
#include "allreduce_kernels.cuh"

MCCL_DEFINE_ALLREDUCE_KERNEL(u32, uint32_t);
