// Lab 03 demo: one process exports GPU memory, another maps it, through a Unix socket and an fd.
//
// The program forks before touching the device (a CUDA context does not survive fork), then:
//   child  = exporter, rank 1: socket, allocate, fill, export, send descriptor + fd, free, exit;
//   parent = importer, rank 0: socket, receive, import, map, read and check every byte, also
//            after the exporter freed its side, unmap.
// No MPI, so gdb can follow both processes: see README.md, "Step through it in gdb".
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "mccl_args.h"
#include "mccl_alloc.h"
#include "mccl_checks.h"
#include "mccl_fork.h"
#include "mccl_ipc.h"
#include "mccl_ipcsocket.h"

#define SIZE (4UL << 20)
enum { kImporterRank = 0, kExporterRank = 1 };
// Messages after the descriptor: importer -> exporter "mapped", exporter -> importer "freed",
// importer -> exporter "bye". The exporter lives until "bye", so the importer finishes first.
enum { kMapped = 1, kFreed = 2, kBye = 3 };

static unsigned char patternByte(size_t i) { return (unsigned char)(i * 7 + (i >> 8) + 3); }

#define SAY(who, ...)              \
  do {                             \
    printf("[%s] ", who);          \
    printf(__VA_ARGS__);           \
    printf("\n");                  \
  } while (0)

static mcclResult_t exporter(uint64_t hash) {
  const char* me = "exporter";
  mcclResult_t res = mcclSuccess;
  mcclIpcSocket sock;
  void* buf = NULL;
  unsigned char* host = NULL;
  mcclIpcDesc desc;
  int fd = -1, msg = 0;

  CUDACHECK(cudaSetDevice(0));
  MCCLCHECK(mcclIpcSocketInit(&sock, kExporterRank, hash, NULL));
  SAY(me, "1. created Unix socket %s (pid %d)", sock.socketName, (int)getpid());

  MCCLCHECKGOTO(mcclCuMemAlloc(&buf, NULL, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, SIZE), res, close_sock);
  SAY(me, "2. allocated %lu MiB on device 0 at %p (cuMemCreate with a POSIX-fd handle type)", SIZE >> 20, buf);
  host = malloc(SIZE);
  if (host == NULL) {
    res = mcclSystemError;
    goto free_buf;
  }
  for (size_t i = 0; i < SIZE; i++) host[i] = patternByte(i);
  CUDACHECKGOTO(cudaMemcpy(buf, host, SIZE, cudaMemcpyHostToDevice), res, free_host);
  // A copy from pageable memory may return before its bytes land: wait before another process reads them.
  CUDACHECKGOTO(cudaDeviceSynchronize(), res, free_host);
  SAY(me, "   wrote the pattern: first bytes %02x %02x %02x %02x", host[0], host[1], host[2], host[3]);

  MCCLCHECKGOTO(mcclIpcExport(buf, &desc, &fd), res, free_host);
  SAY(me, "3. exported it: handle type %s, size %llu, fd %d (meaningful only in this process)",
      desc.handleType == CU_MEM_HANDLE_TYPE_FABRIC ? "FABRIC" : "POSIX_FD", (unsigned long long)desc.size, fd);

  MCCLCHECKGOTO(mcclIpcSocketSendMsg(&sock, &desc, sizeof(desc), fd, kImporterRank, hash), res, close_fd);
  SAY(me, "4. sent the descriptor and fd %d to rank %d over SCM_RIGHTS", fd, kImporterRank);

  MCCLCHECKGOTO(mcclIpcSocketRecvMsg(&sock, &msg, sizeof(msg), NULL), res, close_fd);
  if (msg != kMapped) {
    res = mcclRemoteError;
    goto close_fd;
  }
  close(fd);
  fd = -1;
  MCCLCHECKGOTO(mcclCuMemFree(buf), res, free_host);
  buf = NULL;
  SAY(me, "8. the importer has mapped it: closed my fd and freed my allocation");
  msg = kFreed;
  MCCLCHECKGOTO(mcclIpcSocketSendMsg(&sock, &msg, sizeof(msg), -1, kImporterRank, hash), res, free_host);
  MCCLCHECKGOTO(mcclIpcSocketRecvMsg(&sock, &msg, sizeof(msg), NULL), res, free_host);
  res = msg == kBye ? mcclSuccess : mcclRemoteError;

close_fd:
  if (fd >= 0) close(fd);
free_host:
  free(host);
free_buf:
  if (buf) mcclCuMemFree(buf);
close_sock:
  mcclIpcSocketClose(&sock);
  return res;
}

