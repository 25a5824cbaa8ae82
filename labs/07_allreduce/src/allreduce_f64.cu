// Lab 07: the allreduce kernel for double (allreduce_kernels.cuh).
#include "allreduce_kernels.cuh"

MCCL_DEFINE_ALLREDUCE_KERNEL(f64, double);
