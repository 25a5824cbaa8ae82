// The shared helpers of mccl_utils.h: one clock and one sleep for every layer.
#include "mccl_utils.h"

#include <errno.h>
#include <time.h>

uint64_t mcclClockNano(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO: no system call
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t mcclClockUs(void) {
  return mcclClockNano() / 1000ull;
}

uint64_t mcclClockMs(void) {
  return mcclClockNano() / 1000000ull;
}

double mcclClockSec(void) {
  return (double)mcclClockNano() * 1e-9;
}

void mcclSleepMs(int ms) {
  if (ms <= 0) return;
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}
