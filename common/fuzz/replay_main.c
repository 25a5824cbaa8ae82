// The plain (no libFuzzer) driver of a fuzz target, for `make test`: every file of
// corpus/<target>/ (the committed seeds and what fuzzing kept) and crashes/<target>/ (inputs that
// once crashed a decoder: regression cases) goes through LLVMFuzzerTestOneInput. A decoder that
// crashes, or accepts what FUZZ_ASSERT refuses, aborts this binary: runtests.sh reports it as a
// FAIL. Built by common/fuzz/fuzz.mk as build/<variant>/bin/<module>/replay_<target>, a test of the
// target's module, so it runs under SANITIZE=1 and TSAN=1 too. MCCL_FUZZ_DIR overrides where the
// corpus is (default: the target's module's fuzz/ directory, MCCL_FUZZ_MODULE_DIR, which fuzz.mk
// defines relative to the repository root where `make test` runs).
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz.h"
#include "mccl_test.h"

static char target[64];

// The target's name: the part of argv[0] after "replay_".
static void setTarget(const char* argv0) {
  const char* base = strrchr(argv0, '/');
  base = base ? base + 1 : argv0;
  const char* name = strncmp(base, "replay_", 7) == 0 ? base + 7 : base;
  snprintf(target, sizeof(target), "%s", name);
}

#ifndef MCCL_FUZZ_MODULE_DIR
#error "MCCL_FUZZ_MODULE_DIR (the target's fuzz/ directory) is defined by common/fuzz/fuzz.mk"
#endif

static const char* fuzzDir(void) {
  const char* env = getenv("MCCL_FUZZ_DIR");
  return env && env[0] ? env : MCCL_FUZZ_MODULE_DIR;
}

// Runs every regular file of dir through the target; returns how many, or -1 if dir is missing.
static int replayDir(const char* dir) {
  DIR* d = opendir(dir);
  if (d == NULL) return -1;
  int n = 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    FILE* f = fopen(path, "rb");
    if (f == NULL) continue;
    uint8_t* buf = malloc(1 << 16);
    size_t len = buf ? fread(buf, 1, 1 << 16, f) : 0;
    fclose(f);
    if (buf == NULL) continue;
    // Exactly len bytes: ASan sees a read past the input as it does under libFuzzer.
    uint8_t* exact = malloc(len ? len : 1);
    if (exact) {
      memcpy(exact, buf, len);
      LLVMFuzzerTestOneInput(exact, len);
      free(exact);
      n++;
    }
    free(buf);
  }
  closedir(d);
  return n;
}

static void corpus(void) {
  char dir[768];
  snprintf(dir, sizeof(dir), "%s/corpus/%s", fuzzDir(), target);
  int n = replayDir(dir);
  EXPECT_TRUE(n > 0);  // every target has committed seeds
  snprintf(dir, sizeof(dir), "%s/crashes/%s", fuzzDir(), target);
  int c = replayDir(dir);
  printf("# fuzz target %s: %d corpus input(s), %d former crash(es) replayed\n", target, n, c < 0 ? 0 : c);
}

int main(int argc, char** argv) {
  fuzzQuiet();
  setTarget(argv[0]);
  const mcclTestCase cases[] = {{"corpus", corpus}};  // named <module>/replay_<target>.corpus
  return mcclTestMain(argc, argv, cases, 1, NULL);
}
