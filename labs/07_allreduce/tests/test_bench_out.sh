#!/usr/bin/env bash
# Lab 07's benchmark as a user drives it: nccl-tests' flags (-b -e -f -n -w -c -d -o -G -R), its
# --csv/--json files (common/include/mccl_benchout.h) read back with Python's csv and json modules,
# and `make plot` turning them into PNG charts. Runs mpirun -np 2 on the sim (a few seconds each).
. "$(dirname "$0")/../../../common/tests/shtest_lib.sh"

shtest_bench_setup 07_allreduce/mpi_bench_allreduce

# run_bench NAME ARGS...: mpirun -np 2 the benchmark; output in $work/NAME.log, exit status returned
run_bench() {
  local name=$1; shift
  # shellcheck disable=SC2086 # MPIRUN_FLAGS is a list of flags
  timeout 300 $MPIRUN $MPIRUN_FLAGS -np 2 "$bench" "$@" >"$work/$name.log" 2>&1
}

# The sweep's files, made once for the cases that read them: ring, one-shot and two-shot.
sweep_files() {
  [ -f "$work/sweep.json" ] && return 0
  run_bench sweep -b 64 -e 256K -f 64 -n 2 -w 1 -c 1 --algo ring,oneshot,twoshot --csv "$work/sweep.csv" --json "$work/sweep.json" --progress ||
    shtest_fail "mpi_bench_allreduce exited $?: $(shtest_tail 4 "$work/sweep.log")"
}

# check_records FILE SIZES TYPES OPS ALGOS: read FILE (CSV or JSON) back and check its columns, metadata
# and records: sizes (float32 bytes, or -), types, operations and our algorithms as expected, the
# rates consistent with the time, 0 wrong elements, both placements of every row; NCCL's rows and
# ratios only where NCCL ran (the cuda backend). Fails the case with the first mismatch.
check_records() {
  local msg
  msg=$(python3 - "$@" <<'EOF' 2>&1
import csv, json, sys
path, want_sizes, want_types, want_ops, want_algos = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
cols = ["size", "count", "type", "redop", "lib", "variant", "algo", "placement", "time_us", "algbw", "busbw",
        "wrong", "nccl_time_us", "ratio"]
esize = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "float16": 2, "float32": 4,
         "float64": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1}
if path.endswith(".json"):
    doc = json.load(open(path))
    meta, rows = doc["metadata"], doc["rows"]
    for r in rows:
        assert list(r.keys()) == cols, "JSON keys %s, expected %s" % (list(r.keys()), cols)
else:
    meta, lines = {}, []
    for line in open(path, newline=""):
        if line.startswith("#"):
            k, _, v = line[1:].partition(":")
            meta[k.strip()] = v.strip()
        else:
            lines.append(line)
    reader = csv.DictReader(lines)
    assert reader.fieldnames == cols, "CSV header %s, expected %s" % (reader.fieldnames, cols)
    rows = list(reader)
for k in ("date", "device", "driver", "commit", "backend", "nranks"):
    assert meta.get(k), "metadata has no %s: %s" % (k, meta)
assert meta["backend"] in ("sim", "cuda") and meta["nranks"] == "2", meta
nccl = {}  # (size, type, op, placement) -> NCCL's best time
assert rows, "no records"
seen = set()
for r in rows:
    size, count, t = int(r["size"]), int(r["count"]), float(r["time_us"])
    assert size == count * esize[r["type"]], r
    assert t > 0 and float(r["algbw"]) > 0, r
    # algbw = bytes / time; busbw = algbw * 2(n-1)/n = algbw for 2 ranks (to the 6 digits written)
    assert abs(float(r["algbw"]) - size / t / 1e3) <= 1e-5 * float(r["algbw"]), r
    assert abs(float(r["busbw"]) - float(r["algbw"])) <= 1e-5 * float(r["algbw"]), r
    assert r["placement"] in ("oop", "ip"), r
    assert r["wrong"] not in ("", None) and int(r["wrong"]) == 0, "wrong data: %s" % r
    key = (size, r["type"], r["redop"], r["placement"])
    if r["lib"] == "nccl":
        assert meta["backend"] == "cuda" and r["variant"] in ("nccl", "nccl-sym"), r
        nccl[key] = min(t, nccl.get(key, t))
        continue
    assert r["lib"] == "minccl", r
    if key in nccl:  # NCCL's rows come first at each size
        assert abs(float(r["nccl_time_us"]) - nccl[key]) <= 1e-5 * nccl[key], "nccl_time_us: %s" % r
        assert abs(float(r["ratio"]) - nccl[key] / t) <= 1e-4 * nccl[key] / t, "ratio: %s" % r
    else:
        assert r["nccl_time_us"] in ("", None) and r["ratio"] in ("", None), "NCCL figures without NCCL: %s" % r
    seen.add((size, r["type"], r["redop"], r["variant"], r["placement"]))
sizes = sorted({int(r["size"]) for r in rows if r["type"] == "float32"} or {0})
if want_sizes != "-":
    assert sizes == [int(s) for s in want_sizes.split(",")], "float32 sizes %s, expected %s" % (sizes, want_sizes)
types = sorted({r["type"] for r in rows})
ops = sorted({r["redop"] for r in rows})
algos = sorted({r["variant"] for r in rows if r["lib"] == "minccl"})
assert types == sorted(want_types.split(",")), "types %s, expected %s" % (types, want_types)
assert ops == sorted(want_ops.split(",")), "ops %s, expected %s" % (ops, want_ops)
assert algos == sorted(want_algos.split(",")), "algorithms %s, expected %s" % (algos, want_algos)
# every (type, op, algorithm) has both placements at every size it ran
for (c, t, o, v, p) in seen:
    assert (c, t, o, v, "ip" if p == "oop" else "oop") in seen, "only %s for %s" % (p, (c, t, o, v))
EOF
  ) || shtest_fail "$1: $msg"
}

