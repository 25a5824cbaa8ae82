#!/usr/bin/env bash
# CI's check of the exercises (docs/exercises.md), on the sim backend, after the main tree's `make all`.
#   1. mk/exercises.py check: every region pairs up and every exercise of labs/NN/exercises.txt marks one.
#   2. The learner tree (`make exercises`) compiles on sim: each file a region was cut from (a full build
#      would recompile every kernel a second time, for the same link the probe tree checks).
#   3. A probe tree (the same regions as `if (MCCL_EXERCISE_PROBE names it) stub else solution`), one build:
#      with every stub on (MCCL_EXERCISE_PROBE=all), each lab's tests either pass, when no exercise lists
#      them, or fail, and then the output names a stub (or, for a test that hides its child's output,
#      an exercise lists the test); none crashes or hangs (MCCL_TEST_TIMEOUT short).
#      With one stub on at a time, the first test its exercise lists fails and names it: every region
#      is reached by a test, and the mapping in exercises.txt is not stale.
#   4. The grade as a learner meets it, in the learner tree: with the reference solution of each lab's first
#      exercise copied in (mk/exercises.py solve), `make grade LAB=NN USE_REF=1` scores that exercise done
#      and every other one of the lab not done. The learner's builds (here and in step 2) print no warning.
#      Step 4 builds at -O0 (OPTFLAGS, debug information kept for the gdb walks): a lab's stubbed device headers
#      recompile its kernel files, four times faster so, and the score does not depend on the optimisation.
# Both trees start from a copy of build/sim (objects, timestamps kept), so only the marked files and what
# includes or links them are rebuilt; step 4's build (build/sim-ref, USE_REF=1's) starts from the learner
# tree's build/sim of step 2. EXERCISES_CI_DIR (default build-exercises) holds the trees.
# LABS (e.g. LABS="07 08"; default every lab) narrows steps 2 to 4 to those labs' regions and tests.
set -uo pipefail
cd "$(dirname "$0")/.."
work=${EXERCISES_CI_DIR:-build-exercises}
export MCCL_TEST_TIMEOUT=${EXERCISES_TEST_TIMEOUT:-60}
labsArg=()
[ -n "${LABS:-}" ] && labsArg=("--labs=${LABS// /,}")
inLabs() { [ -z "${LABS:-}" ] || [[ " ${LABS//,/ } " == *" ${1:0:2} "* ]]; }
start=$SECONDS
fail=0
note() { printf '# exercises-ci (%ds): %s\n' "$((SECONDS - start))" "$*"; }
bad() { echo "FAIL exercises: $*"; fail=1; }

