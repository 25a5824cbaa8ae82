// Lab 06: the kernel for the reducing ops on __nv_bfloat16 (kernels.cuh).
#include "kernels.cuh"

MCCL_DEFINE_DEV_KERNEL(bf16, __nv_bfloat16);
