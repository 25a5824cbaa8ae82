// What every fuzz target shares (fuzz.mk puts this directory on the targets' include path). A target
// is one file, <module>/fuzz/fuzz_<name>.c, beside the module whose decoder it feeds (common/fuzz/ holds
// the bootstrap's): it defines LLVMFuzzerTestOneInput for one decoder, feeds the bytes to it and, when
// the decoder accepts them, checks what the decoder promised (FUZZ_ASSERT aborts: libFuzzer and the
// replay test both report an abort as a crash). `make fuzz` links each with libFuzzer (clang
// -fsanitize=fuzzer,address,undefined); `make test` links each with replay_main.c instead and runs
// the committed corpus and crash inputs through it (docs/fuzzing.md).
#ifndef MCCL_FUZZ_H_
#define MCCL_FUZZ_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_ASSERT(cond)                                                                                \
  do {                                                                                                   \
    if (!(cond)) {                                                                                       \
      fprintf(stderr, "%s:%d: decoder accepted a message that breaks: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                                                           \
    }                                                                                                    \
  } while (0)

// The secret and opId the targets' receivers expect (the seeds.c files write seeds with them).
#define FUZZ_SECRET 0x5eed5eed5eed5eedULL
#define FUZZ_OPID 0x0123456789abcdefULL

// A malformed message is the common case here: its WARN line would drown the fuzzer's output.
static inline void fuzzQuiet(void) {
  setenv("MCCL_DEBUG", "NONE", 0);
}

static inline int fuzzTerminated(const char* s, size_t n) {
  return memchr(s, '\0', n) != NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#endif
