// The benchmarks' dlopen of NCCL (mccl_nccl.h): one place for the entry points both lab 05's and
// lab 06's benchmarks call.
#include "mccl_nccl.h"
#include <dlfcn.h>
#include <string.h>

int mcclNcclOpen(const char* path, mcclNcclApi* api, const char** why) {
  memset(api, 0, sizeof(*api));
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    *why = "cannot dlopen MCCL_NCCL_LIB";
    return 0;
  }
  int (*getVersion)(int*) = (int (*)(int*))dlsym(lib, "ncclGetVersion");
  api->getUniqueId = (int (*)(mcclNcclUniqueId*))dlsym(lib, "ncclGetUniqueId");
  api->commInitRank = (int (*)(mcclNcclComm*, int, mcclNcclUniqueId, int))dlsym(lib, "ncclCommInitRank");
  api->commDestroy = (int (*)(mcclNcclComm))dlsym(lib, "ncclCommDestroy");
  api->send = (int (*)(const void*, size_t, int, int, mcclNcclComm, cudaStream_t))dlsym(lib, "ncclSend");
  api->recv = (int (*)(void*, size_t, int, int, mcclNcclComm, cudaStream_t))dlsym(lib, "ncclRecv");
  api->allReduce =
      (int (*)(const void*, void*, size_t, int, int, mcclNcclComm, cudaStream_t))dlsym(lib, "ncclAllReduce");
  api->groupStart = (int (*)(void))dlsym(lib, "ncclGroupStart");
  api->groupEnd = (int (*)(void))dlsym(lib, "ncclGroupEnd");
  api->getErrorString = (const char* (*)(int))dlsym(lib, "ncclGetErrorString");
  if (!getVersion || !api->getUniqueId || !api->commInitRank || !api->commDestroy || !api->send || !api->recv ||
      !api->allReduce || !api->groupStart || !api->groupEnd || !api->getErrorString || getVersion(&api->version) != 0) {
    *why = "MCCL_NCCL_LIB lacks an NCCL entry point";
    dlclose(lib);
    memset(api, 0, sizeof(*api));
    return 0;
  }
  api->lib = lib;
  return 1;
}

void mcclNcclClose(mcclNcclApi* api) {
  if (api->lib) dlclose(api->lib);
  memset(api, 0, sizeof(*api));
}
