// Helpers shared by lab 03's tests.
#ifndef MCCL_IPC_TEST_UTIL_H_
#define MCCL_IPC_TEST_UTIL_H_

#include <string.h>
#include <cuda.h>

// MINIMUM granularity of a POSIX-fd exportable allocation on `dev`, or 0 if the driver says no.
static inline size_t granularity(int dev) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  return cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS ? gran : 0;
}

#endif
