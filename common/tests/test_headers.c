// Every public header (common/include, labs/*/include, final/include) compiles on its own, twice in
// one translation unit (include guards), as C11, as C++17 and, where nvcc exists, as CUDA: host code
// is C11, while the kernels of lab 06 on (nvcc, or g++ on the sim) include the same headers.
// Run from the repository root; `make test` exports CUDA_HOME and MPICC.
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mccl_test.h"

static int inRoot(void) { return access("common/include/mccl_result.h", R_OK) == 0 && access("labs", X_OK) == 0; }

static int haveCommand(const char* cmd) {
  char buf[512];
  snprintf(buf, sizeof(buf), "command -v '%s' >/dev/null 2>&1", cmd);
  return system(buf) == 0;
}

static const char* cudaHome(void) {
  const char* h = getenv("CUDA_HOME");
  return (h && *h) ? h : "/usr/local/cuda";
}

// -I for every module's include/ (as mk/config.mk gives the build) and the CUDA headers; Open MPI's
// as -isystem, since its C++ bindings do not compile warning-free and are not ours to fix.
static void includeFlags(char* out, size_t len) {
  size_t o = (size_t)snprintf(out, len, "-I%s/include", cudaHome());
  glob_t g;
  if (glob("common/include", GLOB_ONLYDIR, NULL, &g) == 0) {
    glob("labs/[0-9][0-9]_*/include", GLOB_ONLYDIR | GLOB_APPEND, NULL, &g);
    glob("final/include", GLOB_ONLYDIR | GLOB_APPEND, NULL, &g);
    for (size_t i = 0; i < g.gl_pathc && o < len; i++) o += (size_t)snprintf(out + o, len - o, " -I%s", g.gl_pathv[i]);
    globfree(&g);
  }
  const char* mpicc = getenv("MPICC");
  char cmd[256];
  snprintf(cmd, sizeof(cmd), "%s --showme:incdirs 2>/dev/null", (mpicc && *mpicc) ? mpicc : "mpicc");
  FILE* p = popen(cmd, "r");
  char dirs[2048] = "";
  if (p) {
    if (fgets(dirs, sizeof(dirs), p) == NULL) dirs[0] = '\0';
    pclose(p);
  }
  dirs[strcspn(dirs, "\n")] = '\0';
  for (char *save = NULL, *d = strtok_r(dirs, " ", &save); d && o < len; d = strtok_r(NULL, " ", &save))
    o += (size_t)snprintf(out + o, len - o, " -isystem %s", d);
}

static int isCxxOnly(const char* path) {
  char buf[16384];
  FILE* f = fopen(path, "r");
  if (f == NULL) return 0;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  return strstr(buf, "#ifndef __cplusplus\n#error") != NULL;
}

// Compile each public header alone with `compiler` ("%s" = the source file) and fail naming every
// header that does not compile, with its first error line.
static void compileEach(const char* lang, const char* suffix, const char* compiler) {
  if (!inRoot()) SKIP("run from the repository root (make test)");
  // What the compilers make of the headers does not depend on how this binary was built.
  if (mcclTestSampling()) SKIP("a sanitizer build: the plain build compiles the headers (MCCL_TEST_FULL=1 here too)");
  char incs[4096];
  includeFlags(incs, sizeof(incs));
  glob_t g;
  if (glob("common/include/*.h", 0, NULL, &g) != 0) SKIP("no public headers");
  glob("labs/[0-9][0-9]_*/include/*.h", GLOB_APPEND, NULL, &g);
  glob("final/include/*.h", GLOB_APPEND, NULL, &g);
  char failed[4096] = "";
  int nFailed = 0;
  for (size_t i = 0; i < g.gl_pathc; i++) {
    const char* hdr = g.gl_pathv[i];
    const char* base = strrchr(hdr, '/') + 1;
    // A header that refuses C itself (`#ifndef __cplusplus` + `#error`, as mccl_device.h, the device
    // code's portability header) is C++/CUDA only: the C pass leaves it out.
    if (strcmp(suffix, ".c") == 0 && isCxxOnly(hdr)) continue;
    char src[64];
    snprintf(src, sizeof(src), "/tmp/mccl-hdr-XXXXXX%s", suffix);
    int fd = mkstemps(src, (int)strlen(suffix));
    EXPECT_TRUE(fd >= 0);
    FILE* f = fdopen(fd, "w");
    EXPECT_TRUE(f != NULL);
    fprintf(f, "#include \"%s\"\n#include \"%s\"\n", base, base);
    fclose(f);
    char log[64], cmd[8192], line[512] = "";
    snprintf(log, sizeof(log), "%.*s.log", (int)(strlen(src) - strlen(suffix)), src);
    int n = snprintf(cmd, sizeof(cmd), compiler, src);
    snprintf(cmd + n, sizeof(cmd) - n, " %s >%s 2>&1", incs, log);
    int rc = system(cmd);
    FILE* lf = fopen(log, "r");
    while (lf && fgets(line, sizeof(line), lf) && !strstr(line, "error") && !strstr(line, "warning")) line[0] = '\0';
    if (lf) fclose(lf);
    unlink(log);
    unlink(src);
    if (rc != 0) {
      nFailed++;
      line[strcspn(line, "\n")] = '\0';
      size_t o = strlen(failed);
      snprintf(failed + o, sizeof(failed) - o, "\n#   %s: %s", hdr, line[0] ? line : "(no message)");
    }
  }
  size_t total = g.gl_pathc;
  globfree(&g);
  if (nFailed)
    mcclTestFailAt(__FILE__, __LINE__, "expected all %zu public headers to compile as %s, %d did not:%s", total, lang,
                   nFailed, failed);
}

static void headersCompileAsC11(void) {
  if (!haveCommand("gcc")) SKIP("gcc not found");
  compileEach("C11", ".c", "gcc -std=c11 -Wall -Wextra -Werror -fsyntax-only -x c %s");
}

static void headersCompileAsCxx17(void) {
  if (!haveCommand("g++")) SKIP("g++ not found (make deps)");
  compileEach("C++17", ".cpp", "g++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only -x c++ %s");
}

static void headersCompileAsCuda(void) {
  char nvcc[512], compiler[1024];
  snprintf(nvcc, sizeof(nvcc), "%s/bin/nvcc", cudaHome());
  if (access(nvcc, X_OK) != 0) {
    if (!haveCommand("nvcc")) SKIP("nvcc not found (CUDA_HOME=%s)", cudaHome());
    snprintf(nvcc, sizeof(nvcc), "nvcc");
  }
  // -Werror all-warnings: nvcc's own front-end warnings too, not only the host compiler's.
  snprintf(compiler, sizeof(compiler),
           "%s -std=c++17 -x cu -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror -c %%s -o /dev/null", nvcc);
  compileEach("CUDA", ".cu", compiler);
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(headersCompileAsC11), MCCL_TEST_CASE(headersCompileAsCxx17),
               MCCL_TEST_CASE(headersCompileAsCuda))
