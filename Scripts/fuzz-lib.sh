# shellcheck shell=bash
# Scripts/fuzz-lib.sh: what the libFuzzer scripts (fuzz-dns.sh, fuzz-wireguard.sh) share; sourced, never run.
# The caller sets `out` (its .build directory), `log`, and `max_time`/`max_runs` defaults, then calls these.

# summary PASSED FAILED: the line Scripts/test.sh counts, then exit (0 only when nothing failed).
summary() { printf '%d passed, %d failed\n' "$1" "$2"; [ "$2" -eq 0 ]; exit; }

# fuzz_arguments HELP_LINES ARGS...: --time S, --runs N, -h (prints the script's header lines HELP_LINES,
# e.g. '2,23p'), or reproducer files (into `reproducers`).
fuzz_arguments() {
  local help=$1; shift
  reproducers=()
  while [ $# -gt 0 ]; do
    case $1 in
      --time) max_time=$2; shift 2 ;;
      --runs) max_runs=$2; shift 2 ;;
      -h|--help) sed -n "$help" "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
      *) reproducers+=("$(realpath "$1")"); shift ;;
    esac
  done
}

# fuzz_built OK WHAT: after the build (OK its status, 0 when it built): a failure prints the log and the
# summary; otherwise the warnings are shown, not fatal (swift build is where the package's are policed).
# ld.gold warns about every ASan helper it cannot export; those lines are noise.
fuzz_built() {
  if [ "$1" -ne 0 ]; then
    grep -v "Cannot export local symbol" "$out/build.log"
    echo "not ok - building the $2 fuzz target failed (log: $out/build.log)"
    summary 0 1
  fi
  grep -v "Cannot export local symbol" "$out/build.log" | grep -A3 "warning:"
}

# fuzz_run BINARY WHAT DICT SEED_VARIABLE SCRIPT: re-runs the reproducers when there are any, else fuzzes
# for max_time / max_runs with the dictionary and the seeds the target writes (SEED_VARIABLE names the
# directory to it), then prints the summary. SCRIPT is how to re-run a reproducer.
fuzz_run() {
  local binary=$1 what=$2 dict=$3 seed_variable=$4 script=$5 rc artifact
  # The Swift runtime's backtracer would take over the crash (and wait for it); libFuzzer's handler must
  # see the signal to save the input.
  export SWIFT_BACKTRACE=enable=no
  export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=0:symbolize=1}
  if [ ${#reproducers[@]} -gt 0 ]; then
    "$binary" "${reproducers[@]}" 2>&1 | grep -v "^INFO: Seed\|^INFO: Loaded"
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] && { echo "ok - ${#reproducers[@]} input(s) pass"; summary 1 0; }
    echo "not ok - a reproducer still fails (exit $rc)"
    summary 0 1
  fi
  local seeds=$out/seeds
  rm -rf "$seeds" && mkdir -p "$seeds"
  echo "fuzzing for at most ${max_time}s / ${max_runs} inputs (log: $log)"
  env "$seed_variable=$seeds" "$binary" -max_total_time="$max_time" -runs="$max_runs" -max_len=2048 \
    -timeout=10 -rss_limit_mb=2048 -dict="$dict" -artifact_prefix="$out/artifacts/" \
    -print_final_stats=1 "$out/corpus" "$seeds" > "$log" 2>&1
  rc=$?
  if [ "$rc" -eq 0 ]; then
    grep -E "^Done [0-9]+ runs|^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+.*(DONE|cov:)" "$log" | tail -n 3
    echo "ok - libFuzzer found nothing in $(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | sed 's/Done //')s (corpus: $(find "$out/corpus" -type f | wc -l) inputs)"
    summary 1 0
  fi
  # Failure: what broke, where the input is, how to re-run it.
  grep -v "^#[0-9]" "$log" | grep -v "^INFO:" | tail -n 60
  artifact=$(sed -n "s/.*Test unit written to \(.*\)$/\1/p" "$log" | tail -n 1)
  echo "not ok - the $what fuzz target failed (libFuzzer exit $rc; log: $log)"
  if [ -n "$artifact" ]; then
    echo "reproducer: $artifact"
    echo "re-run it: $script $artifact"
  fi
  summary 0 1
}
