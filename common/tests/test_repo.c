// Repository checks that keep the docs honest: every device call a lab makes is in the device
// contract, and every lab has the parts docs/architecture.md lists. Run from the repository root.
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mccl_test.h"

static int inRoot(void) {
  return access("docs/device-contract.md", R_OK) == 0 && access("labs", X_OK) == 0;
}

static int fileContains(const char* path, const char* needle) {
  FILE* f = fopen(path, "r");
  if (!f) return 0;
  char line[4096];
  int found = 0;
  while (!found && fgets(line, sizeof(line), f)) found = strstr(line, needle) != NULL;
  fclose(f);
  return found;
}

// Every cu*/cuda* call in labs/*/{src,examples,bench,benchlib}/*.{c,cu} appears as `name` in docs/device-contract.md.
static void deviceContractComplete(void) {
  if (!inRoot()) SKIP("run from the repository root (make test)");
  FILE* p = popen(
      "grep -ohE '\\b(cu|cuda)[A-Z][A-Za-z0-9_]*[[:space:]]*\\(' "
      "labs/*/src/*.c labs/*/src/*.cu labs/*/examples/*.c labs/*/examples/*.cu "
      "labs/*/bench/*.c labs/*/bench/*.cu labs/*/benchlib/*.c 2>/dev/null | tr -d ' (' | sort -u",
      "r");
  EXPECT_TRUE(p != NULL);
  char name[256], missing[2048] = "";
  int nCalls = 0, nMissing = 0;
  while (fgets(name, sizeof(name), p)) {
    name[strcspn(name, "\n")] = '\0';
    if (!*name) continue;
    nCalls++;
    char quoted[300];
    snprintf(quoted, sizeof(quoted), "`%s`", name);
    if (!fileContains("docs/device-contract.md", quoted)) {
      nMissing++;
      if (strlen(missing) + strlen(name) + 2 < sizeof(missing)) {
        strcat(missing, " ");
        strcat(missing, name);
      }
    }
  }
  pclose(p);
  if (nCalls == 0) SKIP("no lab makes a device call yet");
  if (nMissing)
    mcclTestFailAt(__FILE__, __LINE__, "expected every device call in docs/device-contract.md, missing:%s", missing);
}

// Each lab has its public header, demo, lab.gdb and a README with the fixed sections.
static void labsHaveTheirParts(void) {
  if (!inRoot()) SKIP("run from the repository root (make test)");
  static const char* sections[] = {
      "## What you build",         "## Key concepts",  "## The NCCL source it mirrors", "## Run it", "## Test it",
      "## Step through it in gdb", "## Common issues", "## Checkpoint questions"};
  glob_t g;
  if (glob("labs/[0-9][0-9]_*", GLOB_ONLYDIR, NULL, &g) != 0) SKIP("no labs yet");
  for (size_t i = 0; i < g.gl_pathc; i++) {
    const char* lab = g.gl_pathv[i];
    char path[512];
    const char* parts[] = {"README.md", "lab.gdb", "examples/demo.c", "include"};
    for (size_t k = 0; k < sizeof(parts) / sizeof(parts[0]); k++) {
      snprintf(path, sizeof(path), "%s/%s", lab, parts[k]);
      if (access(path, R_OK) != 0) {
        mcclTestFailAt(__FILE__, __LINE__, "expected %s to exist", path);
        globfree(&g);
        return;
      }
    }
    snprintf(path, sizeof(path), "%s/README.md", lab);
    for (size_t s = 0; s < sizeof(sections) / sizeof(sections[0]); s++)
      if (!fileContains(path, sections[s])) {
        mcclTestFailAt(__FILE__, __LINE__, "expected section '%s' in %s", sections[s], path);
        globfree(&g);
        return;
      }
  }
  globfree(&g);
}

// The test harness lives in libmccl_test.a only: no library a program links (and so not final/'s)
// carries it. Checks the archives of this binary's own build (build/<variant>/lib).
static void harnessOnlyInTestLib(void) {
  if (!inRoot()) SKIP("run from the repository root (make test)");
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 32);
  EXPECT_TRUE(n > 0);
  self[n] = '\0';
  for (int up = 0; up < 3; up++) *strrchr(self, '/') = '\0';  // .../bin/common/test_repo -> build dir
  char cmd[8192];
  snprintf(cmd, sizeof(cmd),
           "for a in %s/lib/libmccl_*.a; do [ \"$a\" = %s/lib/libmccl_test.a ] && continue; "
           "nm -g --defined-only \"$a\" 2>/dev/null | grep -q ' mcclTest' && echo \"$a\"; done",
           self, self);
  FILE* p = popen(cmd, "r");
  EXPECT_TRUE(p != NULL);
  char line[4096], found[2048] = "";
  while (fgets(line, sizeof(line), p)) {
    line[strcspn(line, "\n")] = '\0';
    if (strlen(found) + strlen(line) + 2 < sizeof(found)) {
      strcat(found, " ");
      strcat(found, line);
    }
  }
  pclose(p);
  snprintf(line, sizeof(line), "%s/lib/libmccl_test.a", self);
  EXPECT_TRUE(access(line, R_OK) == 0);
  if (*found) mcclTestFailAt(__FILE__, __LINE__, "expected the harness only in libmccl_test.a, also in:%s", found);
}

