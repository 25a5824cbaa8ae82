// Lab 06: the kernel for the reducing ops on uint32_t (kernels.cuh).
#include "kernels.cuh"

MCCL_DEFINE_DEV_KERNEL(u32, uint32_t);
