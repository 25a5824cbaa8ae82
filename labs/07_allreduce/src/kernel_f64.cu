// Lab 07: the kernels for double (dev_kernels.cuh).
#include "dev_kernels.cuh"

MCCL_DEFINE_KERNELS(f64, double);
