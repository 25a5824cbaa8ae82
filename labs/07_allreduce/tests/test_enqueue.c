// Lab 07's enqueue layer in one process driving up to 4 devices (mcclLabCommInitAll; 4 on sim): a group
// is one launch (the test reads each communicator's launch counter), a group too large for one launch
// takes the fewest; PreMulSum's operations
// and their bad uses; the new functions' argument checks; a communicator destroyed while a group holds
// its tasks; GroupSimulateEnd; a kernel that reports its abort in the status word; and the watchdog naming
// a type that differs between two ranks of one process.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "enq_test_util.h"
#include "mccl_test.h"
#include "mccl_utils.h"

// A group of eight 8 KiB allreduces (one type, one operation) is one launch on every communicator
// (one-shot's batch), also with the ring forced (the generic kernel's works, which may differ in
// operation); an allreduce next to an allgather is one launch (the generic kernel runs both); an
// all-to-all of sends and receives is one launch; a single call is one.
static void groupIsOneLaunch(void) {
  int n = enqRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  struct enqSet s;
  const size_t count = 2048, slot = enqBufferBytes(count, mcclFloat32, n);
  enqSetUp(&s, n, 8, 8 * slot);  // eight channels: a generic launch's works take one each at least
  struct enqCall c[8];
  for (int j = 0; j < 8; j++)
    c[j] = (struct enqCall){mcclFuncAllReduce,           mcclFloat32, mcclSum, 0, count, 0, j % 3 == 0,
                            mcclTestSeed() + (uint64_t)j};
  enqSetRun(&s, c, 8, slot, 1, 1);
  arForce("ring", NULL);
  for (int j = 0; j < 8; j++) c[j].op = (mcclRedOp_t)(j % mcclNumOps);
  enqSetRun(&s, c, 8, slot, 1, 1);
  struct enqCall mixed[2] = {{mcclFuncAllReduce, mcclFloat32, mcclSum, 0, count, 0, 0, mcclTestSeed() + 11},
                             {mcclFuncAllGather, mcclFloat32, mcclSum, 0, count / n, 0, 1, mcclTestSeed() + 12}};
  enqSetRun(&s, mixed, 2, slot, 1, 1);
  arForce(NULL, NULL);
  struct enqCall a2a = {mcclFuncAlltoAll, mcclInt32, mcclSum, 0, count / n, 0, 0, mcclTestSeed() + 13};
  enqSetRun(&s, &a2a, 1, slot, 1, 1);
  struct enqCall one = {mcclFuncReduceScatter, mcclFloat64, mcclAvg, 0, 333, 0, 0, mcclTestSeed() + 14};
  enqSetRun(&s, &one, 1, slot, 1, 1);
  enqTearDown(&s);
}

// A group of more works than one launch holds takes as few launches as the room allows: collective works
// (the ring forced; a launch holds what its argument's room and its channels allow, a channel a work at
// least) and one-shot works past their 256 KiB scratch.
static void groupOverflowsLaunch(void) {
  int n = enqRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  // A launch holds as many collective works as its argument's room, at most one per channel.
  const int room = (int)((MCCL_DEV_ARGS_BYTES - sizeof(struct mcclDevKernelArgs)) / sizeof(struct mcclDevWorkColl));
  const int nChannels = room < MCCL_SIGNAL_MAX_BLOCKS ? room : MCCL_SIGNAL_MAX_BLOCKS;
  const int k = nChannels + 3;
  struct enqSet s;
  const size_t count = 64, slot = enqBufferBytes(count, mcclInt32, n);
  enqSetUp(&s, n, nChannels, (size_t)k * slot);
  struct enqCall c[ENQ_MAXCALLS];
  for (int j = 0; j < k; j++)
    c[j] = (struct enqCall){mcclFuncAllReduce, mcclInt32, mcclSum, 0, count, 0, 0, mcclTestSeed() + (uint64_t)j};
  arForce("ring", NULL);
  enqSetRun(&s, c, k, slot, 1, 2);
  arForce(NULL, NULL);
  // one-shot: 5 x 64 KiB of float32 take two launches (the scratch holds 256 KiB a launch)
  enqTearDown(&s);
  const size_t big = 16384, bigSlot = enqBufferBytes(big, mcclFloat32, n);
  enqSetUp(&s, n, 2, 5 * bigSlot);
  for (int j = 0; j < 5; j++)
    c[j] = (struct enqCall){mcclFuncAllReduce, mcclFloat32, mcclSum, 0, big, 0, 0, mcclTestSeed() + 100 + (uint64_t)j};
  if (s.comm[0] && s.comm[0]->signalWin) enqSetRun(&s, c, 5, bigSlot, 1, 2);
  enqTearDown(&s);
}

