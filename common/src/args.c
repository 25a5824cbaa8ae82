// Argument checking shared by every example and benchmark (mccl_args.h).
#include "mccl_args.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char* progName = "program";
static const char* progArgs = "";

static void usageLine(FILE* f) {
  fprintf(f, "usage: %s%s%s\n", progName, *progArgs ? " " : "", progArgs);
}

static void refuse(const char* fmt, const char* what) {
  fprintf(stderr, "%s: ", progName);
  fprintf(stderr, fmt, what);
  fprintf(stderr, "\n");
  usageLine(stderr);
  fprintf(stderr, "(%s --help says more)\n", progName);
  exit(2);
}

void mcclArgsCheck(int argc, char** argv, int maxPositional, const char* args, const char* help) {
  if (argc > 0 && argv[0] != NULL) {
    const char* slash = strrchr(argv[0], '/');
    progName = slash ? slash + 1 : argv[0];
  }
  progArgs = args ? args : "";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usageLine(stdout);
      if (help && *help) printf("%s\n", help);
      exit(0);
    }
  }
  int positional = 0;
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-' && argv[i][1] != '\0') refuse("unknown option '%s'", argv[i]);
    if (++positional > maxPositional) {
      if (maxPositional == 0) refuse("takes no arguments, got '%s'", argv[i]);
      refuse("unexpected extra argument '%s'", argv[i]);
    }
  }
}

long long mcclArgsInt(int argc, char** argv, int index, const char* name, long long def, long long min, long long max) {
  if (index >= argc) return def;
  const char* s = argv[index];
  char* end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 0);
  int shift = 0;
  if (end != s && *end != '\0' && end[1] == '\0') {
    shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20 : *end == 'G' || *end == 'g' ? 30 : -1;
    if (shift > 0) end++;
  }
  char msg[256];
  if (end == s || *end != '\0' || errno == ERANGE || shift < 0 || (shift > 0 && (v > (max >> shift) || v < 0))) {
    snprintf(msg, sizeof(msg), "%s must be a whole number in %lld..%lld, got '%%s'", name, min, max);
    refuse(msg, s);
  }
  v <<= shift;
  if (v < min || v > max) {
    snprintf(msg, sizeof(msg), "%s must be in %lld..%lld, got '%%s'", name, min, max);
    refuse(msg, s);
  }
  return v;
}
