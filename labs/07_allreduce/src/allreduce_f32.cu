// Lab 07: the allreduce kernel for float (allreduce_kernels.cuh).
#include "allreduce_kernels.cuh"

MCCL_DEFINE_ALLREDUCE_KERNEL(f32, float);
