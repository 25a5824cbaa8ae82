#!/usr/bin/env bash
# Lab 06's benchmark as a user runs it (mpirun -np 2, small sizes): it exits 0, and its closing summary
# has a line for each of its rows (P2P at --p2p-bytes one way and both ways, 8 B one way and both ways,
# SHM at --shm-bytes, lab 05's copy engine), each with our time and the bandwidth that time gives,
# NCCL's columns and the ratio of the times (empty where NCCL did not run: the sim), and a data check
# of 0 wrong words. Under a second on the sim.
. "$(dirname "$0")/../../../common/tests/shtest_lib.sh"

shtest_bench_setup 06_device_kernels/mpi_bench_prims

summaryRows() {
  need_bench
  # shellcheck disable=SC2086 # MPIRUN_FLAGS is a list of flags
  timeout 300 $MPIRUN $MPIRUN_FLAGS -np 2 "$bench" -b 8 -e 4K -f 32 -n 1 -w 0 --batch 1 --p2p-bytes 64K \
    --shm-bytes 64K --sweep-channels 1 >"$work/prims.log" 2>&1 || {
    local rc=$?
    grep -m 3 'MCCL EXERCISE' "$work/prims.log"  # in a learner tree, the stub it met names itself
    shtest_fail "mpi_bench_prims exited $rc: $(grep -v 'sim: WARN' "$work/prims.log" | tail -n 3 | tr '\n' ' ')"
  }
  local msg
  msg=$(python3 - "$work/prims.log" "${BACKEND:-sim}" <<'EOF' 2>&1
import re, sys
log, backend = open(sys.argv[1]).read().splitlines(), sys.argv[2]
title = "# ==== summary: %s backend, 2 ranks," % backend
at = [i for i, l in enumerate(log) if l.startswith(title)]
assert len(at) == 1, "no summary titled '%s'" % title
after = [l for l in log[at[0] + 1:] if l.startswith("#")]  # the other rank's lines may come in between
head = after[0].split()
assert head == ["#", "row", "ours", "ours", "NCCL", "NCCL", "ratio"], "summary columns: %s" % after[0]
units = after[1].split()
assert units == ["#", "(us)", "(GB/s)", "(us)", "(GB/s)"], "summary units: %s" % after[1]
want = {"P2P 64 KiB one way": 65536, "P2P 64 KiB both ways, per direction": 65536,
        "P2P 8 B one way, LL, 1 channel, eager": 8, "P2P 8 B both ways (nccl-tests sendrecv)": 8,
        "SHM 64 KiB one way": 65536, "SHM 64 KiB one way, lab 05 copy engine, host-timed": 65536}
got = {}
for l in after[2:]:
    m = re.match(r"^# (.+?)\s+([0-9.]+|-)\s+([0-9.]+|-)\s+([0-9.]+|-)\s+([0-9.]+|-)\s+([0-9.]+|-)$", l)
    if not m:
        break
    label = re.sub(r" \(c=\d+ t=\d+\)$", "", m.group(1).strip())
    got[label] = m.groups()[1:]
assert sorted(got) == sorted(want), "summary rows: %s" % sorted(got)
for label, (t, bw, nt, nbw, ratio) in got.items():
    size = want[label]
    assert t != "-" and float(t) > 0, "%s: our time %s" % (label, t)
    assert abs(float(bw) - size / float(t) / 1e3) <= 0.01 + 0.01 * float(bw), "%s: %s GB/s for %s us" % (label, bw, t)
    if nt == "-":
        assert (nbw, ratio) == ("-", "-"), "%s: NCCL columns %s %s %s" % (label, nt, nbw, ratio)
    else:
        assert backend == "cuda", "%s: NCCL figures on the sim" % label
        assert abs(float(ratio) - float(nt) / float(t)) <= 0.01 + 0.01 * float(ratio), "%s: ratio %s" % (label, ratio)
assert any(l.startswith("# ratio = NCCL's time / ours") for l in log), "no ratio legend"
assert "# data check of the summary rows: 0 wrong words" in log, "the summary rows' data check is not 0 wrong"
EOF
  ) || shtest_fail "$msg"
}

shtest_case summaryRows summaryRows
shtest_main "$@"
