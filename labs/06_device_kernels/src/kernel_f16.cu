// Lab 06: the kernel for the reducing ops on __half (kernels.cuh).
#include "kernels.cuh"

MCCL_DEFINE_DEV_KERNEL(f16, __half);
