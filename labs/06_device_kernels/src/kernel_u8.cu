// Lab 06: the kernel for the reducing ops on uint8_t (kernels.cuh).
#include "kernels.cuh"

MCCL_DEFINE_DEV_KERNEL(u8, uint8_t);
