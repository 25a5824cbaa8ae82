// Lab 08: loading the network plugin (NCCL 2.28.9 src/plugin/net.cc: ncclNetPluginLoad, which
// dlopens libnccl-net.so or NCCL_NET_PLUGIN, looks up its versioned ncclNetPlugin_vN symbol, and
// ncclNetInit, which calls its init). The plugin is a separate shared object, so the libraries that
// carry this lab (final/'s libminccl.so, the drop-in) never link MPI themselves.
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_net.h"
#include "mccl_param.h"

static pthread_once_t netOnce = PTHREAD_ONCE_INIT;
static const mcclNet_t* netPlugin;
static mcclResult_t netResult = mcclSuccess;

// The plugin logs through minccl's logger (NCCL hands its plugins ncclDebugLog the same way).
static void netLogger(int level, const char* file, int line, const char* fmt, ...) {
  if (level > (int)mcclDebugLevel()) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  mcclDebugLog((mcclDebugLogLevel)level, MCCL_NET, file, line, "%s", msg);
}

// A bare name is looked up as dlopen does (LD_LIBRARY_PATH, the program's run path), then next to
// the object that holds this code (libminccl.so, libnccl.so.2, installed with the plugin), then in
// the build tree's lib/ beside a program in bin/<lab>/.
static void* openPlugin(const char* name, char* err, size_t errLen) {
  void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (h != NULL || strchr(name, '/') != NULL) {
    if (h == NULL) snprintf(err, errLen, "%s", dlerror());
    return h;
  }
  snprintf(err, errLen, "%s", dlerror());
  Dl_info info;
  if (dladdr((void*)&openPlugin, &info) == 0 || info.dli_fname == NULL) return NULL;
  char dir[PATH_MAX];
  snprintf(dir, sizeof(dir), "%s", info.dli_fname);
  char* slash = strrchr(dir, '/');
  if (slash == NULL) return NULL;
  *slash = '\0';
  const char* tries[] = {"%s/%s", "%s/../../lib/%s"};
  for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]) && h == NULL; i++) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), tries[i], dir, name);
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  }
  return h;
}

static void netLoad(void) {
  // EXERCISE(08.plugin_load) STUB: netResult = mcclExerciseStub("08.plugin_load"); return;
  const char* name = mcclParamNetPlugin();
  char err[512] = "";
  void* h = openPlugin(name, err, sizeof(err));
  if (h == NULL) {
    WARN("NET: cannot load the network plugin %s (MCCL_NET_PLUGIN): %s", name, err);
    netResult = mcclSystemError;
    return;
  }
  const mcclNet_t* net = (const mcclNet_t*)dlsym(h, MCCL_NET_PLUGIN_SYMBOL);
  if (net == NULL) {
    WARN("NET: %s has no symbol %s: not a minccl network plugin", name, MCCL_NET_PLUGIN_SYMBOL);
    dlclose(h);
    netResult = mcclSystemError;
    return;
  }
  mcclResult_t r = net->init(netLogger);
  if (r != mcclSuccess) {
    WARN("NET: the %s plugin (%s) failed to initialise: %s", net->name, name, mcclGetErrorString(r));
    dlclose(h);
    netResult = r;
    return;
  }
  int ndev = 0;
  mcclNetProperties_t props;
  if ((r = net->devices(&ndev)) != mcclSuccess || ndev < 1 || (r = net->getProperties(0, &props)) != mcclSuccess) {
    WARN("NET: the %s plugin has no usable device (%d devices, %s)", net->name, ndev, mcclGetErrorString(r));
    netResult = r != mcclSuccess ? r : mcclSystemError;
    return;  // the library stays loaded: its init has run
  }
  INFO(MCCL_NET | MCCL_INIT, "NET: using plugin %s (%s), device 0: %s", net->name, name, props.name);
  // The handle stays open for the life of the process, as NCCL keeps its plugin loaded.
  netPlugin = net;
  // END EXERCISE(08.plugin_load)
}

mcclResult_t mcclNetGet(const mcclNet_t** net) {
  MCCL_ARGCHECK(net != NULL, "mcclNetGet: net is NULL");
  pthread_once(&netOnce, netLoad);
  if (netResult != mcclSuccess) return netResult;
  *net = netPlugin;
  return mcclSuccess;
}
