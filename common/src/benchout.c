// Benchmark results as CSV and JSON (mccl_benchout.h). Plain stdio: a benchmark writes a few hundred
// records, each flushed as it comes so that a run cut short by a time limit keeps its rows.
#include "mccl_benchout.h"
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cuda_runtime.h>
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_param.h"

struct mcclBenchOut {
  FILE* csv;
  FILE* json;
  char* jsonPath;
  char* csvPath;
  int nJsonRows;
};

static void copyField(char* dst, const char* src) {
  snprintf(dst, MCCL_BENCH_META_LEN, "%s", src ? src : "");
}

static void gitCommit(char* dst) {
  FILE* p = popen("git rev-parse --short HEAD 2>/dev/null", "r");
  char line[128] = "";
  if (p) {
    if (fgets(line, sizeof(line), p) == NULL) line[0] = '\0';
    pclose(p);
  }
  line[strcspn(line, "\r\n")] = '\0';
  copyField(dst, line[0] ? line : "unknown");
}

void mcclBenchMetaFill(mcclBenchMeta* meta, int dev, int argc, char** argv) {
  memset(meta, 0, sizeof(*meta));
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(meta->date, sizeof(meta->date), "%Y-%m-%dT%H:%M:%SZ", &tm);
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
    copyField(meta->device, prop.name);
  else
    copyField(meta->device, "unknown");
  // The kernel module's version where the NVIDIA driver is loaded (as nvidia-smi shows it), and the
  // CUDA version the driver (or the sim) implements.
  char kmod[64] = "";
  FILE* f = fopen("/proc/driver/nvidia/version", "r");
  if (f) {
    char line[256];
    if (fgets(line, sizeof(line), f)) {
      // "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ...":
      // the version is the first word after "Kernel Module" that starts with a digit.
      const char* k = strstr(line, "Kernel Module");
      for (const char* w = k ? k + strlen("Kernel Module") : NULL; w && *w && !kmod[0];) {
        int n = 0;
        char word[64];
        if (sscanf(w, " %63s%n", word, &n) != 1) break;
        if (word[0] >= '0' && word[0] <= '9') snprintf(kmod, sizeof(kmod), "%s", word);
        w += n;
      }
    }
    fclose(f);
  }
  int v = 0;
  if (cudaDriverGetVersion(&v) == cudaSuccess && v > 0)
    snprintf(meta->driver, sizeof(meta->driver), "%s%sCUDA %d.%d%s", kmod, kmod[0] ? " (" : "", v / 1000, v % 1000 / 10,
             kmod[0] ? ")" : "");
  else
    copyField(meta->driver, kmod[0] ? kmod : "unknown");
  const char* c = mcclParamCommit();
  if (c && *c)
    copyField(meta->commit, c);
  else
    gitCommit(meta->commit);
  copyField(meta->backend, MCCL_BACKEND_NAME);
  size_t off = 0;
  for (int i = 0; i < argc && off + 1 < sizeof(meta->command); i++) {
    int n = snprintf(meta->command + off, sizeof(meta->command) - off, "%s%s", i ? " " : "", argv[i]);
    if (n < 0) break;
    off += (size_t)n;
  }
}

mcclResult_t mcclBenchMetaAdd(mcclBenchMeta* meta, const char* key, const char* value) {
  if (meta == NULL || key == NULL || value == NULL) {
    WARN("mcclBenchMetaAdd: meta %p, key %p, value %p: none may be NULL", (void*)meta, (const void*)key,
         (const void*)value);
    return mcclInvalidArgument;
  }
  size_t n = strlen(key);
  int ok = n > 0 && n < sizeof(meta->extraKey[0]);
  for (size_t i = 0; ok && i < n; i++) ok = isalnum((unsigned char)key[i]) || key[i] == '_';
  if (!ok) {
    WARN("mcclBenchMetaAdd: key '%s' must be 1..%zu letters, digits or '_'", key, sizeof(meta->extraKey[0]) - 1);
    return mcclInvalidArgument;
  }
  if (meta->nExtra >= MCCL_BENCH_META_EXTRA) {
    WARN("mcclBenchMetaAdd: key '%s': already %d extra entries (MCCL_BENCH_META_EXTRA)", key, meta->nExtra);
    return mcclInvalidArgument;
  }
  snprintf(meta->extraKey[meta->nExtra], sizeof(meta->extraKey[0]), "%s", key);
  copyField(meta->extraValue[meta->nExtra], value);
  meta->nExtra++;
  return mcclSuccess;
}

void mcclBenchRecordRates(mcclBenchRecord* r, int nranks) {
  r->algbw = r->busbw = 0;
  if (r->timeUs <= 0) return;
  r->algbw = (double)r->bytes / (r->timeUs * 1e-6) / 1e9;
  r->busbw = r->algbw * (nranks > 1 ? 2.0 * (nranks - 1) / nranks : 1.0);
}

