#!/usr/bin/env bash
# make fuzz: run each libFuzzer target for a bounded time against the committed corpus.
#   fuzz.sh BUILD_DIR FUZZ_DIR SECONDS TARGET...
# New inputs libFuzzer keeps go to BUILD_DIR/corpus/<target> (the committed FUZZ_DIR/corpus/<target>
# and FUZZ_DIR/crashes/<target> are only read); a crash leaves its input in BUILD_DIR/crashes/<target>-crash-<sha1>, prints how to
# keep it as a regression case, and makes the run fail (after every target has had its turn).
set -u
build=$1 dir=$2 secs=$3; shift 3
[ $# -gt 0 ] || { echo "fuzz: no target selected" >&2; exit 2; }
failed=()
for t in "$@"; do
  mkdir -p "$build/corpus/$t" "$build/crashes"
  printf '# fuzz %-20s %ss ... ' "$t" "$secs"
  log="$build/$t.log"
  # Former crashes (FUZZ_DIR/crashes/<target>) start the run too, under ASan and UBSan.
  seeds=("$dir/corpus/$t")
  [ -d "$dir/crashes/$t" ] && seeds+=("$dir/crashes/$t")
  if "$build/fuzz_$t" "$build/corpus/$t" "${seeds[@]}" -max_total_time="$secs" -max_len=4096 -timeout=10 \
       -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/crashes/$t-" >"$log" 2>&1; then
    echo "ok ($(sed -nE 's/^stat::number_of_executed_units: *//p' "$log") runs)"
  else
    echo "FAILED"
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|.*decoder accepted)' "$log" | head -5 | sed 's/^/#   /'
    for c in $(sed -nE 's/.*Test unit written to (.*)$/\1/p' "$log"); do
      echo "#   input: $c  (keep it: mkdir -p $dir/crashes/$t && cp $c $dir/crashes/$t/, then fix the decoder)"
    done
    echo "#   full log: $log"
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${#failed[@]} of $# target(s) crashed: ${failed[*]}"
  exit 1
fi
echo "fuzz: $# target(s), ${secs}s each, no crash"
