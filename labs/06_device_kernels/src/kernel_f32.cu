// Lab 06: the kernel for the reducing ops on float (kernels.cuh).
#include "kernels.cuh"

MCCL_DEFINE_DEV_KERNEL(f32, float);
