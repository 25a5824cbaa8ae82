#!/usr/bin/env bash
# final/bench/allreduce_perf as a user runs it, on either backend: under mpirun -np 2 (one device per
# process), posed as 2 hosts (--hosts 2: NET edges) and as one process driving 4 devices (-g 4),
# 8 B .. 64 KiB; every row of the table has #wrong 0 in both placements, the closing summary gives the
# best row of the sweep's two ends with ratio columns, the --csv/--json files parse with the columns of
# common/include/mccl_benchout.h, and bad flags exit 2 naming the option and showing the usage line. A
# few seconds.
. "$(dirname "$0")/../../common/tests/shtest_lib.sh"

shtest_bench_setup final/allreduce_perf

# check_run NAME RANKS HOW: the table of $work/NAME.log (5 sizes, one minccl row each, #wrong 0 in both
# placements, the data check line), its summary (titled with the backend, RANKS and HOW; a line for
# each end of the sweep, 8 B and 32 KiB, with the table's best time and its busbw, NCCL's columns and
# the ratio empty without NCCL) and its files NAME.csv / NAME.json.
check_run() {
  local msg
  msg=$(python3 - "$work/$1" "$2" "${BACKEND:-sim}" "$3" <<'EOF2' 2>&1
import csv, json, sys
sys.path.insert(0, "mk")
from benchsummary import summary
base, nranks, backend, how = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
log = open(base + ".log").read().splitlines()
rows = [l.split() for l in log if l[:1] == " " and l.split()[0].isdigit()]
assert [int(r[0]) for r in rows] == [8, 64, 512, 4096, 32768], "table sizes: %s" % [r[0] for r in rows]
for r in rows:
    # size count type redop root algo | time algbw busbw #wrong | time algbw busbw #wrong | ratio ratio
    assert len(r) == 16 and r[2] == "float32" and r[3] == "sum" and r[4] == "-1" and r[5] == "minccl", r
    assert r[9] == "0" and r[13] == "0", "#wrong not 0: %s" % r
assert "# data check: 0 wrong elements in all rows" in log, "no data check line"
title = "# ==== summary: %s backend, %s ranks, float32 sum, %s;" % (backend, nranks, how)
head, summ = summary(log, title)
assert head[:3] == ["#", "size", "ours"] and head[-1] == "ratio", "summary columns: %s" % head
assert [int(f[0]) for f in summ] == [8, 32768], "summary sizes: %s" % [f[0] for f in summ]
busf = 2.0 * (int(nranks) - 1) / int(nranks)
for f in summ:
    # size | ours (us) busbw row [ip] | NCCL (us) busbw row | ratio
    size, t, bw = int(f[0]), float(f[1]), float(f[2])
    best = min(float(r[c]) for r in rows if int(r[0]) == size for c in (6, 10))  # out of place, in place
    assert abs(t - best) <= 0.006, "summary %s: ours %s us, the table's best %s" % (size, t, best)
    assert abs(bw - size * busf / t / 1e3) <= 0.01 + 0.01 * bw, "summary %s: busbw %s for %s us" % (size, bw, t)
    assert f[3] == "minccl" and len(f) in (8, 9) and (len(f) == 8 or f[4] == "ip"), "summary %s: our row %s" % (size, f)
    assert f[-4:] == ["-", "-", "-", "-"], "NCCL figures without NCCL: %s" % f
assert any(l.startswith("# ratio = NCCL's time / ours") for l in log), "no ratio legend"
cols = ["size", "count", "type", "redop", "lib", "variant", "algo", "placement", "time_us", "algbw", "busbw",
        "wrong", "nccl_time_us", "ratio"]
meta, lines = {}, []
for line in open(base + ".csv", newline=""):
    if line.startswith("#"):
        k, _, v = line[1:].partition(":")
        meta[k.strip()] = v.strip()
    else:
        lines.append(line)
reader = csv.DictReader(lines)
assert reader.fieldnames == cols, "CSV header %s" % reader.fieldnames
crows = list(reader)
doc = json.load(open(base + ".json"))
jrows = doc["rows"]
assert all(list(r.keys()) == cols for r in jrows), "JSON keys"
assert meta["program"] == doc["metadata"]["program"] == "final allreduce_perf", meta
assert meta["nranks"] == nranks and meta["backend"] == backend, meta
assert len(crows) == len(jrows) == 2 * len(rows), "records: CSV %d, JSON %d, table %d rows" % (len(crows), len(jrows), len(rows))
for c, j in zip(crows, jrows):
    assert int(c["size"]) == j["size"] and c["placement"] == j["placement"] and c["lib"] == j["lib"] == "minccl", (c, j)
    assert int(c["wrong"]) == 0 and j["wrong"] == 0 and float(c["time_us"]) > 0, (c, j)
    assert c["nccl_time_us"] == "" and j["ratio"] is None, "NCCL figures on the sim: %s" % c
EOF2
  ) || shtest_fail "$1: $msg"
}

