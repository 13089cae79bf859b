#!/usr/bin/env bash
# Fuzzes the WireGuard parsers that read network and UAPI-socket input, with libFuzzer, for a bounded time.
#
# Builds Fuzz/WireGuardFuzz.swift with Sources/WireGuard/Protocol/*.swift and the pure Device files
# (UAPI.swift, AllowedIPs.swift, Endpoint.swift) as one module, over TunnelgateSettings and the one
# LinuxSystem file Endpoint.swift needs (IPSocketAddress.swift) compiled as static libraries, with
# `swiftc -sanitize=fuzzer,address` (the Swift toolchain ships libFuzzer). libsodium comes through
# Sources/CSodium's module map, the transport AEAD through Sources/CTransportAEAD's (its C compiled with
# the toolchain's clang, linked with libcrypto). The target checks invariants, not only "no crash"; see the comment at
# the top of Fuzz/WireGuardFuzz.swift.
#
# The seed corpus is written by the target itself (WG_FUZZ_SEED_DIR: valid messages made by the protocol
# code), regenerated each run; what libFuzzer finds beyond it accumulates in .build/fuzz-wireguard/corpus.
# A crash or broken invariant leaves the input in .build/fuzz-wireguard/artifacts/ and the log names it.
#
#   Scripts/fuzz-wireguard.sh                     fuzz for WG_FUZZ_TIME seconds (default 60), at most
#                                                 WG_FUZZ_RUNS inputs (default 2000000)
#   Scripts/fuzz-wireguard.sh --time 600          longer
#   Scripts/fuzz-wireguard.sh FILE...             re-run reproducers (no fuzzing)
#
# Scripts/test.sh runs it as one check. The last line is "1 passed, 0 failed" when libFuzzer exited 0,
# "0 passed, 1 failed" otherwise; the exit status says the same.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
root=$(pwd)
if ! command -v swiftc >/dev/null && [ -x /opt/swift/usr/bin/swiftc ]; then PATH=/opt/swift/usr/bin:$PATH; fi

max_time=${WG_FUZZ_TIME:-60}
max_runs=${WG_FUZZ_RUNS:-2000000}
reproducers=()
while [ $# -gt 0 ]; do
  case $1 in
    --time) max_time=$2; shift 2 ;;
    --runs) max_runs=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) reproducers+=("$(realpath "$1")"); shift ;;
  esac
done

out=$root/.build/fuzz-wireguard
mkdir -p "$out/obj" "$out/corpus" "$out/artifacts"
log=$out/last-run.log
summary() { printf '%d passed, %d failed\n' "$1" "$2"; [ "$2" -eq 0 ]; exit; }

# --- Build ----------------------------------------------------------------------------------------------
# Coverage and ASan in both modules, so IP and prefix parsing in TunnelgateSettings is fuzzed too.
flags=(-sanitize=fuzzer,address -parse-as-library -O -g -swift-version 6)
settings=(Sources/TunnelgateSettings/*.swift)
# Endpoint's sockaddr_in/sockaddr_in6 conversion; the file imports only Glibc.
system=(Sources/LinuxSystem/IPSocketAddress.swift)
wireguard=(Sources/WireGuard/Protocol/*.swift Sources/WireGuard/Device/UAPI.swift
           Sources/WireGuard/Device/AllowedIPs.swift Sources/WireGuard/Device/Endpoint.swift
           Fuzz/WireGuardFuzz.swift)
echo "building $out/wireguard-fuzz (swiftc ${flags[*]})"
# ld.gold warns about every ASan helper it cannot export; those lines are noise.
if ! { swiftc "${flags[@]}" -module-name TunnelgateSettings -emit-library -static \
         -emit-module -emit-module-path "$out/obj/TunnelgateSettings.swiftmodule" \
         -o "$out/obj/libTunnelgateSettings.a" "${settings[@]}" &&
       swiftc "${flags[@]}" -module-name LinuxSystem -emit-library -static \
         -emit-module -emit-module-path "$out/obj/LinuxSystem.swiftmodule" \
         -o "$out/obj/libLinuxSystem.a" "${system[@]}" &&
       clang -O2 -g -c Sources/CTransportAEAD/aead.c -I Sources/CTransportAEAD/include -o "$out/obj/aead.o" &&
       swiftc "${flags[@]}" -module-name WireGuard -I "$out/obj" -I Sources/CSodium -I Sources/CTransportAEAD/include \
         -L "$out/obj" -lTunnelgateSettings -lLinuxSystem "$out/obj/aead.o" -lcrypto -o "$out/wireguard-fuzz" "${wireguard[@]}"
     } > "$out/build.log" 2>&1; then
  grep -v "Cannot export local symbol" "$out/build.log"
  echo "not ok - building the WireGuard fuzz target failed (log: $out/build.log)"
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
  "$out/wireguard-fuzz" "${reproducers[@]}" 2>&1 | grep -v "^INFO: Seed\|^INFO: Loaded"
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] && { echo "ok - ${#reproducers[@]} input(s) pass"; summary 1 0; }
  echo "not ok - a reproducer still fails (exit $rc)"
  summary 0 1
fi

seeds=$out/seeds
rm -rf "$seeds" && mkdir -p "$seeds"
# The UAPI keys and address shapes, so mutations build plausible requests.
cat > "$out/wireguard.dict" <<'EOF'
"set=1\x0a"
"get=1\x0a"
"private_key="
"listen_port="
"fwmark="
"replace_peers=true\x0a"
"public_key="
"remove=true\x0a"
"update_only=true\x0a"
"preshared_key="
"endpoint="
"persistent_keepalive_interval="
"replace_allowed_ips=true\x0a"
"allowed_ip="
"protocol_version=1\x0a"
"0000000000000000000000000000000000000000000000000000000000000000"
"::ffff:"
"]:"
"/32"
"/128"
"65535"
"4294967295"
EOF

echo "fuzzing for at most ${max_time}s / ${max_runs} inputs (log: $log)"
WG_FUZZ_SEED_DIR=$seeds "$out/wireguard-fuzz" -max_total_time="$max_time" -runs="$max_runs" -max_len=2048 \
  -timeout=10 -rss_limit_mb=2048 -dict="$out/wireguard.dict" -artifact_prefix="$out/artifacts/" \
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
echo "not ok - the WireGuard fuzz target failed (libFuzzer exit $rc; log: $log)"
if [ -n "$artifact" ]; then
  echo "reproducer: $artifact"
  echo "re-run it: Scripts/fuzz-wireguard.sh $artifact"
fi
summary 0 1
