// Lab 07: the kernels for float (dev_kernels.cuh).
#include "dev_kernels.cuh"

MCCL_DEFINE_KERNELS(f32, float);
