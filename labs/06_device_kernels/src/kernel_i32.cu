// Lab 06: the kernel for the reducing ops on int32_t (kernels.cuh).
#include "kernels.cuh"

MCCL_DEFINE_DEV_KERNEL(i32, int32_t);
