#!/usr/bin/env bash
# make fuzz: run each libFuzzer target for a bounded time against the committed corpus.
#   fuzz.sh BUILD_DIR SECONDS DIR/TARGET...
# Each target is named by its module's fuzz directory and its name (labs/05_proxy/fuzz/proxy_rpc), its
# binary is BUILD_DIR/fuzz_<target>. New inputs libFuzzer keeps go to BUILD_DIR/corpus/<target> (the
# committed DIR/corpus/<target> and DIR/crashes/<target> are only read); a crash leaves its input in
# BUILD_DIR/crashes/<target>-crash-<sha1>, prints how to keep it as a regression case, and makes the run
# fail (after every target has had its turn). Targets run FUZZ_JOBS at a time (default: the number of
# cores); reports print in the targets' order.
set -u
build=$1 secs=$2; shift 2
[ $# -gt 0 ] || { echo "fuzz: no target selected" >&2; exit 2; }
# One target: its report lines go to BUILD_DIR/<target>.report, its status to BUILD_DIR/<target>.status.
fuzz_one() {
  local dir=${1%/*} t=${1##*/} c
  local log="$build/$t.log"
  mkdir -p "$build/corpus/$t" "$build/crashes"
  # Former crashes (DIR/crashes/<target>) start the run too, under ASan and UBSan.
  local seeds=("$dir/corpus/$t")
  [ -d "$dir/crashes/$t" ] && seeds+=("$dir/crashes/$t")
  {
    printf '# fuzz %-20s %ss ... ' "$t" "$secs"
    if "$build/fuzz_$t" "$build/corpus/$t" "${seeds[@]}" -max_total_time="$secs" -max_len=4096 -timeout=10 \
         -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/crashes/$t-" >"$log" 2>&1; then
      echo "ok ($(sed -nE 's/^stat::number_of_executed_units: *//p' "$log") runs)"
      echo 0 > "$build/$t.status"
    else
      echo "FAILED"
      grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|.*decoder accepted)' "$log" | head -5 | sed 's/^/#   /'
      for c in $(sed -nE 's/.*Test unit written to (.*)$/\1/p' "$log"); do
        echo "#   input: $c  (keep it: mkdir -p $dir/crashes/$t && cp $c $dir/crashes/$t/, then fix the decoder)"
      done
      echo "#   full log: $log"
      echo 1 > "$build/$t.status"
    fi
  } > "$build/$t.report"
}
# FUZZ_JOBS targets at a time (default: one per core); each still fuzzes for SECONDS on one core.
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
for target in "$@"; do
  rm -f "$build/${target##*/}.status"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  fuzz_one "$target" &
done
wait
failed=()
for target in "$@"; do
  t=${target##*/}
  cat "$build/$t.report" 2>/dev/null || echo "# fuzz $t: no report"
  [ "$(cat "$build/$t.status" 2>/dev/null)" = 0 ] || failed+=("$t")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${#failed[@]} of $# target(s) crashed: ${failed[*]}"
  exit 1
fi
echo "fuzz: $# target(s), ${secs}s each, no crash"