// PreMulSum's operations: created per communicator and type, destroyed once; every bad use refused with
// mcclInvalidArgument before anything is enqueued.
static void preMulSumOps(void) {
  int n = enqRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  struct enqSet s;
  enqSetUp(&s, 2, 1, 4096);
  CHECK_STOPPED();
  mcclLabComm *a = s.comm[0], *b = s.comm[1];
  float two = 2.0f;
  mcclRedOp_t op, opB;
  EXPECT_CUDA_OK(cudaSetDevice(a->cudaDev));
  EXPECT_RES(mcclLabRedOpCreatePreMulSum(NULL, &two, mcclFloat32, mcclScalarHostImmediate, a), mcclInvalidArgument);
  EXPECT_RES(mcclLabRedOpCreatePreMulSum(&op, NULL, mcclFloat32, mcclScalarHostImmediate, a), mcclInvalidArgument);
  EXPECT_RES(mcclLabRedOpCreatePreMulSum(&op, &two, (mcclDataType_t)mcclNumTypes, mcclScalarHostImmediate, a),
             mcclInvalidArgument);
  EXPECT_RES(mcclLabRedOpCreatePreMulSum(&op, &two, mcclFloat32, (mcclScalarResidence_t)7, a), mcclInvalidArgument);
  EXPECT_RES(mcclLabRedOpCreatePreMulSum(&op, &two, mcclFloat32, mcclScalarHostImmediate, NULL), mcclInvalidArgument);
  EXPECT_OK(mcclLabRedOpCreatePreMulSum(&op, &two, mcclFloat32, mcclScalarHostImmediate, a));
  EXPECT_OK(mcclLabRedOpCreatePreMulSum(&opB, &two, mcclFloat32, mcclScalarHostImmediate, b));
  EXPECT_TRUE((int)op >= mcclNumOps && (int)opB >= mcclNumOps && op != opB);
  const uint64_t launches = a->nLaunches;
  // another communicator's operation, and one for another type
  EXPECT_RES(mcclLabAllReduce(s.send[0], s.recv[0], 4, mcclFloat32, opB, a, s.stream[0]), mcclInvalidArgument);
  EXPECT_RES(mcclLabAllReduce(s.send[0], s.recv[0], 4, mcclFloat64, op, a, s.stream[0]), mcclInvalidArgument);
  EXPECT_RES(mcclLabReduce(s.send[0], s.recv[0], 4, mcclFloat32, (mcclRedOp_t)(op + 1000), 0, a, s.stream[0]),
             mcclInvalidArgument);
  // destroyed: refused after, and a second destroy too; built-ins are not destroyed
  EXPECT_OK(mcclLabRedOpDestroy(op, a));
  EXPECT_RES(mcclLabReduceScatter(s.send[0], s.recv[0], 4, mcclFloat32, op, a, s.stream[0]), mcclInvalidArgument);
  EXPECT_RES(mcclLabRedOpDestroy(op, a), mcclInvalidArgument);
  EXPECT_RES(mcclLabRedOpDestroy(opB, a), mcclInvalidArgument);
  EXPECT_RES(mcclLabRedOpDestroy(mcclSum, a), mcclInvalidArgument);
  EXPECT_RES(mcclLabRedOpDestroy(opB, NULL), mcclInvalidArgument);
  EXPECT_EQ(a->nLaunches, launches);
  EXPECT_OK(mcclLabRedOpDestroy(opB, b));
  enqTearDown(&s);  // an operation left undestroyed is freed with its communicator (ASan would see a leak)
}

