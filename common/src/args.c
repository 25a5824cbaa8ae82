// Argument checking shared by every example and benchmark (mccl_args.h).
#include "mccl_args.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char* progName = "program";
// The usage line, copied: a caller may build it on the stack (the allreduce benchmarks' driver does)
// and read an option (mcclArgsOptInt, which may refuse it) after that frame is gone.
static char progArgs[1024];

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

// The program's name and usage line for later messages; --help/-h anywhere prints them and exits 0.
static void checkHelp(int argc, char** argv, const char* args, const char* help) {
  if (argc > 0 && argv[0] != NULL) {
    const char* slash = strrchr(argv[0], '/');
    progName = slash ? slash + 1 : argv[0];
  }
  snprintf(progArgs, sizeof(progArgs), "%s", args ? args : "");
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usageLine(stdout);
      if (help && *help) printf("%s\n", help);
      exit(0);
    }
  }
}

void mcclArgsCheck(int argc, char** argv, int maxPositional, const char* args, const char* help) {
  checkHelp(argc, argv, args, help);
  int positional = 0;
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-' && argv[i][1] != '\0') refuse("unknown option '%s'", argv[i]);
    if (++positional > maxPositional) {
      if (maxPositional == 0) refuse("takes no arguments, got '%s'", argv[i]);
      refuse("unexpected extra argument '%s'", argv[i]);
    }
  }
}

// The spelling in `options` that `arg` names ("-c" or "--channels=16" matches "-c=" / "--channels="),
// or NULL. *joined points at a value given after '=' (NULL when none).
static const char* findOption(const char* const* options, const char* arg, const char** joined) {
  *joined = NULL;
  for (int i = 0; options && options[i]; i++) {
    size_t len = strlen(options[i]);
    int takesValue = len > 0 && options[i][len - 1] == '=';
    size_t nameLen = takesValue ? len - 1 : len;
    if (strncmp(arg, options[i], nameLen) != 0) continue;
    if (arg[nameLen] == '\0') return options[i];
    if (takesValue && arg[nameLen] == '=') {
      *joined = arg + nameLen + 1;
      return options[i];
    }
  }
  return NULL;
}

// The checked spellings, copied: a caller may build its table on the stack (the allreduce benchmarks'
// driver does) and read values with mcclArgsOpt() after that frame is gone.
#define MAX_OPTIONS 128
static const char* progOptionsCopy[MAX_OPTIONS + 1];
static const char* const* progOptions = NULL;

void mcclArgsCheckOpts(int argc, char** argv, const char* const* options, const char* args, const char* help) {
  checkHelp(argc, argv, args, help);
  int n = 0;
  while (options[n] != NULL) {
    if (n == MAX_OPTIONS) {
      fprintf(stderr, "mcclArgsCheckOpts: more than %d options\n", MAX_OPTIONS);
      abort();
    }
    progOptionsCopy[n] = options[n];
    n++;
  }
  progOptionsCopy[n] = NULL;
  progOptions = progOptionsCopy;
  for (int i = 1; i < argc; i++) {
    const char* joined;
    const char* o = findOption(options, argv[i], &joined);
    if (o == NULL) {
      if (argv[i][0] == '-' && argv[i][1] != '\0') refuse("unknown option '%s'", argv[i]);
      refuse("takes no positional arguments, got '%s'", argv[i]);
    }
    if (o[strlen(o) - 1] == '=' && joined == NULL) {
      if (i + 1 >= argc) refuse("option '%s' needs a value", argv[i]);
      i++;
    }
  }
}

// Walks the arguments as mcclArgsCheckOpts checked them, so a value that looks like an option
// ("-c -1") is read as a value, and a flag never swallows the next argument.
const char* mcclArgsOpt(int argc, char** argv, const char* name) {
  const char* value = NULL;
  size_t n = strlen(name);
  for (int i = 1; i < argc; i++) {
    const char* joined;
    const char* o = findOption(progOptions, argv[i], &joined);
    if (o == NULL) continue;
    int takesValue = o[strlen(o) - 1] == '=';
    const char* v = !takesValue ? "" : joined ? joined : (i + 1 < argc ? argv[++i] : NULL);
    if (strncmp(o, name, n) == 0 && (o[n] == '\0' || o[n] == '=')) value = v;
  }
  return value;
}

void mcclArgsFail(const char* what) {
  refuse("%s", what);
}

static long long parseInt(const char* s, const char* name, long long min, long long max);

long long mcclArgsOptInt(int argc, char** argv, const char* name, long long def, long long min, long long max) {
  const char* v = mcclArgsOpt(argc, argv, name);
  if (v == NULL) return def;
  return parseInt(v, name, min, max);
}

long long mcclArgsInt(int argc, char** argv, int index, const char* name, long long def, long long min, long long max) {
  if (index >= argc) return def;
  return parseInt(argv[index], name, min, max);
}

static long long parseInt(const char* s, const char* name, long long min, long long max) {
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
  if (shift > 0) v <<= shift;  // v >= 0 here; shifting a negative value (even by 0) is undefined
  if (v < min || v > max) {
    snprintf(msg, sizeof(msg), "%s must be in %lld..%lld, got '%%s'", name, min, max);
    refuse(msg, s);
  }
  return v;
}