python3 mk/exercises.py check || exit 1
[ -d build/sim ] || { echo "exercises-ci: build/sim is missing: run make BACKEND=sim all first"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || exit 1
python3 mk/exercises.py gen "$work/learner" ${labsArg[@]+"${labsArg[@]}"} || exit 1
python3 mk/exercises.py gen "$work/probe" --probe ${labsArg[@]+"${labsArg[@]}"} || exit 1
for t in learner probe; do mkdir -p "$work/$t/build" && cp -a build/sim "$work/$t/build/" || exit 1; done
# The learner tree: every file a region was cut from compiles (as its own object, or for a device header
# one kernel that includes it), with the learner's flags. The probe tree's full build below links them all.
objs=$(python3 mk/exercises.py objects build/sim/obj ${labsArg[@]+"${labsArg[@]}"}) || exit 1
note "compiling the learner tree's stubbed files: $(echo $objs | wc -w) objects"
if ! make -C "$work/learner" -j2 BACKEND=sim $objs >"$work/learner-build.log" 2>&1; then
  tail -n 40 "$work/learner-build.log"; bad "the learner tree's stubs do not compile on sim (log: $work/learner-build.log)"
  exit 1
fi
# A compiler's or the linker's warning (not, say, gdb's, whose output a test may show).
warnings() { grep -nE '^[^ :]+:[0-9]+(:[0-9]+)?: warning:|ld: warning:' "$1"; }
warnings "$work/learner-build.log" && bad "the learner tree's build prints warnings (above)"
note "building the probe tree"
# At -O0 without debug information (OPTFLAGS): the files the probes touch include lab 06's device headers, so
# every kernel file of labs 06-07 compiles again, five times faster so; its tests only have to reach and fail.
if ! make -C "$work/probe" -j2 BACKEND=sim OPTFLAGS="-O0 -g0" all >"$work/probe-build.log" 2>&1; then
  tail -n 40 "$work/probe-build.log"; bad "the probe tree does not build on sim (log: $work/probe-build.log)"
  exit 1
fi

# Every stub on: run each lab's tests, then look at each test binary's run (mk/runtests.sh's '# running' blocks).
python3 mk/exercises.py list | cut -f3 | tr ' ' '\n' | sort -u >"$work/listed.txt"
for lab in $(python3 mk/exercises.py list | cut -f2 | sort -u); do
  n=${lab%%_*}
  inLabs "$n" || continue
  note "lab $n, every stub on"
  log="$work/all-$n.log"
  MCCL_EXERCISE_PROBE=all make -C "$work/probe" --no-print-directory BACKEND=sim test LAB="$n" >"$log" 2>&1
  python3 - "$log" "$n" "$work/listed.txt" <<'EOF' || fail=1
import re, sys
log, lab = sys.argv[1], sys.argv[2]
listed = set(open(sys.argv[3]).read().split())
blocks, cur = [], None
for line in open(log, errors="replace"):
    if line.startswith("# running "):
        cur = [line[10:].strip(), []]
        blocks.append(cur)
    elif cur is not None:
        cur[1].append(line.rstrip("\n"))
bad = 0
for unit, lines in blocks:
    text = "\n".join(lines)
    fails = [l for l in lines if l.startswith("FAIL ")]
    passes = [l.split()[1] for l in lines if l.startswith("PASS ")]
    for p in passes:
        if p in listed:
            print("FAIL exercises: lab %s: %s passes with every stub on, yet an exercise lists it" % (lab, p))
            bad = 1
    if any("timed out after" in l or "exited with status" in l for l in fails) and "MCCL EXERCISE" not in text:
        print("FAIL exercises: lab %s: %s crashed or hung with every stub on:\n  %s" % (lab, unit, "\n  ".join(fails)))
        bad = 1
    elif any("timed out after" in l for l in fails):
        print("FAIL exercises: lab %s: %s hung past MCCL_TEST_TIMEOUT behind a stub" % (lab, unit))
        bad = 1
    elif fails and "MCCL EXERCISE" not in text and "an exercise stub" not in text and \
            not all(l.split()[1] in listed for l in fails):
        # A test that hides its child's output (a demo run by a test) cannot name the stub: it must then be
        # one that an exercise lists, i.e. one that fails with only that exercise's stub on.
        print("FAIL exercises: lab %s: %s fails with no stub named:\n  %s" % (lab, unit, "\n  ".join(fails[:5])))
        bad = 1
sys.exit(bad)
EOF
done

# One stub at a time: the first test the exercise lists must fail and name it.
while IFS=$'\t' read -r ex lab tests; do
  inLabs "$ex" || continue
  first=${tests%% *}
  [ -n "$first" ] && [ "$first" != TODO ] || { bad "$ex lists no test"; continue; }
  log="$work/probe-$ex.log"
  MCCL_EXERCISE_PROBE=$ex make -C "$work/probe" --no-print-directory BACKEND=sim test LAB="${lab%%_*}" T="$first" \
    >"$log" 2>&1
  unit=$first; [[ $first == */* ]] && unit=${first%.*}  # a stub that ends the process fails its whole binary
  if ! grep -q "^FAIL $first\b" "$log" && ! grep -q "^FAIL $unit\b" "$log"; then
    bad "$ex: its test $first does not fail with the stub in place (log: $log)"
  elif ! grep -q "MCCL EXERCISE $ex not implemented" "$log"; then
    bad "$ex: its test $first fails without reaching the stub (log: $log)"
  fi
done < <(python3 mk/exercises.py list)

# 4. Each lab's first exercise solved with the reference's code: its grade says that one is done, no other.
firsts=$(python3 mk/exercises.py list | awk -F'\t' '!seen[$2]++ {print $1}')
firsts=$(for ex in $firsts; do inLabs "$ex" && echo "$ex"; done)
note "the learner tree with $(echo $firsts | wc -w) first exercises solved: grading each lab"
if python3 mk/exercises.py solve "$work/learner" $firsts >"$work/solve.log" 2>&1; then
  cp -a "$work/learner/build/sim" "$work/learner/build/sim-ref" || exit 1
  # The dependency files name their objects under build/sim/: renamed, or make would not see which header an
  # object of build/sim-ref depends on (a stubbed device header would leave the kernels compiled before it).
  # An object of lab NN is built only by `make grade LAB=NN USE_REF=1`, which takes the lower labs' headers
  # from the reference tree (mk/exercises.mk): its dependencies on them name those, which the objects copied
  # from the reference build were compiled from. So lab 07's kernels are not compiled again for lab 06's
  # stubbed primitives, which they do not include there.
  python3 - "$work/learner/build/sim-ref/obj" "$PWD" <<'EOF' || exit 1
import os, re, sys
obj, ref = sys.argv[1], sys.argv[2]
for d, _, names in os.walk(obj):
    m = re.search(r"/labs/(\d\d)_[^/]+(/|$)", d[len(obj):] + "/")
    for n in names:
        if not n.endswith(".d"):
            continue
        p = os.path.join(d, n)
        text = re.sub(r"^build/sim/obj/", "build/sim-ref/obj/", open(p).read(), flags=re.M)
        if m:  # the lower labs' headers, as `make grade LAB=NN USE_REF=1` compiles this object
            text = re.sub(r"(^|\s)(labs/(\d\d)_[^/\s]+/include/)",
                          lambda h: h.group(1) + (ref + "/" if h.group(3) < m.group(1) else "") + h.group(2),
                          text, flags=re.M)
        open(p, "w").write(text)
EOF
  for ex in $firsts; do
    lab=${ex%%.*}
    log="$work/grade-$lab.log"
    s=$SECONDS
    make -C "$work/learner" --no-print-directory BACKEND=sim grade LAB="$lab" USE_REF=1 OPTFLAGS="-O0 -g" >"$log" 2>&1
    warnings "$log" && bad "lab $lab: the learner tree's build prints warnings (above; log: $log)"
    verdict=$(awk -v ex="$ex" '$2 ~ /^[0-9]+\/[0-9]+$/ && $3 == "tests" && $1 ~ /^[0-9][0-9]\./ {
                n++; if (($1 == ex) != ($4 == "done")) wrong = wrong " " $1 ($4 == "done" ? " done" : " not done")
              } END { if (n == 0) print "no score"; else if (wrong) print wrong }' "$log")
    if [ -n "$verdict" ]; then
      grep -E "^(FAIL|SKIP) |^  [0-9][0-9]\.|^score" "$log" | head -n 30
      bad "lab $lab with only $ex solved:$verdict (log: $log)"
    else
      note "lab $lab: $ex done, the others not ($((SECONDS - s)) s)"
    fi
  done
else
  cat "$work/solve.log"; bad "mk/exercises.py solve could not copy the first exercises into the learner tree"
fi

note "done"
[ "$fail" -eq 0 ] && echo "exercises: every stub builds, is reached, and fails its tests fast; each lab's first" \
  "exercise, solved alone, is scored done alone" || exit 1
