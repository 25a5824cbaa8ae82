// Logging, as NCCL's debug.cc: level and subsystems read once from the environment.
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "mccl_debug.h"
#include "mccl_param.h"

static atomic_int debugLevel = -1;
static unsigned long debugMask = MCCL_ALL;
static FILE* debugFile = NULL;
static pthread_mutex_t debugLock = PTHREAD_MUTEX_INITIALIZER;
static char hostName[64];
static __thread int logRank = -1;
// The text of the last WARN, whatever the level (NCCL's ncclLastError, returned by ncclGetLastError).
static char lastError[1024];

static const struct { const char* name; unsigned long bit; } subsysNames[] = {
    {"INIT", MCCL_INIT},   {"COLL", MCCL_COLL},   {"P2P", MCCL_P2P},       {"SHM", MCCL_SHM},
    {"NET", MCCL_NET},     {"BOOTSTRAP", MCCL_BOOTSTRAP}, {"ENV", MCCL_ENV}, {"ALLOC", MCCL_ALLOC},
    {"CALL", MCCL_CALL},   {"PROXY", MCCL_PROXY}, {"IPC", MCCL_IPC},       {"TEST", MCCL_TEST},
    {"ALL", (unsigned long)MCCL_ALL},
};

static unsigned long parseSubsys(const char* s) {
  if (s == NULL) return MCCL_ALL;
  int invert = 0;
  if (*s == '^') { invert = 1; s++; }
  unsigned long mask = 0;
  char* copy = strdup(s);
  char* save = NULL;
  for (char* tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    for (size_t i = 0; i < sizeof(subsysNames) / sizeof(subsysNames[0]); i++)
      if (strcasecmp(tok, subsysNames[i].name) == 0) mask |= subsysNames[i].bit;
  }
  free(copy);
  return invert ? ~mask : mask;
}

static void openDebugFile(const char* pattern) {
  char path[4096];
  size_t o = 0;
  for (const char* p = pattern; *p && o + 32 < sizeof(path); p++) {
    if (p[0] == '%' && p[1] == 'h') { o += snprintf(path + o, sizeof(path) - o, "%s", hostName); p++; }
    else if (p[0] == '%' && p[1] == 'p') { o += snprintf(path + o, sizeof(path) - o, "%d", (int)getpid()); p++; }
    else path[o++] = *p;
  }
  path[o] = '\0';
  FILE* f = fopen(path, "w");
  if (f) { setvbuf(f, NULL, _IOLBF, 0); debugFile = f; }
}

static void debugInit(void) {
  pthread_mutex_lock(&debugLock);
  if (atomic_load(&debugLevel) < 0) {
    gethostname(hostName, sizeof(hostName) - 1);
    char* dot = strchr(hostName, '.');
    if (dot) *dot = '\0';
    const char* lvl = mcclParamDebug();
    int level = MCCL_LOG_WARN;  // WARN lines always show unless NONE is asked for
    if (lvl) {
      if (strcasecmp(lvl, "NONE") == 0) level = MCCL_LOG_NONE;
      else if (strcasecmp(lvl, "VERSION") == 0) level = MCCL_LOG_VERSION;
      else if (strcasecmp(lvl, "WARN") == 0) level = MCCL_LOG_WARN;
      else if (strcasecmp(lvl, "INFO") == 0) level = MCCL_LOG_INFO;
      else if (strcasecmp(lvl, "TRACE") == 0) level = MCCL_LOG_TRACE;
    }
    debugMask = parseSubsys(mcclParamDebugSubsys());
    if (mcclParamDebugFile()) openDebugFile(mcclParamDebugFile());
    atomic_store_explicit(&debugLevel, level, memory_order_release);
  }
  pthread_mutex_unlock(&debugLock);
}

// Acquire, so a thread that sees the level also sees the mask, host name and file debugInit wrote
// before publishing it (NCCL's debug.cc loads ncclDebugLevel with __ATOMIC_ACQUIRE likewise).
mcclDebugLogLevel mcclDebugLevel(void) {
  int l = atomic_load_explicit(&debugLevel, memory_order_acquire);
  if (l < 0) { debugInit(); l = atomic_load_explicit(&debugLevel, memory_order_acquire); }
  return (mcclDebugLogLevel)l;
}

void mcclDebugSetRank(int rank) { logRank = rank; }

const char* mcclDebugLastError(void) {
  return lastError;
}

void mcclDebugLog(mcclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  if (level == MCCL_LOG_WARN) {  // kept also under MCCL_DEBUG=NONE, as NCCL keeps ncclLastError
    char text[sizeof(lastError)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&debugLock);
    memcpy(lastError, text, sizeof(lastError));
    pthread_mutex_unlock(&debugLock);
  }
  if (mcclDebugLevel() < level) return;
  if (level >= MCCL_LOG_INFO && (flags & debugMask) == 0) return;
  char buf[2048];
  int n;
  int tid = (int)syscall(SYS_gettid);
  char rank[16] = "";
  if (logRank >= 0) snprintf(rank, sizeof(rank), " [%d]", logRank);
  const char* base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
  if (level == MCCL_LOG_WARN)
    n = snprintf(buf, sizeof(buf), "%s:%d:%d%s %s:%d MCCL WARN ", hostName, (int)getpid(), tid, rank, base, line);
  else if (level == MCCL_LOG_VERSION)
    n = snprintf(buf, sizeof(buf), "%s:%d:%d%s MCCL VERSION ", hostName, (int)getpid(), tid, rank);
  else
    n = snprintf(buf, sizeof(buf), "%s:%d:%d%s MCCL %s ", hostName, (int)getpid(), tid, rank,
                 level == MCCL_LOG_INFO ? "INFO" : "TRACE");
  if (n < 0) return;
  if ((size_t)n >= sizeof(buf)) n = sizeof(buf) - 1;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
  va_end(ap);
  if (m > 0) n += m;
  if ((size_t)n >= sizeof(buf) - 1) n = sizeof(buf) - 2;
  buf[n++] = '\n';
  buf[n] = '\0';
  FILE* out = debugFile ? debugFile : stderr;
  pthread_mutex_lock(&debugLock);
  fputs(buf, out);
  fflush(out);
  pthread_mutex_unlock(&debugLock);
}
