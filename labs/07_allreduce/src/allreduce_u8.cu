// Lab 07: the allreduce kernel for uint8_t (allreduce_kernels.cuh).
#include "allreduce_kernels.cuh"

MCCL_DEFINE_ALLREDUCE_KERNEL(u8, uint8_t);
