// Lab 07: Reduce and ReduceScatter for double (coll_kernels.cuh).
#include "coll_kernels.cuh"

MCCL_DEFINE_COLL_KERNEL(f64, double);
