// Lab 06: the kernel for the reducing ops on double (kernels.cuh).
#include "kernels.cuh"

MCCL_DEFINE_DEV_KERNEL(f64, double);
