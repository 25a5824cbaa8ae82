// Repository checks that keep the docs honest: every device call a lab makes is in the device
// contract, and every lab has the parts docs/architecture.md lists. Run from the repository root.
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mccl_test.h"

static int inRoot(void) { return access("docs/device-contract.md", R_OK) == 0 && access("labs", X_OK) == 0; }

static int fileContains(const char* path, const char* needle) {
  FILE* f = fopen(path, "r");
  if (!f) return 0;
  char line[4096];
  int found = 0;
  while (!found && fgets(line, sizeof(line), f)) found = strstr(line, needle) != NULL;
  fclose(f);
  return found;
}

// Every cu*/cuda* call in labs/*/{src,examples,bench}/*.{c,cu} appears as `name` in docs/device-contract.md.
static void deviceContractComplete(void) {
  if (!inRoot()) SKIP("run from the repository root (make test)");
  FILE* p = popen("grep -ohE '\\b(cu|cuda)[A-Z][A-Za-z0-9_]*[[:space:]]*\\(' "
                  "labs/*/src/*.c labs/*/src/*.cu labs/*/examples/*.c labs/*/examples/*.cu "
                  "labs/*/bench/*.c labs/*/bench/*.cu 2>/dev/null | tr -d ' (' | sort -u",
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
      if (strlen(missing) + strlen(name) + 2 < sizeof(missing)) { strcat(missing, " "); strcat(missing, name); }
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
  static const char* sections[] = {"## What you build", "## Key concepts", "## The NCCL source it mirrors", "## Run it",
                                   "## Test it", "## Step through it in gdb", "## Common issues",
                                   "## Checkpoint questions"};
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

MCCL_TEST_MAIN(MCCL_TEST_CASE(deviceContractComplete), MCCL_TEST_CASE(labsHaveTheirParts))
