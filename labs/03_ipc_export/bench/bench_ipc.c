// Lab 03 benchmark, one command, two processes (fork before any device call):
//   export latency      mcclIpcExport + close of the fd, in the exporter (median of repeats);
//   import+map latency  mcclIpcImport (import, reserve, map, set access), in the importer;
//   unmap latency       mcclIpcUnmap;
//   peer read           with 2+ devices: cudaMemcpyAsync device-to-device from the imported
//                       mapping of the exporter's buffer (device 0) into a local buffer on device 1,
//                       256 MiB, CUDA-event median, GB/s. On the sim backend this is a memcpy figure.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "mccl_args.h"
#include "mccl_alloc.h"
#include "mccl_checks.h"
#include "mccl_ipc.h"
#include "mccl_ipcsocket.h"
#include "mccl_fork.h"
#include "mccl_benchout.h"
#include "mccl_utils.h"

#define LAT_REPS 51
#define BW_WARMUP 2
#define BW_REPS 11
#define BW_SIZE (256UL << 20)

typedef struct {
  mcclIpcDesc desc;
  double exportUs;
} exportReport;

static mcclResult_t exporter(uint64_t hash, size_t size) {
  mcclResult_t res = mcclSuccess;
  mcclIpcSocket sock;
  void* buf = NULL;
  exportReport rep;
  double t[LAT_REPS];
  int fd = -1, bye = 0;
  CUDACHECK(cudaSetDevice(0));
  MCCLCHECK(mcclIpcSocketInit(&sock, 1, hash, NULL));
  MCCLCHECKGOTO(mcclCuMemAlloc(&buf, NULL, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, size), res, close_sock);
  CUDACHECKGOTO(cudaMemset(buf, 0x5a, size), res, free_buf);
  CUDACHECKGOTO(cudaDeviceSynchronize(), res, free_buf);
  for (int i = 0; i < LAT_REPS; i++) {
    double t0 = 1e6 * mcclClockSec();
    MCCLCHECKGOTO(mcclIpcExport(buf, &rep.desc, &fd), res, free_buf);
    close(fd);
    t[i] = 1e6 * mcclClockSec() - t0;
  }
  rep.exportUs = mcclBenchMedian(t, LAT_REPS);
  MCCLCHECKGOTO(mcclIpcExport(buf, &rep.desc, &fd), res, free_buf);
  MCCLCHECKGOTO(mcclIpcSocketSendMsg(&sock, &rep, sizeof(rep), fd, 0, hash), res, close_fd);
  // Keep the buffer until the importer is done timing.
  MCCLCHECKGOTO(mcclIpcSocketRecvMsg(&sock, &bye, sizeof(bye), NULL), res, close_fd);
close_fd:
  close(fd);
free_buf:
  mcclCuMemFree(buf);
close_sock:
  mcclIpcSocketClose(&sock);
  return res;
}

