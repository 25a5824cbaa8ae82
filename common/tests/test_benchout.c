// Tests of the benchmark output writer (mccl_benchout.h): what the files hold, byte for byte where
// quoting matters, and refusals. The benchmarks' own runs are checked by labs/07_allreduce/tests/
// test_bench_out.sh (which reads the files back with Python's csv and json modules).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mccl_benchout.h"
#include "mccl_test.h"

static char dir[64];

static void makeDir(void) {
  snprintf(dir, sizeof(dir), "/tmp/mccl-benchout-XXXXXX");
  EXPECT_TRUE(mkdtemp(dir) != NULL);
}

static char* slurp(const char* path) {
  FILE* f = fopen(path, "r");
  if (f == NULL) return NULL;
  static char buf[8192];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static mcclBenchMeta testMeta(void) {
  mcclBenchMeta m;
  memset(&m, 0, sizeof(m));
  snprintf(m.date, sizeof(m.date), "2026-01-02T03:04:05Z");
  snprintf(m.device, sizeof(m.device), "GPU \"X\", rev 2");
  snprintf(m.commit, sizeof(m.commit), "abc1234");
  snprintf(m.command, sizeof(m.command), "bench\n-b 8");  // a line break stays on its comment line
  return m;
}

// Two records (one with a comma and a quote in its algorithm, one unchecked and without NCCL), in
// both files, exactly as a CSV and a JSON reader expect them.
static void recordsAsWritten(void) {
  makeDir();
  char csv[128], json[128];
  snprintf(csv, sizeof(csv), "%s/r.csv", dir);
  snprintf(json, sizeof(json), "%s/r.json", dir);
  mcclBenchMeta m = testMeta();
  EXPECT_RES(mcclBenchMetaAdd(&m, "nccl", "2.28.9"), mcclSuccess);
  mcclBenchOut* out = NULL;
  EXPECT_RES(mcclBenchOutOpen(csv, json, &m, &out), mcclSuccess);
  mcclBenchRecord r = {.bytes = 1024,
                       .count = 256,
                       .type = "float32",
                       .redop = "sum",
                       .lib = "minccl",
                       .variant = "ring",
                       .algo = "a,\"b\"",
                       .inPlace = 0,
                       .timeUs = 2.0,
                       .wrong = 0,
                       .ncclTimeUs = 4.0};
  mcclBenchRecordRates(&r, 4);
  EXPECT_TRUE(r.algbw > 0.511 && r.algbw < 0.513);  // 1024 B / 2 us = 0.512 GB/s
  EXPECT_TRUE(r.busbw > 0.767 && r.busbw < 0.769);  // x 2(4-1)/4
  EXPECT_RES(mcclBenchOutRecord(out, &r), mcclSuccess);
  r.inPlace = 1;
  r.wrong = -1;
  r.ncclTimeUs = 0;
  r.algo = "ring/LL";
  EXPECT_RES(mcclBenchOutRecord(out, &r), mcclSuccess);
  EXPECT_RES(mcclBenchOutClose(out), mcclSuccess);

  const char* wantCsv =
      "# date: 2026-01-02T03:04:05Z\n"
      "# device: GPU \"X\", rev 2\n"
      "# commit: abc1234\n"
      "# command: bench -b 8\n"
      "# nccl: 2.28.9\n"
      "size,count,type,redop,lib,variant,algo,placement,time_us,algbw,busbw,wrong,nccl_time_us,ratio\n"
      "1024,256,float32,sum,minccl,ring,\"a,\"\"b\"\"\",oop,2,0.512,0.768,0,4,2\n"
      "1024,256,float32,sum,minccl,ring,ring/LL,ip,2,0.512,0.768,,,\n";
  char* got = slurp(csv);
  EXPECT_TRUE(got != NULL);
  if (got && strcmp(got, wantCsv) != 0) mcclTestFailAt(__FILE__, __LINE__, "CSV:\n%s\nexpected:\n%s", got, wantCsv);
  const char* wantJson =
      "{\n  \"metadata\": {\n"
      "    \"date\": \"2026-01-02T03:04:05Z\",\n"
      "    \"device\": \"GPU \\\"X\\\", rev 2\",\n"
      "    \"commit\": \"abc1234\",\n"
      "    \"command\": \"bench\\n-b 8\",\n"
      "    \"nccl\": \"2.28.9\"\n"
      "  },\n  \"rows\": [\n"
      "    {\"size\": 1024, \"count\": 256, \"type\": \"float32\", \"redop\": \"sum\", \"lib\": \"minccl\", "
      "\"variant\": \"ring\", \"algo\": \"a,\\\"b\\\"\", \"placement\": \"oop\", \"time_us\": 2, \"algbw\": 0.512, "
      "\"busbw\": 0.768, \"wrong\": 0, \"nccl_time_us\": 4, \"ratio\": 2},\n"
      "    {\"size\": 1024, \"count\": 256, \"type\": \"float32\", \"redop\": \"sum\", \"lib\": \"minccl\", "
      "\"variant\": \"ring\", \"algo\": \"ring/LL\", \"placement\": \"ip\", \"time_us\": 2, \"algbw\": 0.512, "
      "\"busbw\": 0.768, \"wrong\": null, \"nccl_time_us\": null, \"ratio\": null}\n"
      "  ]\n}\n";
  got = slurp(json);
  EXPECT_TRUE(got != NULL);
  if (got && strcmp(got, wantJson) != 0) mcclTestFailAt(__FILE__, __LINE__, "JSON:\n%s\nexpected:\n%s", got, wantJson);
  unlink(csv);
  unlink(json);
  rmdir(dir);
}

// No record: the JSON is still one valid object with an empty list; NULL paths write nothing.
static void emptyAndNowhere(void) {
  makeDir();
  char json[128];
  snprintf(json, sizeof(json), "%s/e.json", dir);
  mcclBenchMeta m;
  memset(&m, 0, sizeof(m));
  mcclBenchOut* out = NULL;
  EXPECT_RES(mcclBenchOutOpen(NULL, json, &m, &out), mcclSuccess);
  EXPECT_RES(mcclBenchOutClose(out), mcclSuccess);
  char* got = slurp(json);
  EXPECT_TRUE(got != NULL && strcmp(got, "{\n  \"metadata\": {\n  },\n  \"rows\": []\n}\n") == 0);
  out = NULL;
  EXPECT_RES(mcclBenchOutOpen(NULL, NULL, &m, &out), mcclSuccess);
  mcclBenchRecord r = {.bytes = 8, .count = 2, .type = "t", .redop = "o", .lib = "l", .variant = "v", .algo = "a"};
  EXPECT_RES(mcclBenchOutRecord(out, &r), mcclSuccess);
  EXPECT_RES(mcclBenchOutClose(out), mcclSuccess);
  EXPECT_RES(mcclBenchOutClose(NULL), mcclSuccess);
  unlink(json);
  rmdir(dir);
}

static void refusals(void) {
  mcclBenchMeta m;
  memset(&m, 0, sizeof(m));
  mcclBenchOut* out = (mcclBenchOut*)&m;  // must stay untouched on failure
  EXPECT_RES(mcclBenchOutOpen("/nonexistent-dir/r.csv", NULL, &m, &out), mcclSystemError);
  EXPECT_TRUE(out == (mcclBenchOut*)&m);
  EXPECT_RES(mcclBenchOutOpen(NULL, NULL, NULL, &out), mcclInvalidArgument);
  EXPECT_RES(mcclBenchOutOpen(NULL, NULL, &m, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclBenchMetaAdd(&m, "bad key", "v"), mcclInvalidArgument);
  EXPECT_RES(mcclBenchMetaAdd(&m, "", "v"), mcclInvalidArgument);
  EXPECT_RES(mcclBenchMetaAdd(&m, "k", NULL), mcclInvalidArgument);
  for (int i = 0; i < MCCL_BENCH_META_EXTRA; i++) EXPECT_RES(mcclBenchMetaAdd(&m, "k", "v"), mcclSuccess);
  EXPECT_RES(mcclBenchMetaAdd(&m, "k", "v"), mcclInvalidArgument);
  out = NULL;
  EXPECT_RES(mcclBenchOutOpen(NULL, NULL, &m, &out), mcclSuccess);
  mcclBenchRecord r = {.bytes = 8, .count = 2, .type = "t", .redop = "o", .lib = "l", .variant = NULL, .algo = "a"};
  EXPECT_RES(mcclBenchOutRecord(out, &r), mcclInvalidArgument);
  EXPECT_RES(mcclBenchOutRecord(out, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclBenchOutClose(out), mcclSuccess);
}

// mcclBenchMetaFill: every fixed field set (the sim names its device and CUDA version).
static void metaFill(void) {
  char* argv[] = {"prog", "-b", "8", NULL};
  mcclBenchMeta m;
  mcclBenchMetaFill(&m, 0, 3, argv);
  EXPECT_EQ(strlen(m.date), strlen("2026-01-02T03:04:05Z"));
  EXPECT_TRUE(m.device[0] && m.driver[0] && m.commit[0]);
  EXPECT_EQ(strcmp(m.backend, MCCL_BACKEND_NAME), 0);
  EXPECT_EQ(strcmp(m.command, "prog -b 8"), 0);
  EXPECT_EQ(m.nExtra, 0);
}

// mcclBenchMedian: the middle sample of an odd count, the mean of the middle two of an even one.
static void median(void) {
  double odd[] = {5, 1, 4, 2, 3};
  EXPECT_TRUE(mcclBenchMedian(odd, 5) == 3);
  EXPECT_TRUE(odd[0] == 1 && odd[4] == 5);  // sorted in place
  double even[] = {8, 2, 6, 4};
  EXPECT_TRUE(mcclBenchMedian(even, 4) == 5);
  double one = 7;
  EXPECT_TRUE(mcclBenchMedian(&one, 1) == 7);
  EXPECT_TRUE(mcclBenchMedian(NULL, 0) == 0);
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(recordsAsWritten), MCCL_TEST_CASE(emptyAndNowhere), MCCL_TEST_CASE(refusals),
               MCCL_TEST_CASE(metaFill), MCCL_TEST_CASE(median))
