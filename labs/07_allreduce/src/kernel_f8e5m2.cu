// Lab 07: the kernels for __nv_fp8_e5m2 (dev_kernels.cuh).
#include "dev_kernels.cuh"

MCCL_DEFINE_KERNELS(f8e5m2, __nv_fp8_e5m2);
