#!/usr/bin/env bash
# Fuzzes the DNS message parsers of the split-DNS forwarder (what it reads from clients and from upstream
# servers), with libFuzzer, for a bounded time.
#
# Builds Fuzz/DNSFuzz.swift with the pure message files of Sources/DNSConfig (DNSName.swift,
# DNSMessageError.swift, DNSQuery.swift, DNSMessage.swift, DNSQuery+Answer.swift: no I/O, no other module)
# as one module named DNSConfig, with `swiftc -sanitize=fuzzer,address` (the Swift toolchain ships
# libFuzzer). The target checks invariants against a reference parser and models, not only "no crash";
# see the comment at the top of Fuzz/DNSFuzz.swift.
#
# The seed corpus is written by the target itself (DNS_FUZZ_SEED_DIR: queries and answers made by the code
# under test), regenerated each run; what libFuzzer finds beyond it accumulates in .build/fuzz-dns/corpus.
# A crash or broken invariant leaves the input in .build/fuzz-dns/artifacts/ and the log names it.
#
#   Scripts/fuzz-dns.sh                     fuzz for DNS_FUZZ_TIME seconds (default 30), at most
#                                           DNS_FUZZ_RUNS inputs (default 2000000)
#   Scripts/fuzz-dns.sh --time 600          longer
#   Scripts/fuzz-dns.sh FILE...             re-run reproducers (no fuzzing)
#
# Scripts/test.sh runs it as one check. The last line is "1 passed, 0 failed" when libFuzzer exited 0,
# "0 passed, 1 failed" otherwise; the exit status says the same.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
root=$(pwd)
if ! command -v swiftc >/dev/null && [ -x /opt/swift/usr/bin/swiftc ]; then PATH=/opt/swift/usr/bin:$PATH; fi

max_time=${DNS_FUZZ_TIME:-30}
max_runs=${DNS_FUZZ_RUNS:-2000000}
reproducers=()
while [ $# -gt 0 ]; do
  case $1 in
    --time) max_time=$2; shift 2 ;;
    --runs) max_runs=$2; shift 2 ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) reproducers+=("$(realpath "$1")"); shift ;;
  esac
done

out=$root/.build/fuzz-dns
mkdir -p "$out/corpus" "$out/artifacts"
log=$out/last-run.log
summary() { printf '%d passed, %d failed\n' "$1" "$2"; [ "$2" -eq 0 ]; exit; }

# --- Build ----------------------------------------------------------------------------------------------
flags=(-sanitize=fuzzer,address -parse-as-library -O -g -swift-version 6)
sources=(Sources/DNSConfig/DNSName.swift Sources/DNSConfig/DNSMessageError.swift Sources/DNSConfig/DNSQuery.swift
         Sources/DNSConfig/DNSMessage.swift "Sources/DNSConfig/DNSQuery+Answer.swift" Fuzz/DNSFuzz.swift)
echo "building $out/dns-fuzz (swiftc ${flags[*]})"
# ld.gold warns about every ASan helper it cannot export; those lines are noise.
if ! swiftc "${flags[@]}" -module-name DNSConfig -o "$out/dns-fuzz" "${sources[@]}" > "$out/build.log" 2>&1; then
  grep -v "Cannot export local symbol" "$out/build.log"
  echo "not ok - building the DNS fuzz target failed (log: $out/build.log)"
  summary 0 1
fi
# Warnings are shown, not fatal: swift build is where the package's warnings are policed.
grep -v "Cannot export local symbol" "$out/build.log" | grep -A3 "warning:"

# --- Run ------------------------------------------------------------------------------------------------
# The Swift runtime's backtracer would take over the crash (and wait for it); libFuzzer's handler must
# see the signal to save the input.
export SWIFT_BACKTRACE=enable=no
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=0:symbolize=1}
if [ ${#reproducers[@]} -gt 0 ]; then
  "$out/dns-fuzz" "${reproducers[@]}" 2>&1 | grep -v "^INFO: Seed\|^INFO: Loaded"
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] && { echo "ok - ${#reproducers[@]} input(s) pass"; summary 1 0; }
  echo "not ok - a reproducer still fails (exit $rc)"
  summary 0 1
fi

seeds=$out/seeds
rm -rf "$seeds" && mkdir -p "$seeds"
# Header words, pointers, OPT, common types and labels, so mutations build plausible messages.
cat > "$out/dns.dict" <<'DICT'
"\x81\x80"
"\x01\x00"
"\x87\x80"
"\x00\x01\x00\x01"
"\x00\x01\x00\x00"
"\xc0\x0c"
"\xc0\x10"
"\x00\x00\x29\x10\x00\x00\x00\x00\x00\x00\x00"
"\x00\x1c\x00\x01"
"\x00\x10\x00\x01"
"\x00\x00\x0e\x10\x00\x04"
"\x07example\x00"
"\x04corp"
"\x04Corp"
"\x3f"
"|"
DICT

echo "fuzzing for at most ${max_time}s / ${max_runs} inputs (log: $log)"
DNS_FUZZ_SEED_DIR=$seeds "$out/dns-fuzz" -max_total_time="$max_time" -runs="$max_runs" -max_len=2048 \
  -timeout=10 -rss_limit_mb=2048 -dict="$out/dns.dict" -artifact_prefix="$out/artifacts/" \
  -print_final_stats=1 "$out/corpus" "$seeds" > "$log" 2>&1
rc=$?
if [ "$rc" -eq 0 ]; then
  grep -E "^Done [0-9]+ runs|^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+.*(DONE|cov:)" "$log" | tail -n 3
  echo "ok - libFuzzer found nothing in $(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | sed 's/Done //')s (corpus: $(ls "$out/corpus" | wc -l) inputs)"
  summary 1 0
fi
# Failure: what broke, where the input is, how to re-run it.
grep -v "^#[0-9]" "$log" | grep -v "^INFO:" | tail -n 60
artifact=$(sed -n "s/.*Test unit written to \(.*\)$/\1/p" "$log" | tail -n 1)
echo "not ok - the DNS fuzz target failed (libFuzzer exit $rc; log: $log)"
if [ -n "$artifact" ]; then
  echo "reproducer: $artifact"
  echo "re-run it: Scripts/fuzz-dns.sh $artifact"
fi
summary 0 1