csvAndJsonRecords() {
  need_bench
  sweep_files
  check_records "$work/sweep.csv" 64,4096,262144 float32 sum oneshot,ring,twoshot
  check_records "$work/sweep.json" 64,4096,262144 float32 sum oneshot,ring,twoshot
  # The same records in both files, and as many as the table has rows x placements.
  local ncsv njson nrows
  ncsv=$(grep -cv '^#' "$work/sweep.csv")
  njson=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["rows"]))' "$work/sweep.json")
  nrows=$(grep -cE '^ +[0-9]+ +[0-9]+ +float32 ' "$work/sweep.log")
  [ "$ncsv" = $((njson + 1)) ] && [ "$njson" = $((nrows * 2)) ] ||
    shtest_fail "records: CSV $ncsv lines (header included), JSON $njson, table $nrows rows x 2 placements"
  grep -q '^# data check: 0 wrong elements' "$work/sweep.log" || shtest_fail "the table's data check is not 0 wrong"
}

# --progress: a line per size on stderr, the last one [3/3].
progressLines() {
  need_bench
  sweep_files
  local n
  n=$(grep -cE '^\[[1-3]/3\] [0-9]+ (B|KiB) float32 sum done' "$work/sweep.log")
  [ "$n" = 3 ] || shtest_fail "expected 3 progress lines [k/3], got $n: $(grep '^\[' "$work/sweep.log" | tr '\n' ' ')"
}

# The closing summary: a line for each end of the sweep (64 B and 256 KiB), with the best of our three
# rows and two placements as the table shows it (its time, its row, " ip" when in place), the busbw that
# time gives, and NCCL's columns and the ratio (empty on the sim, NCCL's best / ours where NCCL ran).
summaryBestRows() {
  need_bench
  sweep_files
  local msg
  msg=$(python3 - "$work/sweep.log" "${BACKEND:-sim}" <<'EOF' 2>&1
import re, sys
sys.path.insert(0, "mk")
from benchsummary import summary
log, backend = open(sys.argv[1]).read().splitlines(), sys.argv[2]
rows = [l.split() for l in log if re.match(r"^ +[0-9]+ +[0-9]+ +float32 ", l)]
title = "# ==== summary: %s backend, 2 ranks, float32 sum, eager launches;" % backend
head, summ = summary(log, title)
assert head[-1] == "ratio", "summary columns: %s" % head
assert [int(f[0]) for f in summ] == [64, 262144], "summary sizes: %s" % [f[0] for f in summ]
for f in summ:
    size = int(f[0])
    # the table's minccl rows at this size: (time, row as the summary names it), out of place and in place
    ours = [(float(r[c]), r[5] + ("" if c == 6 else " ip")) for r in rows
            if int(r[0]) == size and r[5] not in ("nccl", "nccl-sym") for c in (6, 10)]
    best = min(ours)
    row = " ".join(f[3:5]) if len(f) > 4 and f[4] == "ip" else f[3]
    assert abs(float(f[1]) - best[0]) <= 0.006, "summary %d: ours %s us, the table's best %s" % (size, f[1], best)
    assert row in [n for t, n in ours if abs(t - best[0]) <= 0.006], "summary %d: row %s, best %s" % (size, row, best)
    assert abs(float(f[2]) - size / float(f[1]) / 1e3) <= 0.01 + 0.01 * float(f[2]), "summary %d: busbw %s" % (size, f[2])
    # NCCL's time, busbw and row (one word, or two for an in-place row), then the ratio, after ours' row.
    nccl = f[4 + (row != f[3]):]
    if backend == "sim":
        assert nccl == ["-", "-", "-", "-"], "NCCL figures on the sim: %s" % f
    elif nccl[0] != "-":
        assert abs(float(nccl[-1]) - float(nccl[0]) / float(f[1])) <= 0.01 + 0.01 * float(nccl[-1]), "ratio: %s" % f
EOF
  ) || shtest_fail "$msg"
}