static mcclResult_t importer(uint64_t hash, int nDev, size_t size) {
  mcclResult_t res = mcclSuccess;
  mcclIpcSocket sock;
  exportReport rep;
  void *mapped = NULL, *local = NULL;
  double tImport[LAT_REPS], tUnmap[LAT_REPS], bw[BW_REPS];
  int fd = -1, bye = 1, dev = nDev > 1 ? 1 : 0;
  cudaStream_t stream = NULL;
  cudaEvent_t start = NULL, stop = NULL;
  CUDACHECK(cudaSetDevice(dev));
  MCCLCHECK(mcclIpcSocketInit(&sock, 0, hash, NULL));
  MCCLCHECKGOTO(mcclIpcSocketRecvMsg(&sock, &rep, sizeof(rep), &fd), res, close_sock);
  for (int i = 0; i < LAT_REPS; i++) {
    double t0 = 1e6 * mcclClockSec();
    MCCLCHECKGOTO(mcclIpcImport(&rep.desc, fd, dev, &mapped), res, close_fd);
    double t1 = 1e6 * mcclClockSec();
    MCCLCHECKGOTO(mcclIpcUnmap(mapped), res, close_fd);
    mapped = NULL;
    tImport[i] = t1 - t0;
    tUnmap[i] = 1e6 * mcclClockSec() - t1;
  }
  printf("# %-34s %12s %12s %6s\n", "operation", "bytes", "median us", "reps");
  printf("  %-34s %12zu %12.1f %6d\n", "export (mcclIpcExport + close)", size, rep.exportUs, LAT_REPS);
  printf("  %-34s %12zu %12.1f %6d\n", "import+map (mcclIpcImport)", size, mcclBenchMedian(tImport, LAT_REPS),
         LAT_REPS);
  printf("  %-34s %12zu %12.1f %6d\n", "unmap (mcclIpcUnmap)", size, mcclBenchMedian(tUnmap, LAT_REPS), LAT_REPS);

  if (nDev < 2) {
    printf("# peer read: skipped, needs 2 devices (found %d)\n", nDev);
    goto send_bye;
  }
  MCCLCHECKGOTO(mcclIpcImport(&rep.desc, fd, dev, &mapped), res, close_fd);
  CUDACHECKGOTO(cudaMalloc(&local, size), res, unmap);
  CUDACHECKGOTO(cudaStreamCreate(&stream), res, free_local);
  CUDACHECKGOTO(cudaEventCreate(&start), res, destroy_stream);
  CUDACHECKGOTO(cudaEventCreate(&stop), res, destroy_start);
  for (int i = 0; i < BW_WARMUP + BW_REPS; i++) {
    float ms = 0;
    CUDACHECKGOTO(cudaEventRecord(start, stream), res, destroy_stop);
    CUDACHECKGOTO(cudaMemcpyAsync(local, mapped, size, cudaMemcpyDeviceToDevice, stream), res, destroy_stop);
    CUDACHECKGOTO(cudaEventRecord(stop, stream), res, destroy_stop);
    CUDACHECKGOTO(cudaEventSynchronize(stop), res, destroy_stop);
    CUDACHECKGOTO(cudaEventElapsedTime(&ms, start, stop), res, destroy_stop);
    if (i >= BW_WARMUP) bw[i - BW_WARMUP] = ms;
  }
  {
    double ms = mcclBenchMedian(bw, BW_REPS);
    unsigned char probe[4] = {0};
    CUDACHECKGOTO(cudaMemcpy(probe, (char*)local + size - 4, 4, cudaMemcpyDeviceToHost), res, destroy_stop);
    printf(
        "# peer read: device %d <- device 0 through the imported mapping, cudaMemcpyAsync D2D, CUDA-event median%s\n",
        dev, strcmp(MCCL_BACKEND_NAME, "sim") == 0 ? " (sim backend: a host memcpy figure, not a GPU one)" : "");
    printf("# %-34s %12s %12s %10s %6s %7s\n", "operation", "bytes", "median ms", "GB/s", "reps", "#wrong");
    printf("  %-34s %12zu %12.3f %10.2f %6d %7d\n", "peer read (imported mapping)", size, ms, size / 1e9 / (ms / 1e3),
           BW_REPS, probe[0] != 0x5a || probe[3] != 0x5a);
  }
destroy_stop:
  cudaEventDestroy(stop);
destroy_start:
  cudaEventDestroy(start);
destroy_stream:
  cudaStreamDestroy(stream);
free_local:
  cudaFree(local);
unmap:
  mcclIpcUnmap(mapped);
  mapped = NULL;
  if (res != mcclSuccess) goto close_fd;
send_bye:
  MCCLCHECKGOTO(mcclIpcSocketSendMsg(&sock, &bye, sizeof(bye), -1, 1, hash), res, close_fd);
close_fd:
  if (mapped) mcclIpcUnmap(mapped);
  close(fd);
close_sock:
  mcclIpcSocketClose(&sock);
  return res;
}

int main(int argc, char** argv) {
  mcclArgsCheck(argc, argv, 0, "",
                "Lab 03's benchmark: export, import+map and unmap latency, and the peer read bandwidth\n"
                "through an imported mapping (two forked processes).\n"
                "Settings come from MCCL_* environment variables (docs/parameters.md).");
  setvbuf(stdout, NULL, _IOLBF, 0);
  // Device count needs the driver; ask in a throwaway child so the parent forks with no context.
  int pipeFd[2];
  if (pipe(pipeFd) != 0) return 1;
  pid_t probe = mcclForkChild();  // dies with this process
  if (probe == 0) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    _exit(write(pipeFd[1], &n, sizeof(n)) == sizeof(n) ? 0 : 1);
  }
  int nDev = 0;
  if (read(pipeFd[0], &nDev, sizeof(nDev)) != sizeof(nDev)) nDev = 0;
  waitpid(probe, NULL, 0);
  close(pipeFd[0]);
  close(pipeFd[1]);
  if (nDev < 1) {
    printf("# lab 03 bench: no device\n");
    return 1;
  }
  size_t size = nDev > 1 ? BW_SIZE : (32UL << 20);
  printf("# lab 03 IPC export bench, %s backend, %d device(s)%s\n", MCCL_BACKEND_NAME, nDev,
         strcmp(MCCL_BACKEND_NAME, "sim") == 0 ? ": sim figures time the CPU implementation" : "");
  uint64_t hash = ((uint64_t)getpid() << 32) ^ mcclClockUs();
  pid_t pid = mcclForkChild();  // dies with this process
  if (pid < 0) return 1;
  if (pid == 0) _exit(exporter(hash, size) == mcclSuccess ? 0 : 1);
  mcclResult_t res = importer(hash, nDev, size);
  int status = 0;
  waitpid(pid, &status, 0);
  return res == mcclSuccess && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
