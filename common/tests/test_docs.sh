#!/usr/bin/env bash
# The docs cannot go stale: every shell command in a fenced block of README.md, sim/README.md,
# labs/*/README.md, final/README.md and docs/*.md is run (or, when expensive, dry-run), and no page states a test
# count by hand (counts go stale; docs/results/ pages are generated from logs by mk/results-md.py).
#
# A command line in a fenced block: after optional VAR=value words, `make ...`, `build/...` or
# `mk/...`; an alternative in its comment (`# or: build/...`) counts too, and so does an inline
# `make ...` span in the prose. How each is run:
#   make test/bench ...   with MCCL_DRY_RUN=1: LAB and T must select something; nothing runs
#   make gdb ...          make -n (gdb is interactive; make test's gdb.NN runs each lab.gdb)
#   make (other targets)  as written (help, demo, all: cheap on the sim)
#   build/.../bench_*     with --help (a benchmark takes minutes); other programs as written
# SANITIZE=, TSAN=, DEBUG=, BUILD_ROOT= and BACKEND= in a make command are replaced by this build's
# variant (a sanitizer build would take minutes; the filters do not depend on the variant).
. "$(dirname "$0")/shtest_lib.sh"

# Not run at all: pattern (bash regex on the command) @@ the reason.
skip_list=(
  '^make( .*)? deps( |$)@@installs packages as root; .ci/run runs it first'
  '^make( .*)? docs( |$)@@runs Doxygen; .ci/run builds the site and checks its links'
  '^make( .*)? (clean|compdb)( |$)@@rewrites the build tree or compile_commands.json under a running make test'
  '^mk/gpu-run\.sh@@needs GPUs'
  '^make( .*)? fuzz( |$)@@runs libFuzzer for FUZZ_SECONDS per target; .ci/run runs it, make test replays the corpus'
  '^mk/nccl-tests\.sh@@needs GPUs and an nccl-tests checkout'
  '^make( .*)? params-doc( |$)@@rewrites docs/parameters.md; test_common checks that it is current'
  '^make( .*)? install( |$)@@writes outside the build tree (PREFIX); final/tests/test_install.sh runs it with a temporary one'
  'LAB=NN( |$)@@NN is a placeholder'
  '^make( .*)? exercises( |$)@@writes a learner tree outside the repository; .ci/run builds and checks one (mk/exercises-ci.sh)'
  '^make( .*)? grade( |$)@@runs a lab'"'"'s tests in a learner tree (USE_REF=1 only there); mk/exercises-ci.sh checks its stubs'
)

doc_files() { ls README.md sim/README.md labs/*/README.md final/README.md docs/*.md 2>/dev/null; }

# commands FILE: "LINE<TAB>COMMAND" for each command in the file's fenced blocks
commands() {
  awk '
    /^[[:space:]]*```/ { inb = !inb; next }
    !inb {  # prose: inline `make ...` spans
      rest = $0
      while (match(rest, /`make [^`]*`/)) {
        printf "%d\t%s\n", NR, substr(rest, RSTART + 1, RLENGTH - 2); rest = substr(rest, RSTART + RLENGTH)
      }
      next
    }
    {
      line = $0; alt = ""
      if (match(line, /#[[:space:]]*or:[[:space:]]*/)) alt = substr(line, RSTART + RLENGTH)
      sub(/[[:space:]]+#.*$/, "", line); sub(/^[[:space:]]+/, "", line)
      n = split(line " && " alt, parts, /[[:space:]]*&&[[:space:]]*/)
      for (i = 1; i <= n; i++) {
        c = parts[i]; sub(/^[[:space:]]+/, "", c); sub(/[[:space:]]+$/, "", c)
        w = c; while (w ~ /^[A-Z_][A-Z0-9_]*=[^ ]* /) sub(/^[^ ]+ /, "", w)
        if (w ~ /^(make|build[^ ]*\/|mk\/|\.\/)/) printf "%d\t%s\n", NR, c
      }
    }' "$1"
}

