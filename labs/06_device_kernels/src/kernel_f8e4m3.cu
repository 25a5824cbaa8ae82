// Lab 06: the kernel for the reducing ops on __nv_fp8_e4m3 (kernels.cuh).
#include "kernels.cuh"

MCCL_DEFINE_DEV_KERNEL(f8e4m3, __nv_fp8_e4m3);