mpirunTwoRanks() {
  need_bench
  # shellcheck disable=SC2086 # MPIRUN_FLAGS is a list of flags
  timeout 120 $MPIRUN $MPIRUN_FLAGS -np 2 "$bench" -b 8 -e 64K -f 8 -n 1 -w 0 --csv "$work/np2.csv" \
    --json "$work/np2.json" >"$work/np2.log" 2>&1 || shtest_fail "mpirun -np 2 exited $?: $(shtest_tail 3 "$work/np2.log")"
  check_run np2 2 "eager launches"
  grep -q '^# NCCL: skipped (--nccl not given)' "$work/np2.log" || shtest_fail "without --nccl: $(grep '^# NCCL' "$work/np2.log")"
}

# --nccl is read after the option table that checked it is gone (a stack table once made it read as
# absent): on the sim it must be seen, and declined for the sim's reason.
ncclFlagSeen() {
  need_bench
  "$bench" --nccl -b 8 -e 8 -n 1 -w 0 >"$work/nccl.log" 2>&1 || shtest_fail "--nccl exited $?: $(shtest_tail 2 "$work/nccl.log")"
  # The sim says why NCCL does not run; on a GPU the header names the NCCL it loaded and its rows.
  local want='^# NCCL: skipped (sim backend'
  [ "${BACKEND:-sim}" = sim ] || want='^# NCCL [0-9].*rows nccl'
  grep -q "$want" "$work/nccl.log" || shtest_fail "--nccl not seen: $(grep '^# NCCL' "$work/nccl.log")"
}

