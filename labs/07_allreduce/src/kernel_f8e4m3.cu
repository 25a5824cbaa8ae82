// Lab 07: the kernels for __nv_fp8_e4m3 (dev_kernels.cuh).
#include "dev_kernels.cuh"

MCCL_DEFINE_KERNELS(f8e4m3, __nv_fp8_e4m3);
