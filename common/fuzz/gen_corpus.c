// Writes the seed corpus of one module's fuzz targets: well-formed messages as the senders build them,
// into <dir>/<target>/seed-<n>. This is the driver every module shares; what to write is the module's
// fuzz/seeds.c (fuzzWriteSeeds), linked with it into one program per module. `make fuzz-seed` runs each
// over its module's fuzz/corpus; the output is committed. Seeds only need to be valid: libFuzzer mutates
// them into everything else.
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include "gen_corpus.h"

static const char* root;
static int failed;

void fuzzSeedPut(const char* target, int n, const void* a, size_t alen, const void* b, size_t blen) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", root, target);
  if (mkdir(path, 0755) != 0 && errno != EEXIST) {
    perror(path);
    failed = 1;
    return;
  }
  snprintf(path, sizeof(path), "%s/%s/seed-%d", root, target, n);
  FILE* f = fopen(path, "wb");
  if (f == NULL || fwrite(a, 1, alen, f) != alen || (blen && fwrite(b, 1, blen, f) != blen)) {
    perror(path);
    failed = 1;
  }
  if (f) fclose(f);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  root = argv[1];
  if (mkdir(root, 0755) != 0 && errno != EEXIST) {
    perror(root);
    return 1;
  }
  fuzzWriteSeeds();
  return failed;
}
