#!/usr/bin/env python3
"""Score a lab's exercises from the output of `make test LAB=NN` (docs/exercises.md).

  grade.py LAB_DIR LOG      LAB_DIR e.g. labs/01_vmm_alloc; LOG the test output (mk/runtests.sh's)

An exercise is done when every test its [id] in LAB_DIR/exercises.txt lists passed (a SKIP, for missing
hardware, counts as neither). A stub that a test reached prints `MCCL EXERCISE <id> not implemented`:
the grade names those. Exit status 0 when every exercise of the lab is done.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import exercises  # noqa: E402

RESULT = re.compile(r"^(PASS|FAIL|SKIP) (\S+)")
STUB = re.compile(r"MCCL EXERCISE (\d\d\.[A-Za-z0-9_]+) not implemented")


def parse(log):
    """{test name: set of outcomes}, set of stubbed exercises that were reached."""
    outcomes, stubs = {}, set()
    with open(log, errors="replace") as f:
        for line in f:
            m = RESULT.match(line)
            if m:
                outcomes.setdefault(m.group(2), set()).add(m.group(1))
            for s in STUB.findall(line):
                stubs.add(s)
    return outcomes, stubs


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    lab, log = argv[0].rstrip("/").split("/")[-1], argv[1]
    exs = exercises.load_exercises(os.getcwd()).get(lab)
    if not exs:
        print("grade: labs/%s has no exercises.txt" % lab)
        return 2
    outcomes, stubs = parse(log)
    done_n, passed_all, total_all = 0, 0, 0
    print("\n======== grade: lab %s ========" % lab)
    for ex, fields in exs:
        tests = fields.get("tests", "").split()
        passed = [t for t in tests if outcomes.get(t) and "FAIL" not in outcomes[t] and "PASS" in outcomes[t]]
        skipped = [t for t in tests if outcomes.get(t) == {"SKIP"}]
        counted = len(tests) - len(skipped)
        done = counted > 0 and len(passed) == counted
        done_n += done
        passed_all += len(passed)
        total_all += counted
        why = "done" if done else ("stub reached" if ex in stubs else "tests fail")
        if not done and not any(t in outcomes for t in tests):
            why = "not run (T= left its tests out?)"
        print("  %-20s %3d/%-3d tests  %-12s %s" % (ex, len(passed), counted, why, fields.get("title", "")))
        if not done and ex in stubs:
            print("  %-20s hint: %s" % ("", fields.get("hint", "")))
    print("score: %d/%d exercises done, %d/%d of their tests pass" % (done_n, len(exs), passed_all, total_all))
    return 0 if done_n == len(exs) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
