// Logging and parameters are read from many threads at once (proxy threads, sim stream workers,
// and from lab 06 the sim's kernel threads): hammer them, and let TSan (make test TSAN=1) see the
// accesses. Each case checks every thread saw the right value; under TSan a data race fails the run.
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "mccl_debug.h"
#include "mccl_param.h"
#include "mccl_test.h"

enum { kThreads = 16, kIters = 20000 };

static pthread_barrier_t start;
static atomic_int wrong;
static atomic_int stopResetting;

// Threads race to the very first log call of the process: one initialises the level, the mask, the
// host name and the log file; the others must see all of it, not just the level.
static void* firstLog(void* arg) {
  (void)arg;
  pthread_barrier_wait(&start);
  for (int i = 0; i < 100; i++) {
    if (mcclDebugLevel() != MCCL_LOG_INFO) atomic_fetch_add(&wrong, 1);
    INFO(MCCL_TEST, "thread log line %d", i);   // printed: reads mask, host name and file
    INFO(MCCL_NET, "filtered out by the mask");  // not printed: reads the mask only
  }
  return NULL;
}

// Must run first in this binary: nothing may have logged yet (the harness itself does not).
static void debugFirstUseRace(void) {
  setenv("MCCL_DEBUG", "INFO", 1);
  setenv("MCCL_DEBUG_SUBSYS", "TEST", 1);
  setenv("MCCL_DEBUG_FILE", "/dev/null", 1);  // every line is formatted and written, nowhere to see
  mcclParamResetAll();
  atomic_store(&wrong, 0);
  pthread_t t[kThreads];
  EXPECT_EQ(pthread_barrier_init(&start, NULL, kThreads), 0);
  for (int i = 0; i < kThreads; i++) EXPECT_EQ(pthread_create(&t[i], NULL, firstLog, NULL), 0);
  for (int i = 0; i < kThreads; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&start);
  EXPECT_EQ(atomic_load(&wrong), 0);
}

static void* readParams(void* arg) {
  (void)arg;
  pthread_barrier_wait(&start);
  for (int i = 0; i < kIters; i++) {
    if (mcclParamBuffsize() != 65536) atomic_fetch_add(&wrong, 1);
    if (mcclParamShmTimeout() != 30000) atomic_fetch_add(&wrong, 1);  // the default: unset below
    const char* dir = mcclParamIpcDir();
    if (dir == NULL || strcmp(dir, "/tmp/minccl-threads") != 0) atomic_fetch_add(&wrong, 1);
    if (mcclParamProxyCpuset() != NULL) atomic_fetch_add(&wrong, 1);
  }
  return NULL;
}

static void* resetParams(void* arg) {
  (void)arg;
  pthread_barrier_wait(&start);
  while (!atomic_load(&stopResetting)) mcclParamResetAll();
  return NULL;
}

// Many threads read the same parameters for the first time at once (each must be read from the
// environment by one of them, and every reader must get the whole value), then again while another
// thread keeps forgetting them.
static void paramsFirstUseRace(void) {
  setenv("MCCL_BUFFSIZE", "65536", 1);
  setenv("MCCL_IPC_DIR", "/tmp/minccl-threads", 1);
  unsetenv("MCCL_SHM_TIMEOUT");
  unsetenv("MCCL_PROXY_CPUSET");
  for (int withReset = 0; withReset <= 1; withReset++) {
    mcclParamResetAll();
    atomic_store(&wrong, 0);
    atomic_store(&stopResetting, 0);
    int n = kThreads + withReset;
    pthread_t t[kThreads + 1];
    EXPECT_EQ(pthread_barrier_init(&start, NULL, n), 0);
    for (int i = 0; i < kThreads; i++) EXPECT_EQ(pthread_create(&t[i], NULL, readParams, NULL), 0);
    if (withReset) EXPECT_EQ(pthread_create(&t[kThreads], NULL, resetParams, NULL), 0);
    for (int i = 0; i < kThreads; i++) pthread_join(t[i], NULL);
    atomic_store(&stopResetting, 1);
    if (withReset) pthread_join(t[kThreads], NULL);
    pthread_barrier_destroy(&start);
    EXPECT_EQ(atomic_load(&wrong), 0);
  }
  unsetenv("MCCL_BUFFSIZE");
  unsetenv("MCCL_IPC_DIR");
  mcclParamResetAll();
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(debugFirstUseRace), MCCL_TEST_CASE(paramsFirstUseRace))
