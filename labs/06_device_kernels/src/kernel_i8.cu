// Lab 06: the kernel for the reducing ops on int8_t (kernels.cuh).
#include "kernels.cuh"

MCCL_DEFINE_DEV_KERNEL(i8, int8_t);
