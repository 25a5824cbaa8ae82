// Lab 06: the kernel for the reducing ops on __nv_fp8_e5m2 (kernels.cuh).
#include "kernels.cuh"

MCCL_DEFINE_DEV_KERNEL(f8e5m2, __nv_fp8_e5m2);
