// One-off probe (not part of the repo's code): the NVLink ceiling a ring step can reach on this host.
// One process, every visible GPU. Copies of SIZE bytes, timed with events, best of REPS:
//  ce:    cudaMemcpyPeerAsync 0 -> 1 (copy engine)
//  sm:    a kernel on 0 storing 16-byte words into device 1's buffer, B blocks x 512 threads
//  ring:  every GPU i at once stores into GPU i+1 (one ring step), B blocks
//  ringr: as ring, but each store is the sum of two local buffers (a recvReduceSend's traffic shape)
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)
__global__ void copyK(const int4* __restrict__ src, int4* dst, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += 4 * stride) {
    int4 v[4];
#pragma unroll
    for (int u = 0; u < 4; u++) if (i + u * stride < n) v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < 4; u++) if (i + u * stride < n) dst[i + u * stride] = v[u];
  }
}
__global__ void addK(const float4* __restrict__ a, const float4* __restrict__ b, float4* dst, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float4 x = a[i], y = b[i];
    dst[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}
int main(int argc, char** argv) {
  size_t size = argc > 1 ? strtoull(argv[1], 0, 0) : (512ull << 20);
  int reps = 10, nd;
  CK(cudaGetDeviceCount(&nd));
  std::vector<void*> src(nd), src2(nd), dst(nd);
  std::vector<cudaStream_t> st(nd);
  std::vector<cudaEvent_t> e0(nd), e1(nd);
  for (int d = 0; d < nd; d++) {
    CK(cudaSetDevice(d));
    for (int p = 0; p < nd; p++) if (p != d) { int ok; CK(cudaDeviceCanAccessPeer(&ok, d, p)); if (ok) CK(cudaDeviceEnablePeerAccess(p, 0)); }
    CK(cudaMalloc(&src[d], size)); CK(cudaMalloc(&src2[d], size)); CK(cudaMalloc(&dst[d], size));
    CK(cudaMemset(src[d], 1, size)); CK(cudaMemset(src2[d], 2, size));
    CK(cudaStreamCreateWithFlags(&st[d], cudaStreamNonBlocking));
    CK(cudaEventCreate(&e0[d])); CK(cudaEventCreate(&e1[d]));
  }
  size_t n16 = size / 16;
  printf("size %zu B, %d GPUs, best of %d; GB/s = size / time (per GPU)\n", size, nd, reps);
  auto timeOne = [&](auto launch) {
    float best = 1e30f;
    for (int r = 0; r < reps + 1; r++) {
      CK(cudaSetDevice(0)); CK(cudaEventRecord(e0[0], st[0])); launch(); CK(cudaEventRecord(e1[0], st[0]));
      CK(cudaEventSynchronize(e1[0])); float ms; CK(cudaEventElapsedTime(&ms, e0[0], e1[0]));
      if (r > 0 && ms < best) best = ms;
    }
    return size / (best * 1e-3) / 1e9;
  };
  printf("ce 0->1: %.1f GB/s\n", timeOne([&] { CK(cudaMemcpyPeerAsync(dst[1], 1, src[0], 0, size, st[0])); }));
  if (nd > 2) printf("ce 0->2: %.1f GB/s\n", timeOne([&] { CK(cudaMemcpyPeerAsync(dst[2], 2, src[0], 0, size, st[0])); }));
  int blocks[] = {16, 32, 64, 132, 264};
  for (int b : blocks)
    printf("sm 0->1 %3d blocks x 512: %.1f GB/s\n", b, timeOne([&] { copyK<<<b, 512, 0, st[0]>>>((int4*)src[0], (int4*)dst[1], n16); }));
  for (int b : blocks)
    printf("sm 0->1 read (1 pulls from 0) %3d blocks x 512: %.1f GB/s\n", b, [&] {
      float best = 1e30f;
      for (int r = 0; r < reps + 1; r++) {
        CK(cudaSetDevice(1)); CK(cudaEventRecord(e0[1], st[1])); copyK<<<b, 512, 0, st[1]>>>((int4*)src[0], (int4*)dst[1], n16);
        CK(cudaEventRecord(e1[1], st[1])); CK(cudaEventSynchronize(e1[1])); float ms; CK(cudaEventElapsedTime(&ms, e0[1], e1[1]));
        if (r > 0 && ms < best) best = ms;
      }
      return size / (best * 1e-3) / 1e9; }());
  for (int kind = 0; kind < 2; kind++)
    for (int b : blocks) {
      float worst = 0, bestWorst = 1e30f;
      for (int r = 0; r < reps + 1; r++) {
        for (int d = 0; d < nd; d++) { CK(cudaSetDevice(d)); CK(cudaDeviceSynchronize()); }
        worst = 0;
        for (int d = 0; d < nd; d++) {
          CK(cudaSetDevice(d)); CK(cudaEventRecord(e0[d], st[d]));
          int nx = (d + 1) % nd;
          if (kind == 0) copyK<<<b, 512, 0, st[d]>>>((int4*)src[d], (int4*)dst[nx], n16);
          else addK<<<b, 512, 0, st[d]>>>((float4*)src[d], (float4*)src2[d], (float4*)dst[nx], n16);
          CK(cudaEventRecord(e1[d], st[d]));
        }
        for (int d = 0; d < nd; d++) {
          CK(cudaSetDevice(d)); CK(cudaEventSynchronize(e1[d])); float ms; CK(cudaEventElapsedTime(&ms, e0[d], e1[d]));
          if (ms > worst) worst = ms;
        }
        if (r > 0 && worst < bestWorst) bestWorst = worst;
      }
      printf("%s every GPU -> next at once %3d blocks x 512: %.1f GB/s (slowest GPU)\n", kind ? "ringr" : "ring ", b,
             size / (bestWorst * 1e-3) / 1e9);
    }
  return 0;
}
