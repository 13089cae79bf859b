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
# shellcheck source=Scripts/fuzz-lib.sh
. Scripts/fuzz-lib.sh
fuzz_arguments '2,23p' "$@"

out=$root/.build/fuzz-dns
mkdir -p "$out/corpus" "$out/artifacts"
log=$out/last-run.log

# --- Build ----------------------------------------------------------------------------------------------
flags=(-sanitize=fuzzer,address -parse-as-library -O -g -swift-version 6)
sources=(Sources/DNSConfig/DNSName.swift Sources/DNSConfig/DNSMessageError.swift Sources/DNSConfig/DNSQuery.swift
         Sources/DNSConfig/DNSMessage.swift "Sources/DNSConfig/DNSQuery+Answer.swift" Fuzz/DNSFuzz.swift)
echo "building $out/dns-fuzz (swiftc ${flags[*]})"
swiftc "${flags[@]}" -module-name DNSConfig -o "$out/dns-fuzz" "${sources[@]}" > "$out/build.log" 2>&1
fuzz_built $? DNS

# --- Run ------------------------------------------------------------------------------------------------
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
fuzz_run "$out/dns-fuzz" DNS "$out/dns.dict" DNS_FUZZ_SEED_DIR Scripts/fuzz-dns.sh
