// Lab 06: the kernel for the reducing ops on int64_t (kernels.cuh).
#include "kernels.cuh"

MCCL_DEFINE_DEV_KERNEL(i64, int64_t);