# run_command COMMAND: run it the cheap way; prints why it failed, returns non-zero
run_command() {
  local cmd=$1 entry re reason out rc
  for entry in "${skip_list[@]}"; do
    re=${entry%%@@*}; reason=${entry#*@@}
    if [[ $cmd =~ $re ]]; then echo "# not run: $cmd ($reason)" >&2; return 0; fi
  done
  local -a envs=() words=()
  read -r -a words <<<"$cmd"
  while [[ ${words[0]:-} =~ ^[A-Z_][A-Z0-9_]*= ]]; do envs+=("${words[0]}"); words=("${words[@]:1}"); done
  out=$(mktemp)
  if [ "${words[0]}" = make ]; then
    local -a args=() target=""
    for w in "${words[@]:1}"; do
      case "$w" in SANITIZE=*|TSAN=*|CUDA_DEBUG=*|DEBUG=*|BUILD_ROOT=*|BACKEND=*) continue ;; esac
      args+=("$w")
      [[ $w == *=* || $w == -* || -n $target ]] || target=$w
    done
    case "$target" in
      test|bench) env "${envs[@]}" MCCL_DRY_RUN=1 timeout 120 bash -c "$(declare -f shtest_make); shtest_make \"\$@\"" _ "${args[@]}" >"$out" 2>&1 ;;
      gdb) env "${envs[@]}" timeout 120 bash -c "$(declare -f shtest_make); shtest_make -n \"\$@\"" _ "${args[@]}" >"$out" 2>&1 ;;
      *) env "${envs[@]}" timeout 120 bash -c "$(declare -f shtest_make); shtest_make \"\$@\"" _ "${args[@]}" >"$out" 2>&1 ;;
    esac
  else
    local -a prog=()
    for w in "${words[@]}"; do [[ $w == \[*\] ]] || prog+=("$w"); done  # [optional] placeholders
    case "$(basename "${prog[0]}")" in bench_*|mpi_bench_*) prog=("${prog[0]}" --help) ;; esac
    env "${envs[@]}" timeout 120 "${prog[@]}" >"$out" 2>&1
  fi
  rc=$?
  if [ "$rc" -ne 0 ]; then
    # The WARN lines that say why come before Open MPI's and make's closing words: into the log (stderr),
    # beside the one-line reason the caller keeps.
    grep -v '^make\[' "$out" | tail -n 25 | sed "s|^|#   $cmd: |" >&2
    echo "'$cmd' exited $rc: $(grep -v '^make\[' "$out" | tail -n 3 | tr '\n' ' ')"
    rm -f "$out"
    return 1
  fi
  rm -f "$out"
}

default_build() { case " ${MCCL_MAKE_VARS:-} " in *" BACKEND=sim DEBUG= SANITIZE= TSAN= BUILD_ROOT=build "*) return 0 ;; esac; return 1; }

commandsRun() {  # FILE
  local file=$1 n=0 bad="" line cmd why
  while IFS=$'\t' read -r -u 3 line cmd; do
    n=$((n + 1))
    why=$(run_command "$cmd" 3<&-) || bad="$bad; $file:$line: $why"
  done 3< <(commands "$file")
  [ -z "$bad" ] || shtest_fail "${bad#; }"
  [ "$n" -gt 0 ] || echo "# $file shows no commands"
}

# Test counts by hand go stale: "12 passed", "17 results", "127 GPU tests", "23 tests".
noHandWrittenTestCounts() {
  local hits
  hits=$(doc_files | xargs grep -nE '\b[1-9][0-9]* (passed|failed|skipped)\b|\b[0-9]+ (GPU |sim )?(tests|test results|results|test binaries)\b' |
         tr '\n' ' ')
  [ -z "$hits" ] || shtest_fail "test counts written by hand (write N, or link the generated docs/results page): $hits"
}

if default_build; then
  for f in $(cd "$shtest_root" && doc_files); do shtest_case "commands:$f" commandsRun "$f"; done
else
  shtest_case commands shtest_skip "the docs show the default sim build (build/sim); this run is ${MCCL_MAKE_VARS:-not from make}"
fi
shtest_case noHandWrittenTestCounts noHandWrittenTestCounts
shtest_main "$@"
