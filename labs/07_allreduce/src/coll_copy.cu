// Lab 07: Broadcast and AllGather, for every type: they move bytes (coll_kernels.cuh).
#include "coll_kernels.cuh"

MCCL_DEFINE_COLL_COPY_KERNEL();