# -d all -o all: every type and operation, each row checked (-c 2: two checked calls) and correct.
# A sanitizer build (SANITIZE=1, TSAN=1: each row takes seconds there) runs every type with one
# operation, avg (it scales: a floating type's inputs, an integer's sum), unless MCCL_TEST_FULL=1, as
# the C tests' mcclTestSampled.
everyTypeAndOp() {
  need_bench
  local ops=all want_ops=avg,max,min,prod,sum
  case " ${MCCL_MAKE_VARS:-} " in
    *" SANITIZE=1 "* | *" TSAN=1 "*) [ "${MCCL_TEST_FULL:-}" = 1 ] || { ops=avg; want_ops=avg; } ;;
  esac
  run_bench all -b 8 -e 8 -n 1 -w 0 -c 2 -d all -o "$ops" --algo oneshot --csv "$work/all.csv" ||
    shtest_fail "-d all -o $ops exited $?: $(shtest_tail 4 "$work/all.log")"
  check_records "$work/all.csv" - bfloat16,f8e4m3,f8e5m2,float16,float32,float64,int32,int64,int8,uint32,uint64,uint8 \
    "$want_ops" oneshot
  grep -q '^# data check: 0 wrong elements' "$work/all.log" || shtest_fail "data check not 0 wrong"
  grep -q 'check: 2 calls per row' "$work/all.log" || shtest_fail "-c 2 is not reported in the header"
}

# -c 0: nothing checked, and the files say so (wrong empty / null, never 0).
noCheckIsNotZeroWrong() {
  need_bench
  run_bench nocheck -b 64 -e 64 -n 1 -w 0 -c 0 --algo ring --no-nccl --csv "$work/nocheck.csv" --json "$work/nocheck.json" ||
    shtest_fail "-c 0 exited $?: $(shtest_tail 3 "$work/nocheck.log")"
  python3 - "$work/nocheck.csv" "$work/nocheck.json" <<'EOF' || shtest_fail "-c 0 records claim a check"
import csv, json, sys
rows = list(csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#")))
js = json.load(open(sys.argv[2]))["rows"]
assert len(rows) == 2 and len(js) == 2
assert all(r["wrong"] == "" for r in rows) and all(r["wrong"] is None for r in js)
EOF
}

# Flags nccl-tests has that the sim cannot honour, or values that make no sense, are refused with
# exit 2 and a message naming the option; a file that cannot be created fails the run.
badArguments() {
  need_bench
  need_refusals <<'EOF'
-R 1|-R 1
-b 1M -e 8|-b
-d float128|-d
-o mulsum|-o
-c -1|-c
--csv|--csv
--csv x.out --json x.out|same file
EOF
  if [[ " ${MCCL_MAKE_VARS:-} " == *" BACKEND=sim "* ]]; then
    "$bench" -G 1 >"$work/bad.log" 2>&1
    local g=$?
    [ "$g" = 2 ] && grep -q -- '-G' "$work/bad.log" || shtest_fail "-G 1 on the sim exited $g: $(head -n 1 "$work/bad.log")"
  fi
  # Every rank stops (rank 0 could not create it; 124 would be a rank left waiting for it).
  # shellcheck disable=SC2086 # MPIRUN_FLAGS is a list of flags
  timeout 60 $MPIRUN $MPIRUN_FLAGS -np 2 "$bench" -b 8 -e 8 --csv "$work/no/such/dir/r.csv" >"$work/nodir.log" 2>&1
  local rc=$?
  [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q 'no/such/dir/r.csv' "$work/nodir.log" ||
    shtest_fail "an uncreatable --csv file: exit $rc, $(shtest_tail 2 "$work/nodir.log")"
}

# MCCL_KERNEL_TRACE=1: the ring's role threads narrate their waits and posts (LL and SIMPLE); off by
# default (the runs above print none of it).
kernelTrace() {
  need_bench
  local proto want
  for proto in ll simple; do
    case $proto in ll) want='LL PostRecv: published head' ;; simple) want='PostSend: published tail' ;; esac
    # shellcheck disable=SC2086 # MPIRUN_FLAGS is a list of flags
    MCCL_KERNEL_TRACE=1 timeout 60 $MPIRUN $MPIRUN_FLAGS -x MCCL_KERNEL_TRACE -np 2 \
      "$bench" -b 64 -e 64 -n 1 -w 0 -c 1 --algo ring-$proto --no-nccl >"$work/trace-$proto.log" 2>&1 ||
      shtest_fail "MCCL_KERNEL_TRACE=1 ($proto) exited $?: $(shtest_tail 2 "$work/trace-$proto.log")"
    grep -q "\[kernel block 0 thread [0-9]*\] $want" "$work/trace-$proto.log" ||
      shtest_fail "MCCL_KERNEL_TRACE=1 ($proto): no '$want' line"
  done
  # shellcheck disable=SC2086 # MPIRUN_FLAGS is a list of flags
  timeout 60 $MPIRUN $MPIRUN_FLAGS -np 2 "$bench" -b 64 -e 64 -n 1 -w 0 -c 1 --algo ring --no-nccl >"$work/notrace.log" 2>&1
  ! grep -q '\[kernel block' "$work/notrace.log" || shtest_fail "trace lines without MCCL_KERNEL_TRACE"
}

