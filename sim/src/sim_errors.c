// Error names and strings of the sim backend (placeholder table; the sim completes it).
#include <cuda.h>
#include <cuda_runtime.h>

CUresult CUDAAPI cuGetErrorName(CUresult error, const char** pStr) {
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS: *pStr = "CUDA_SUCCESS"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_VALUE: *pStr = "CUDA_ERROR_INVALID_VALUE"; return CUDA_SUCCESS;
    default: *pStr = NULL; return CUDA_ERROR_INVALID_VALUE;
  }
}
CUresult CUDAAPI cuGetErrorString(CUresult error, const char** pStr) {
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS: *pStr = "no error"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_VALUE: *pStr = "invalid argument"; return CUDA_SUCCESS;
    default: *pStr = NULL; return CUDA_ERROR_INVALID_VALUE;
  }
}
CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  (void)handle;
  return CUDA_ERROR_INVALID_VALUE;
}
const char* CUDARTAPI cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorUnknown"; }
const char* CUDARTAPI cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "unknown error"; }
