#!/usr/bin/env bash
# One dependency direction (docs/architecture.md, "Layers"): no file includes a header of a module
# above its own. The modules, lowest first: common, sim (the base), the labs in number order, final.
# A module's headers are the files under its include/ and src/; every file of a module (library
# sources, tests, examples, benchmarks, fuzz targets, plugins) may include its own module's headers
# and those of the modules below it, and nothing else of the tree. mk/config.mk puts every module's
# include/ on the include path, so the compiler alone would not refuse an upward include: this test does.
# An include is resolved as the compiler resolves it: a path relative to the including file (quotes
# only), else a name under some module's include/; a name found in neither way but that only higher
# modules' src/ provide counts as theirs too (a private header reached by another -I).
. "$(dirname "$0")/shtest_lib.sh"

# check_layers ROOT: prints one line per include that points up the stack ("file:line: ..."), relative
# to ROOT; exits 1 if there is any, 2 if ROOT has no modules.
check_layers() {
  python3 - "$1" <<'EOF'
import os, re, sys

root = sys.argv[1]
labs = sorted(d for d in os.listdir(os.path.join(root, "labs")) if re.match(r"\d\d_", d)) \
    if os.path.isdir(os.path.join(root, "labs")) else []
modules = [m for m in ["common", "sim"] + ["labs/" + d for d in labs] + ["final"] if os.path.isdir(os.path.join(root, m))]
if not modules:
    print("no module under %s" % root)
    sys.exit(2)
rank = {m: i for i, m in enumerate(modules)}
HEADER = re.compile(r"\.(h|cuh|hpp|def|inc)$")
SOURCE = re.compile(r"\.(c|cc|cpp|cu|h|cuh|hpp|def|inc)$")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def module_of(path):  # path relative to root
    for m in modules:
        if path == m or path.startswith(m + "/"):
            return m
    return None


def files(top):
    for d, subdirs, names in os.walk(os.path.join(root, top)):
        subdirs[:] = sorted(s for s in subdirs if not s.startswith(".") and not s.startswith("build"))
        for n in sorted(names):
            yield os.path.relpath(os.path.join(d, n), root)


# Header names only a module's src/ provides (private headers), for names no include/ resolves.
private = {}
for m in modules:
    for f in files(os.path.join(m, "src")) if os.path.isdir(os.path.join(root, m, "src")) else []:
        if HEADER.search(f):
            private.setdefault(os.path.basename(f), set()).add(m)


def resolve(includer, quote, name):
    """The module of the header an include names, or None when it is outside the tree (system, CUDA)."""
    if quote == '"':
        p = os.path.normpath(os.path.join(os.path.dirname(includer), name))
        if not p.startswith("..") and os.path.isfile(os.path.join(root, p)):
            return module_of(p)
    for m in modules:
        if os.path.isfile(os.path.join(root, m, "include", name)):
            return m
    owners = private.get(os.path.basename(name))
    if owners and all(rank[o] > rank[module_of(includer)] for o in owners):
        return min(owners, key=rank.get)
    return None


bad = 0
for m in modules:
    for f in files(m):
        if not SOURCE.search(f):
            continue
        with open(os.path.join(root, f), errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                inc = INCLUDE.match(line)
                if not inc:
                    continue
                to = resolve(f, inc.group(1), inc.group(2))
                if to is not None and rank[to] > rank[m]:
                    print("%s:%d: includes %s%s%s, a header of %s, above %s" % (
                        f, n, inc.group(1), inc.group(2), ">" if inc.group(1) == "<" else '"', to, m))
                    bad += 1
sys.exit(1 if bad else 0)
EOF
}

# The repository: every module's includes point down the stack (or stay in the module).
noUpwardInclude() {
  local out rc
  out=$(check_layers .)
  rc=$?
  [ "$rc" -eq 0 ] && return 0
  printf '%s\n' "$out" | sed 's/^/# /'
  [ "$rc" -eq 1 ] || shtest_fail "the check did not run (exit $rc): $out"
  shtest_fail "$(printf '%s\n' "$out" | wc -l) include(s) point up the stack, e.g. $(printf '%s\n' "$out" | head -n 1)"
}

# The check itself, on a small tree with one upward include of each kind planted among allowed ones:
# it must name exactly the planted ones (a check that finds nothing would pass the case above too).
findsPlantedViolations() {
  local want got
  t=$(mktemp -d)
  # This case runs in a subshell of its own: its trap removes the tree when it ends (shtest_msg is the
  # parent's to read and remove).
  trap 'rm -rf "$t"' EXIT
  mkdir -p "$t"/common/{include,src} "$t"/sim/src "$t"/labs/01_a/{include,src,tests} \
    "$t"/labs/02_b/{include,src,tests,fuzz} "$t"/final/src
  touch "$t"/common/include/mccl_base.h "$t"/labs/01_a/include/mccl_a.h "$t"/labs/01_a/src/a_priv.h \
    "$t"/labs/01_a/tests/a_util.h "$t"/labs/02_b/include/mccl_b.h "$t"/labs/02_b/src/b_priv.h
  # Allowed: own and lower headers by name, a lower lab's private or test header by path, a system header.
  printf '#include "mccl_base.h"\n' >"$t"/sim/src/ok.c
  printf '#include "mccl_a.h"\n#include "a_priv.h"\n#include <stdio.h>\n' >"$t"/labs/01_a/src/ok.c
  printf '#include "../../01_a/src/a_priv.h"\n#include "../../01_a/tests/a_util.h"\n' >"$t"/labs/02_b/tests/ok.c
  printf '#include "../src/b_priv.h"\n#include "mccl_a.h"\n' >"$t"/labs/02_b/fuzz/ok.c
  printf '#include "mccl_b.h"\n#include "mccl_base.h"\n' >"$t"/final/src/ok.c
  # Planted: the base including a lab's header by name and by path, a lab a higher lab's public header
  # (angle brackets) and private header (by path, and by a name only the higher lab's src/ has).
  printf '#include "mccl_a.h"\n' >"$t"/common/src/up.c
  printf '// x\n#include "../../labs/02_b/src/b_priv.h"\n' >"$t"/sim/src/up.c
  printf '#include <mccl_b.h>\n' >"$t"/labs/01_a/src/up.c
  printf '#include "../../02_b/src/b_priv.h"\n' >"$t"/labs/01_a/tests/up.c
  printf '# include "b_priv.h"\n' >"$t"/labs/01_a/tests/up2.c
  want=$'common/src/up.c:1\nlabs/01_a/src/up.c:1\nlabs/01_a/tests/up.c:1\nlabs/01_a/tests/up2.c:1\nsim/src/up.c:2'
  got=$(check_layers "$t" | cut -d: -f1,2 | LC_ALL=C sort)
  [ "$got" = "$want" ] || shtest_fail "expected the planted includes ($(echo $want)), got: $(echo $got)"
  check_layers "$t" >/dev/null && shtest_fail "exit 0 with upward includes"
  rm -f "$t"/common/src/up.c "$t"/sim/src/up.c "$t"/labs/01_a/src/up.c "$t"/labs/01_a/tests/up*.c
  got=$(check_layers "$t") || shtest_fail "the allowed includes alone were refused: $(echo $got)"
}

shtest_case noUpwardInclude noUpwardInclude
shtest_case findsPlantedViolations findsPlantedViolations
shtest_main "$@"