// ---- escaping ------------------------------------------------------------------------------------

static int cmpDouble(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

double mcclBenchMedian(double* v, int n) {
  if (n < 1) return 0;
  qsort(v, (size_t)n, sizeof(double), cmpDouble);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void jsonString(FILE* f, const char* s) {
  fputc('"', f);
  for (const unsigned char* p = (const unsigned char*)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p == '\n')
      fputs("\\n", f);
    else if (*p == '\t')
      fputs("\\t", f);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

// RFC 4180: a field holding a comma, quote or line break is quoted, quotes doubled.
static void csvField(FILE* f, const char* s) {
  if (strpbrk(s, ",\"\r\n") == NULL) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (const char* p = s; *p; p++) {
    if (*p == '"') fputc('"', f);
    fputc(*p, f);
  }
  fputc('"', f);
}

// A metadata value on one comment line: line breaks become spaces.
static void csvComment(FILE* f, const char* key, const char* value) {
  fprintf(f, "# %s: ", key);
  for (const char* p = value; *p; p++) fputc(*p == '\n' || *p == '\r' ? ' ' : *p, f);
  fputc('\n', f);
}

// ---- the writer ----------------------------------------------------------------------------------

static const char* const kColumns =
    "size,count,type,redop,lib,variant,algo,placement,time_us,algbw,busbw,wrong,nccl_time_us,ratio";

static void metaPairs(const mcclBenchMeta* m, void (*emit)(void*, const char*, const char*, int), void* arg) {
  const char* keys[] = {"date", "device", "driver", "commit", "backend", "command"};
  const char* vals[] = {m->date, m->device, m->driver, m->commit, m->backend, m->command};
  int first = 1;
  for (int i = 0; i < 6; i++)
    if (vals[i][0]) emit(arg, keys[i], vals[i], first), first = 0;
  for (int i = 0; i < m->nExtra; i++)
    if (m->extraValue[i][0]) emit(arg, m->extraKey[i], m->extraValue[i], first), first = 0;
}

static void emitCsv(void* f, const char* k, const char* v, int first) {
  (void)first;
  csvComment((FILE*)f, k, v);
}

static void emitJson(void* f, const char* k, const char* v, int first) {
  fputs(first ? "\n    " : ",\n    ", (FILE*)f);
  jsonString((FILE*)f, k);
  fputs(": ", (FILE*)f);
  jsonString((FILE*)f, v);
}

static mcclResult_t flushChecked(FILE* f, const char* path) {
  if (fflush(f) != 0 || ferror(f)) {
    WARN("benchmark output %s: write failed: %s", path, strerror(errno));
    return mcclSystemError;
  }
  return mcclSuccess;
}

mcclResult_t mcclBenchOutOpen(const char* csvPath, const char* jsonPath, const mcclBenchMeta* meta,
                              mcclBenchOut** out) {
  if (meta == NULL || out == NULL) {
    WARN("mcclBenchOutOpen: meta %p, out %p: neither may be NULL", (const void*)meta, (void*)out);
    return mcclInvalidArgument;
  }
  mcclResult_t res = mcclSuccess;
  mcclBenchOut* o = calloc(1, sizeof(*o));
  if (o == NULL) {
    WARN("mcclBenchOutOpen: out of memory");
    return mcclSystemError;
  }
  if (csvPath) {
    o->csvPath = strdup(csvPath);
    o->csv = fopen(csvPath, "w");
    if (o->csv == NULL || o->csvPath == NULL) {
      WARN("benchmark output: cannot create CSV file '%s': %s", csvPath, strerror(errno));
      res = mcclSystemError;
      goto fail;
    }
    metaPairs(meta, emitCsv, o->csv);
    fprintf(o->csv, "%s\n", kColumns);
    if ((res = flushChecked(o->csv, csvPath)) != mcclSuccess) goto fail;
  }
  if (jsonPath) {
    o->jsonPath = strdup(jsonPath);
    o->json = fopen(jsonPath, "w");
    if (o->json == NULL || o->jsonPath == NULL) {
      WARN("benchmark output: cannot create JSON file '%s': %s", jsonPath, strerror(errno));
      res = mcclSystemError;
      goto fail;
    }
    fputs("{\n  \"metadata\": {", o->json);
    metaPairs(meta, emitJson, o->json);
    fputs("\n  },\n  \"rows\": [", o->json);
    if ((res = flushChecked(o->json, jsonPath)) != mcclSuccess) goto fail;
  }
  *out = o;
  return mcclSuccess;
fail:
  if (o->csv) fclose(o->csv);
  if (o->json) fclose(o->json);
  if (o->csv && csvPath) unlink(csvPath);
  if (o->json && jsonPath) unlink(jsonPath);
  free(o->csvPath);
  free(o->jsonPath);
  free(o);
  return res;
}

// Numbers: %.6g keeps microsecond times of 8 B calls and GB/s of 512 MiB alike; "" / null when absent.
static void csvNumber(FILE* f, int present, double v) {
  if (present) fprintf(f, "%.6g", v);
}

static void jsonNumber(FILE* f, const char* key, int present, double v) {
  fprintf(f, ", \"%s\": ", key);
  if (present)
    fprintf(f, "%.6g", v);
  else
    fputs("null", f);
}

mcclResult_t mcclBenchOutRecord(mcclBenchOut* out, const mcclBenchRecord* r) {
  if (out == NULL || r == NULL || r->type == NULL || r->redop == NULL || r->lib == NULL || r->variant == NULL ||
      r->algo == NULL) {
    WARN("mcclBenchOutRecord: out %p, record %p: neither (nor its type, redop, lib, variant, algo) may be NULL",
         (void*)out, (const void*)r);
    return mcclInvalidArgument;
  }
  const char* placement = r->inPlace ? "ip" : "oop";
  int timed = r->timeUs > 0, withNccl = timed && r->ncclTimeUs > 0;
  if (out->csv) {
    FILE* f = out->csv;
    fprintf(f, "%zu,%zu,", r->bytes, r->count);
    csvField(f, r->type);
    fputc(',', f);
    csvField(f, r->redop);
    fputc(',', f);
    csvField(f, r->lib);
    fputc(',', f);
    csvField(f, r->variant);
    fputc(',', f);
    csvField(f, r->algo);
    fprintf(f, ",%s,", placement);
    csvNumber(f, timed, r->timeUs);
    fputc(',', f);
    csvNumber(f, timed, r->algbw);
    fputc(',', f);
    csvNumber(f, timed, r->busbw);
    fputc(',', f);
    if (r->wrong >= 0) fprintf(f, "%ld", r->wrong);
    fputc(',', f);
    csvNumber(f, withNccl, r->ncclTimeUs);
    fputc(',', f);
    csvNumber(f, withNccl, withNccl ? r->ncclTimeUs / r->timeUs : 0);
    fputc('\n', f);
    MCCLCHECK(flushChecked(f, out->csvPath));
  }
  if (out->json) {
    FILE* f = out->json;
    fprintf(f, "%s\n    {\"size\": %zu, \"count\": %zu, \"type\": ", out->nJsonRows ? "," : "", r->bytes, r->count);
    jsonString(f, r->type);
    fputs(", \"redop\": ", f);
    jsonString(f, r->redop);
    fputs(", \"lib\": ", f);
    jsonString(f, r->lib);
    fputs(", \"variant\": ", f);
    jsonString(f, r->variant);
    fputs(", \"algo\": ", f);
    jsonString(f, r->algo);
    fprintf(f, ", \"placement\": \"%s\"", placement);
    jsonNumber(f, "time_us", timed, r->timeUs);
    jsonNumber(f, "algbw", timed, r->algbw);
    jsonNumber(f, "busbw", timed, r->busbw);
    if (r->wrong >= 0)
      fprintf(f, ", \"wrong\": %ld", r->wrong);
    else
      fputs(", \"wrong\": null", f);
    jsonNumber(f, "nccl_time_us", withNccl, r->ncclTimeUs);
    jsonNumber(f, "ratio", withNccl, withNccl ? r->ncclTimeUs / r->timeUs : 0);
    fputc('}', f);
    out->nJsonRows++;
    MCCLCHECK(flushChecked(f, out->jsonPath));
  }
  return mcclSuccess;
}

mcclResult_t mcclBenchOutClose(mcclBenchOut* out) {
  if (out == NULL) return mcclSuccess;
  mcclResult_t res = mcclSuccess;
  if (out->csv && fclose(out->csv) != 0) {
    WARN("benchmark output %s: close failed: %s", out->csvPath, strerror(errno));
    res = mcclSystemError;
  }
  if (out->json) {
    fputs(out->nJsonRows ? "\n  ]\n}\n" : "]\n}\n", out->json);
    if (fclose(out->json) != 0) {
      WARN("benchmark output %s: close failed: %s", out->jsonPath, strerror(errno));
      res = mcclSystemError;
    }
  }
  free(out->csvPath);
  free(out->jsonPath);
  free(out);
  return res;
}

int mcclBenchProgressOn(int forced) {
  return forced || isatty(STDERR_FILENO);
}

void mcclBenchProgress(int done, int total, const char* what, double elapsed) {
  if (total > 0)
    fprintf(stderr, "[%d/%d] %s, %.1f s\n", done, total, what, elapsed);
  else
    fprintf(stderr, "[%d] %s, %.1f s\n", done, what, elapsed);
  fflush(stderr);
}