// The new functions' and the counts' argument checks: mcclInvalidArgument, nothing launched.
static void argumentChecks(void) {
  int n = enqRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  struct enqSet s;
  enqSetUp(&s, 2, 1, 4096);
  CHECK_STOPPED();
  mcclLabComm* c = s.comm[0];
  char *in = (char*)s.send[0], *out = (char*)s.recv[0];
  cudaStream_t st = s.stream[0];
  EXPECT_CUDA_OK(cudaSetDevice(c->cudaDev));
  const uint64_t launches = c->nLaunches;
  // roots and peers out of range
  EXPECT_RES(mcclLabGather(in, out, 4, mcclInt32, 2, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabScatter(in, out, 4, mcclInt32, -1, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabSend(in, 4, mcclInt32, 2, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabRecv(out, 4, mcclInt32, -1, c, st), mcclInvalidArgument);
  // AlltoAll's buffers overlapping partly (equal buffers are accepted, as NCCL accepts them)
  EXPECT_RES(mcclLabAlltoAll(in, in + 16, 4, mcclInt32, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabAlltoAll(in + 4, in, 4, mcclInt32, c, st), mcclInvalidArgument);
  // Gather and Scatter overlapping other than in place (rank 0 is the root: its block is at +0)
  EXPECT_RES(mcclLabGather(out + 4, out, 4, mcclInt32, 0, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabScatter(in, in + 4, 4, mcclInt32, 0, c, st), mcclInvalidArgument);
  // AllReduce's buffers overlapping without being equal
  EXPECT_RES(mcclLabAllReduce(in, in + 4, 4, mcclInt32, mcclSum, c, st), mcclInvalidArgument);
  // counts: bytes past size_t, and past the 2^63 the kernels index (2^63 int8 elements)
  EXPECT_RES(mcclLabAllReduce(in, out, SIZE_MAX / 2, mcclInt32, mcclSum, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabAllReduce(in, out, (size_t)1 << 63, mcclInt8, mcclSum, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabAlltoAll(in, out, (size_t)1 << 62, mcclInt8, c, st), mcclInvalidArgument);   // x 2 ranks
  EXPECT_RES(mcclLabGather(in, out, (size_t)1 << 62, mcclInt8, 0, c, st), mcclInvalidArgument);  // the root's x 2
  EXPECT_RES(mcclLabSend(in, SIZE_MAX / 4, mcclFloat64, 1, c, st), mcclInvalidArgument);
  // NULL buffers where the rank uses them
  EXPECT_RES(mcclLabAlltoAll(NULL, out, 4, mcclInt32, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabScatter(NULL, out, 4, mcclInt32, 0, c, st), mcclInvalidArgument);  // the root reads it
  EXPECT_RES(mcclLabGather(in, NULL, 4, mcclInt32, 0, c, st), mcclInvalidArgument);    // the root writes it
  EXPECT_EQ(c->nLaunches, launches);
  // inside a group a failed call fails the group: its end launches nothing and returns the error
  EXPECT_OK(mcclLabGroupStart());
  EXPECT_OK(mcclLabAllReduce(in, out, 4, mcclInt32, mcclSum, c, st));
  EXPECT_RES(mcclLabGather(in, out, 4, mcclInt32, 5, c, st), mcclInvalidArgument);
  EXPECT_RES(mcclLabGroupEnd(), mcclInvalidArgument);
  EXPECT_EQ(c->nLaunches, launches);
  EXPECT_EQ(c->planner.nTasks, 0);
  // groups: an end without a start
  EXPECT_RES(mcclLabGroupEnd(), mcclInvalidUsage);
  enqTearDown(&s);
}

// A communicator destroyed while this thread's group holds its tasks: the group's end returns
// mcclInvalidUsage and still runs the other communicators' tasks; nothing is touched after the free.
// Two one-rank communicators, so each one's calls complete alone.
static void destroyInOpenGroup(void) {
  if (enqDevices() < 1) SKIP("no CUDA device");
  mcclLabComm *a = NULL, *b = NULL;
  EXPECT_OK(mcclLabCommInitAll(&a, 1, NULL, 1, mcclLocalTransports));
  EXPECT_OK(mcclLabCommInitAll(&b, 1, NULL, 1, mcclLocalTransports));
  CHECK_STOPPED();
  float *buf, host[64], back[64];
  EXPECT_CUDA_OK(cudaSetDevice(b->cudaDev));
  EXPECT_CUDA_OK(cudaMalloc((void**)&buf, 2 * sizeof(host)));
  for (int i = 0; i < 64; i++) host[i] = (float)i;
  EXPECT_CUDA_OK(mcclTestCopyToDevice(buf, host, sizeof(host)));
  EXPECT_OK(mcclLabGroupStart());
  EXPECT_OK(mcclLabAllReduce(buf, buf + 64, 64, mcclFloat32, mcclSum, a, NULL));
  EXPECT_OK(mcclLabAllReduce(buf, buf + 64, 64, mcclFloat32, mcclSum, b, NULL));
  EXPECT_OK(mcclLabCommDestroy(a));
  EXPECT_RES(mcclLabGroupEnd(), mcclInvalidUsage);
  EXPECT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_CUDA_OK(cudaMemcpy(back, buf + 64, sizeof(back), cudaMemcpyDeviceToHost));
  EXPECT_MEM_EQ(back, host, sizeof(host));  // b's allreduce of one rank ran: a copy
  EXPECT_EQ(b->nLaunches, 1u);
  EXPECT_CUDA_OK(cudaFree(buf));
  EXPECT_OK(mcclLabCommDestroy(b));
}

// GroupSimulateEnd: the tuning model's estimate of the group's calls, nothing launched or written, the
// tasks dropped (the next group starts empty).
static void simulateEnd(void) {
  int n = enqRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  struct enqSet s;
  enqSetUp(&s, n, 1, 1 << 20);
  CHECK_STOPPED();
  unsigned char poison[256], back[256];
  memset(poison, ENQ_POISON, sizeof(poison));
  uint64_t launches[ENQ_MAXDEV];
  for (int i = 0; i < n; i++) {
    EXPECT_CUDA_OK(cudaSetDevice(s.comm[i]->cudaDev));
    EXPECT_CUDA_OK(mcclTestCopyToDevice(s.recv[i], poison, sizeof(poison)));
    launches[i] = s.comm[i]->nLaunches;
  }
  float est = -1, small = -1;
  EXPECT_OK(mcclLabGroupStart());
  for (int i = 0; i < n; i++)
    EXPECT_OK(mcclLabAllReduce(s.send[i], s.recv[i], 64, mcclFloat32, mcclSum, s.comm[i], s.stream[i]));
  EXPECT_OK(mcclLabGroupSimulateEnd(&small));
  // The communicators run at once: the group's estimate is one communicator's, not n of them.
  float one = -1;
  EXPECT_OK(mcclLabGroupStart());
  EXPECT_OK(mcclLabAllReduce(s.send[0], s.recv[0], 64, mcclFloat32, mcclSum, s.comm[0], s.stream[0]));
  EXPECT_OK(mcclLabGroupSimulateEnd(&one));
  EXPECT_TRUE(one > 0 && one == small);
  EXPECT_OK(mcclLabGroupStart());
  for (int i = 0; i < n; i++) {
    EXPECT_OK(mcclLabAllReduce(s.send[i], s.recv[i], 1 << 18, mcclFloat32, mcclSum, s.comm[i], s.stream[i]));
    EXPECT_OK(mcclLabAllGather(s.send[i], s.recv[i], 64, mcclFloat32, s.comm[i], s.stream[i]));
  }
  EXPECT_OK(mcclLabGroupSimulateEnd(&est));
  EXPECT_TRUE(small > 0 && est > small);
  EXPECT_RES(mcclLabGroupSimulateEnd(NULL), mcclInvalidArgument);  // no group open: refused all the same
  enqSyncAll(&s);
  for (int i = 0; i < n; i++) {
    EXPECT_EQ(s.comm[i]->nLaunches, launches[i]);
    EXPECT_EQ(s.comm[i]->planner.nTasks, 0);
    EXPECT_CUDA_OK(cudaSetDevice(s.comm[i]->cudaDev));
    EXPECT_CUDA_OK(cudaMemcpy(back, s.recv[i], sizeof(back), cudaMemcpyDeviceToHost));
    EXPECT_MEM_EQ(back, poison, sizeof(back));
  }
  enqTearDown(&s);
}

// A kernel that sees the abort flag ends and says so in the communicator's status word: rank 0 alone
// runs a ring allreduce (its peer never does), waits in the kernel, and is aborted.
static void abortStatus(void) {
  int n = enqRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  struct enqSet s;
  enqSetUp(&s, 2, 1, 1 << 16);
  CHECK_STOPPED();
  mcclLabComm* c = s.comm[0];
  EXPECT_EQ(*c->status, 0u);
  arForce("ring", NULL);
  EXPECT_CUDA_OK(cudaSetDevice(c->cudaDev));
  EXPECT_OK(mcclLabAllReduce(s.send[0], s.recv[0], 1 << 12, mcclFloat32, mcclSum, c, s.stream[0]));
  arForce(NULL, NULL);
  EXPECT_EQ(cudaStreamQuery(s.stream[0]), cudaErrorNotReady);  // waiting for rank 1
  EXPECT_OK(mcclLabCommAbort(c));
  EXPECT_CUDA_OK(cudaStreamSynchronize(s.stream[0]));
  EXPECT_EQ(*c->status, (uint32_t)mcclDevStatusAborted);
  EXPECT_EQ(*s.comm[1]->status, 0u);
  enqTearDown(&s);
}

// The watchdog, with the ranks in one process (mcclLabCommInitAll: every page is read by a thread of the
// same process): op #1 is a call the two ranks make differently, so the rings move different bytes and wait.
// Both ranks report within the timeout + 1 s, with the same line, and the async result mcclInvalidUsage; abort
// then ends both kernels.
#define WATCHDOG_MS 500
static void watchdogReports(void (*call)(struct enqSet* s, int r), size_t bytes, const char* want) {
  int n = enqRanksHere();
  if (n < 2) SKIP("needs 2 devices");
  setenv("MCCL_WATCHDOG_TIMEOUT", "500", 1);
  mcclParamResetAll();
  struct enqSet s;
  enqSetUp(&s, 2, 1, bytes);
  unsetenv("MCCL_WATCHDOG_TIMEOUT");
  mcclParamResetAll();
  CHECK_STOPPED();
  EXPECT_TRUE(s.comm[0]->watchdog != NULL);
  const char* line = NULL;
  EXPECT_EQ(mcclLabWatchdogResult(s.comm[0], &line), mcclSuccess);
  EXPECT_TRUE(line == NULL);
  arForce("ring", NULL);
  EXPECT_OK(mcclLabGroupStart());
  for (int r = 0; r < 2; r++) call(&s, r);
  EXPECT_OK(mcclLabGroupEnd());
  arForce(NULL, NULL);
  const double t0 = mcclClockSec();
  double ms = 0;
  mcclResult_t got[2] = {mcclSuccess, mcclSuccess};
  while ((got[0] == mcclSuccess || got[1] == mcclSuccess) && ms < WATCHDOG_MS + 10000) {
    for (int r = 0; r < 2; r++) got[r] = mcclLabWatchdogResult(s.comm[r], NULL);
    mcclSleepMs(5);
    ms = 1e3 * (mcclClockSec() - t0);
  }
  EXPECT_LE(ms, WATCHDOG_MS + 1000.0);
  const char* lines[2] = {NULL, NULL};
  for (int r = 0; r < 2; r++) {
    EXPECT_EQ(mcclLabWatchdogResult(s.comm[r], &lines[r]), mcclInvalidUsage);
    if (lines[r] == NULL || strstr(lines[r], want) == NULL)
      mcclTestFailAt(__FILE__, __LINE__, "rank %d's line lacks \"%s\": %s", r, want, lines[r] ? lines[r] : "(none)");
  }
  if (lines[0]) printf("  both ranks within %.0f ms (timeout %d ms): %s\n", ms, WATCHDOG_MS, lines[0]);
  for (int r = 0; r < 2; r++) EXPECT_OK(mcclLabCommAbort(s.comm[r]));
  enqSyncAll(&s);
  enqTearDown(&s);
}

// An AllReduce of float32 on rank 0 and of float64 on rank 1.
static void allReduceTypes(struct enqSet* s, int r) {
  EXPECT_OK(mcclLabAllReduce(s->send[r], s->recv[r], 1024, r == 0 ? mcclFloat32 : mcclFloat64, mcclSum, s->comm[r],
                             s->stream[r]));
}
static void watchdogNamesType(void) {
  watchdogReports(allReduceTypes, 1 << 16,
                  "op #1: rank 0 AllReduce count 1024 float32 sum, rank 1 AllReduce count 1024 float64 sum (type "
                  "differs)");
}

// A Broadcast whose count does not fit the record's word with its root (2^24 elements and more), so the count
// goes to the record's long word; each rank names the other as the root.
#define LONG_COUNT ((1u << 24) + 5)
static void broadcastRoots(struct enqSet* s, int r) {
  EXPECT_OK(mcclLabBroadcast(s->send[r], s->recv[r], LONG_COUNT, mcclUint8, 1 - r, s->comm[r], s->stream[r]));
}
static void watchdogNamesRootOfLongCount(void) {
  watchdogReports(broadcastRoots, LONG_COUNT,
                  "op #1: rank 0 Broadcast count 16777221 uint8 root 1, rank 1 Broadcast count 16777221 uint8 root 0 "
                  "(root differs)");
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(groupIsOneLaunch), MCCL_TEST_CASE(groupOverflowsLaunch), MCCL_TEST_CASE(preMulSumOps),
               MCCL_TEST_CASE(argumentChecks), MCCL_TEST_CASE(destroyInOpenGroup), MCCL_TEST_CASE(simulateEnd),
               MCCL_TEST_CASE(abortStatus), MCCL_TEST_CASE(watchdogNamesType),
               MCCL_TEST_CASE(watchdogNamesRootOfLongCount))