// Examples and benchmarks are what a learner copies: they use public headers, never a test's.
static void examplesIncludeNoTests(void) {
  if (!inRoot()) SKIP("run from the repository root (make test)");
  FILE* p = popen(
      "grep -lE '#[[:space:]]*include[[:space:]]*\"([^\"]*/)?tests/' labs/*/examples/*.c labs/*/bench/*.c "
      "final/examples/*.c final/bench/*.c 2>/dev/null",
      "r");
  EXPECT_TRUE(p != NULL);
  char line[512], found[2048] = "";
  while (fgets(line, sizeof(line), p)) {
    line[strcspn(line, "\n")] = '\0';
    if (strlen(found) + strlen(line) + 2 < sizeof(found)) {
      strcat(found, " ");
      strcat(found, line);
    }
  }
  pclose(p);
  if (*found) mcclTestFailAt(__FILE__, __LINE__, "expected no example or benchmark to include tests/, got:%s", found);
}

// Parameters are declared once, in common/include/mccl_params.def: library and sim code read them
// through the table (mcclParam<Name>(), or the sim's copy of the rows), never by a name or default
// of their own. A quoted "MCCL_<ENV>" of a table row in their sources is such a copy.
static void paramsOnlyFromTheTable(void) {
  if (!inRoot()) SKIP("run from the repository root (make test)");
  FILE* p = popen(
      "grep -oE '^MCCL_PARAM_[A-Z]+\\([A-Za-z0-9]+, \"[A-Z0-9_]+\"' common/include/mccl_params.def "
      "| sed -E 's/.*\"([A-Z0-9_]+)\"/MCCL_\\1/' | while read -r n; do "
      "grep -lF \"\\\"$n\\\"\" common/src/*.c sim/src/*.c labs/*/src/*.c final/src/*.c 2>/dev/null "
      "| sed \"s|$| ($n)|\"; done",
      "r");
  EXPECT_TRUE(p != NULL);
  char line[512], found[2048] = "";
  while (fgets(line, sizeof(line), p)) {
    line[strcspn(line, "\n")] = '\0';
    if (strlen(found) + strlen(line) + 2 < sizeof(found)) {
      strcat(found, " ");
      strcat(found, line);
    }
  }
  pclose(p);
  if (*found) mcclTestFailAt(__FILE__, __LINE__, "expected parameters read through mccl_params.def, got:%s", found);
}

// Comments say why, never when (docs/contributing.md): the sources name no issue numbers and no dates,
// dated results pages included; history lives in git and docs/results/. test_benchout.c's date is a
// fixture the writer must format, not history.
static void sourcesSayWhyNotWhen(void) {
  if (!inRoot()) SKIP("run from the repository root (make test)");
  FILE* p = popen(
      "grep -rnE '[Ii]ssue [0-9]+|\\([i]ssue|20[0-9]{2}-[01][0-9]-[0-3][0-9]' --include='*.c' --include='*.h' "
      "--include='*.cu' --include='*.cuh' --include='*.def' --include='*.sh' --include='*.mk' --include='*.py' "
      "--include='*.gdb' --include='*.cuda-gdb' --include=Makefile --exclude=test_benchout.c "
      "Makefile common sim labs final mk 2>/dev/null | cut -c1-120",
      "r");
  EXPECT_TRUE(p != NULL);
  char line[512], found[2048] = "";
  while (fgets(line, sizeof(line), p)) {
    line[strcspn(line, "\n")] = '\0';
    if (strlen(found) + strlen(line) + 4 < sizeof(found)) {
      strcat(found, "\n  ");
      strcat(found, line);
    }
  }
  pclose(p);
  if (*found) mcclTestFailAt(__FILE__, __LINE__, "expected no issue number or date in the sources, got:%s", found);
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(deviceContractComplete), MCCL_TEST_CASE(labsHaveTheirParts),
               MCCL_TEST_CASE(harnessOnlyInTestLib), MCCL_TEST_CASE(examplesIncludeNoTests),
               MCCL_TEST_CASE(paramsOnlyFromTheTable), MCCL_TEST_CASE(sourcesSayWhyNotWhen))
