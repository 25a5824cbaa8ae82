// Lab 07: the kernels for __half (dev_kernels.cuh).
#include "dev_kernels.cuh"

MCCL_DEFINE_KERNELS(f16, __half);
