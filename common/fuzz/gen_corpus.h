// What a module's fuzz/seeds.c uses to write the seed corpus of its fuzz targets (`make fuzz-seed`):
// gen_corpus.c is the driver every module shares, and calls the module's fuzzWriteSeeds.
#ifndef MCCL_GEN_CORPUS_H_
#define MCCL_GEN_CORPUS_H_

#include <stddef.h>

// Writes <corpus dir>/<target>/seed-<n>: the bytes a[0..alen) then b[0..blen). A failure is printed
// and makes the program exit non-zero once every seed has had its turn.
void fuzzSeedPut(const char* target, int n, const void* a, size_t alen, const void* b, size_t blen);

// Every seed of the module's targets, through fuzzSeedPut (defined by the module's fuzz/seeds.c).
void fuzzWriteSeeds(void);

#define FUZZ_SEED(target, n, obj) fuzzSeedPut(target, n, &(obj), sizeof(obj), NULL, 0)
// A one-byte selector (rank count, side) and then the message.
#define FUZZ_SEED_SEL(target, n, sel, obj)               \
  do {                                                   \
    unsigned char s_ = (sel);                            \
    fuzzSeedPut(target, n, &s_, 1, &(obj), sizeof(obj)); \
  } while (0)

#endif