# A --csv file rank 0 cannot create ends every rank at once with an error, not rank 0 alone.
uncreatableOutput() {
  need_bench
  # shellcheck disable=SC2086 # MPIRUN_FLAGS is a list of flags
  timeout 60 $MPIRUN $MPIRUN_FLAGS -np 2 "$bench" -b 8 -e 8 -n 1 -w 0 --csv "$work/no/such/dir/r.csv" >"$work/nodir.log" 2>&1
  local rc=$?
  [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q 'no/such/dir/r.csv' "$work/nodir.log" ||
    shtest_fail "an uncreatable --csv file: exit $rc (124: a rank hung), $(shtest_tail 2 "$work/nodir.log")"
}

# --hosts 2: the two processes pose as two hosts, so every ring edge is lab 08's NET transport (each
# rank's MCCL_DEBUG=INFO lines name NET for both channels' send and receive), the rows are checked as
# any run's, the files carry the hosts metadata, and the summary says the ranks posed as hosts. Skipped
# under TSan: the net plugin needs MPI_THREAD_MULTIPLE (mccl_test_mpi.h says why TSan cannot run it).
posedHosts() {
  need_bench
  [ "${MCCL_TSAN:-0}" = 1 ] && shtest_skip "a ThreadSanitizer build: the net plugin needs MPI_THREAD_MULTIPLE, whose Open MPI races TSan reports"
  # shellcheck disable=SC2086 # MPIRUN_FLAGS is a list of flags
  timeout 120 $MPIRUN $MPIRUN_FLAGS -np 2 -x MCCL_DEBUG=INFO -x MCCL_DEBUG_SUBSYS=INIT,NET "$bench" --hosts 2 -b 8 \
    -e 64K -f 8 -n 1 -w 0 --csv "$work/hosts.csv" --json "$work/hosts.json" >"$work/hosts.log" 2>&1 ||
    shtest_fail "--hosts 2 exited $?: $(grep -v 'sim: WARN' "$work/hosts.log" | tail -n 3 | tr '\n' ' ')"
  check_run hosts 2 "eager launches, ranks posed as hosts (NET)"
  local r n
  for r in 0 1; do
    n=$(grep -cE "MCCL INFO Channel 0[01] : $r (->|<-) $((1 - r)) via NET/MPI" "$work/hosts.log")
    [ "$n" = 4 ] || shtest_fail "rank $r: $n of 4 channel halves via NET/MPI: $(grep ' via ' "$work/hosts.log" | tr '\n' ' ')"
  done
  grep -q '^# posed as 2 hosts' "$work/hosts.log" || shtest_fail "no 'posed as 2 hosts' header line"
  grep -q '^# hosts: 2, posed' "$work/hosts.csv" || shtest_fail "no hosts metadata: $(grep '^#' "$work/hosts.csv" | tr '\n' ' ')"
}

# --oop: out-of-place calls only, so an algorithm that refuses in-place buffers can be timed: lab 10's assisted
# allreduce (MCCL_ALGO=ce) fails the whole run without it (its in-place call is refused) and runs with it, every
# row checked and right, the in-place columns empty.
assistedOutOfPlace() {
  need_bench
  # shellcheck disable=SC2086 # MPIRUN_FLAGS is a list of flags
  MCCL_ALGO=ce timeout 120 $MPIRUN $MPIRUN_FLAGS -np 2 -x MCCL_ALGO "$bench" -b 1K -e 64K -f 8 -n 1 -w 0 \
    >"$work/ce-ip.log" 2>&1 && shtest_fail "MCCL_ALGO=ce with in-place calls exited 0"
  grep -q 'MCCL_ALGO=ce needs sendbuff and recvbuff in registered windows, apart' "$work/ce-ip.log" ||
    shtest_fail "MCCL_ALGO=ce in place: no refusal naming it: $(grep -m 2 WARN "$work/ce-ip.log" | tr '\n' ' ')"
  # shellcheck disable=SC2086
  MCCL_ALGO=ce timeout 120 $MPIRUN $MPIRUN_FLAGS -np 2 -x MCCL_ALGO "$bench" --oop -b 1K -e 64K -f 8 -n 1 -w 0 \
    >"$work/ce.log" 2>&1 || shtest_fail "MCCL_ALGO=ce --oop exited $?: $(shtest_tail 3 "$work/ce.log")"
  local rows
  rows=$(awk '$1 ~ /^[0-9]+$/ && $6 == "minccl" && $10 == "0" && $11 == "-" && $15 == "-"' "$work/ce.log" | wc -l)
  [ "$rows" = 3 ] || shtest_fail "expected 3 rows, out of place right and in place empty: $(grep minccl "$work/ce.log" | tr '\n' ' ')"
  grep -q '^# data check: 0 wrong elements in all rows' "$work/ce.log" || shtest_fail "no clean data check line"
}

oneProcessFourDevices() {
  need_bench
  timeout 120 "$bench" -g 4 -b 8 -e 64K -f 8 -n 1 -w 0 -c 2 --csv "$work/g4.csv" --json "$work/g4.json" --progress \
    >"$work/g4.log" 2>&1 || shtest_fail "-g 4 exited $?: $(shtest_tail 3 "$work/g4.log")"
  check_run g4 4 "eager launches"
  grep -q '^\[5/5\] 32 KiB float32 sum done' "$work/g4.log" || shtest_fail "--progress: no [5/5] line"
  grep -q '4 ranks (1 process x 4 devices)' "$work/g4.log" || shtest_fail "-g 4: the header does not say 1 process x 4 devices"
}

badFlags() {
  need_bench
  local rc
  need_refusals <<'EOF2'
-R 1|-R 1
-b 1M -e 8|-b
-d float128|-d
-o mulsum|-o
-n 0|-n
-g 9|-g
--algo ring|--algo
--csv x.out --json x.out|same file
--hosts 1|--hosts
--hosts two|--hosts
EOF2
  if [[ " ${MCCL_MAKE_VARS:-} " == *" BACKEND=sim "* ]]; then
    "$bench" -G 1 >"$work/bad.log" 2>&1
    rc=$?
    [ "$rc" = 2 ] && grep -q -- '-G' "$work/bad.log" || shtest_fail "-G 1 on the sim exited $rc: $(head -n 1 "$work/bad.log")"
  fi
  "$bench" --help >"$work/help.log" 2>&1 && grep -q -- '--nccl' "$work/help.log" || shtest_fail "--help: no --nccl line"
}

shtest_case mpirunTwoRanks mpirunTwoRanks
shtest_case ncclFlagSeen ncclFlagSeen
shtest_case uncreatableOutput uncreatableOutput
shtest_case posedHosts posedHosts
shtest_case oneProcessFourDevices oneProcessFourDevices
shtest_case assistedOutOfPlace assistedOutOfPlace
shtest_case badFlags badFlags
shtest_main "$@"