static mcclResult_t checkBytes(const char* me, const void* mapped, const char* when) {
  unsigned char* host = malloc(SIZE);
  if (host == NULL) return mcclSystemError;
  cudaError_t err = cudaMemcpy(host, mapped, SIZE, cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) {
    free(host);
    CUDACHECK(err);
  }
  for (size_t i = 0; i < SIZE; i++)
    if (host[i] != patternByte(i)) {
      SAY(me, "   MISMATCH at byte %zu: 0x%02x, expected 0x%02x", i, host[i], patternByte(i));
      free(host);
      return mcclRemoteError;
    }
  SAY(me, "   verified all %lu bytes %s: first bytes %02x %02x %02x %02x", SIZE, when, host[0], host[1], host[2],
      host[3]);
  free(host);
  return mcclSuccess;
}

static mcclResult_t importer(uint64_t hash, volatile uint32_t* abortFlag) {
  const char* me = "importer";
  mcclResult_t res = mcclSuccess;
  mcclIpcSocket sock;
  mcclIpcDesc desc;
  void* mapped = NULL;
  int fd = -1, msg = 0, nDev = 0;

  CUDACHECK(cudaGetDeviceCount(&nDev));
  int dev = nDev > 1 ? 1 : 0;
  CUDACHECK(cudaSetDevice(dev));
  MCCLCHECK(mcclIpcSocketInit(&sock, kImporterRank, hash, abortFlag));
  SAY(me, "1. created Unix socket %s (pid %d)", sock.socketName, (int)getpid());

  MCCLCHECKGOTO(mcclIpcSocketRecvMsg(&sock, &desc, sizeof(desc), &fd), res, close_sock);
  SAY(me, "5. received a descriptor (size %llu, from pid %d device %d) and fd %d: the same memory, a new number",
      (unsigned long long)desc.size, desc.ownerPid, desc.ownerDev, fd);

  MCCLCHECKGOTO(mcclIpcImport(&desc, fd, dev, &mapped), res, close_fd);
  SAY(me, "6. imported and mapped it for device %d at %p (cuMemImportFromShareableHandle, cuMemAddressReserve,", dev,
      mapped);
  SAY(me, "   cuMemMap, cuMemSetAccess); closing the received fd: the mapping keeps the memory");
  close(fd);
  fd = -1;

  SAY(me, "7. reading it with cudaMemcpy from the mapping");
  MCCLCHECKGOTO(checkBytes(me, mapped, "written by the exporter"), res, unmap);
  msg = kMapped;
  MCCLCHECKGOTO(mcclIpcSocketSendMsg(&sock, &msg, sizeof(msg), -1, kExporterRank, hash), res, unmap);
  MCCLCHECKGOTO(mcclIpcSocketRecvMsg(&sock, &msg, sizeof(msg), NULL), res, unmap);
  if (msg != kFreed) {
    res = mcclRemoteError;
    goto unmap;
  }
  SAY(me, "9. the exporter freed its side; reading again");
  MCCLCHECKGOTO(checkBytes(me, mapped, "after the exporter's free"), res, unmap);
  MCCLCHECKGOTO(mcclIpcUnmap(mapped), res, close_sock);
  mapped = NULL;
  SAY(me, "10. unmapped: the physical memory is released now that no process maps it");
  msg = kBye;
  MCCLCHECKGOTO(mcclIpcSocketSendMsg(&sock, &msg, sizeof(msg), -1, kExporterRank, hash), res, close_sock);

unmap:
  if (mapped) mcclIpcUnmap(mapped);
close_fd:
  if (fd >= 0) close(fd);
close_sock:
  mcclIpcSocketClose(&sock);
  return res;
}

int main(int argc, char** argv) {
  mcclArgsCheck(argc, argv, 0, "",
                "Lab 03's narrated example: a forked exporter sends GPU memory as an fd over a Unix socket,\n"
                "the importer maps and reads it.\n"
                "Settings come from MCCL_* environment variables (docs/parameters.md).");
  // Both processes print; line buffering keeps their lines whole and in order of writing.
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t hash = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec;
  printf("lab 03 demo (%s backend): pass GPU memory to another process as an fd over a Unix socket\n",
         MCCL_BACKEND_NAME);
  fflush(stdout);
  // The exporter dies with us; a failure on either side ends both (mccl_fork.h).
  pid_t pid = mcclForkChild();
  if (pid < 0) {
    perror("fork");
    return 1;
  }
  if (pid == 0) _exit(exporter(hash) == mcclSuccess ? 0 : 1);
  volatile uint32_t abortFlag = 0;
  mcclChildWatch* watch;
  if (mcclChildWatchStart(pid, &abortFlag, &watch) != mcclSuccess) return 1;
  mcclResult_t res = importer(hash, &abortFlag);
  int status = 0;
  int childOk = mcclChildWatchEnd(watch, res != mcclSuccess, &status) == mcclSuccess && WIFEXITED(status) &&
                WEXITSTATUS(status) == 0;
  if (res != mcclSuccess || !childOk) {
    printf("demo FAILED: importer %s, exporter %s\n", mcclGetErrorString(res), childOk ? "ok" : "failed");
    return 1;
  }
  printf("demo OK: the importer read the exporter's memory through its own mapping, before and after the free\n");
  return 0;
}