is_png() {  # FILE: PNG signature and an IHDR chunk of a non-empty image
  python3 - "$1" <<'EOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n" and b[12:16] == b"IHDR", "not a PNG"
w, h = struct.unpack(">II", b[16:24])
assert w >= 200 and h >= 200 and b.rstrip(b"\0")[-8:-4] == b"IEND", (w, h)
EOF
}

# make plot: both charts for the CSV (beside it) and for the JSON (in PLOT_DIR), valid PNGs.
plotCharts() {
  need_bench
  mk/plot.sh --check || shtest_skip "no Python with matplotlib: make deps installs python3-matplotlib"
  sweep_files
  shtest_make plot RESULTS="$work/sweep.csv" >"$work/plot.log" 2>&1 || shtest_fail "make plot: $(tail -n 3 "$work/plot.log")"
  shtest_make plot RESULTS="$work/sweep.json" PLOT_DIR="$work/charts" >>"$work/plot.log" 2>&1 ||
    shtest_fail "make plot PLOT_DIR: $(tail -n 3 "$work/plot.log")"
  for f in "$work/sweep-latency.png" "$work/sweep-busbw.png" "$work/charts/sweep-latency.png" "$work/charts/sweep-busbw.png"; do
    [ -s "$f" ] || shtest_fail "make plot did not write $f: $(tr '\n' ' ' <"$work/plot.log")"
    is_png "$f" >"$work/png.log" 2>&1 || shtest_fail "$f is not a valid PNG: $(tail -n 1 "$work/png.log")"
  done
  # Without RESULTS, make plot fails with its usage; a file that is not results is refused, named.
  shtest_make plot >"$work/plot.log" 2>&1 && shtest_fail "make plot without RESULTS exited 0"
  grep -q 'usage: make plot RESULTS=' "$work/plot.log" || shtest_fail "make plot without RESULTS: no usage line"
  echo 'not,results' >"$work/junk.csv"
  mk/plot.sh "$work/junk.csv" >"$work/plot.log" 2>&1 && shtest_fail "mk/plot.py of a non-results CSV exited 0"
  grep -q 'junk.csv' "$work/plot.log" || shtest_fail "make plot of a non-results CSV does not name it"
}

shtest_case csvAndJsonRecords csvAndJsonRecords
shtest_case progressLines progressLines
shtest_case summaryBestRows summaryBestRows
shtest_case everyTypeAndOp everyTypeAndOp
shtest_case noCheckIsNotZeroWrong noCheckIsNotZeroWrong
shtest_case badArguments badArguments
shtest_case kernelTrace kernelTrace
shtest_case plotCharts plotCharts
shtest_main "$@"
