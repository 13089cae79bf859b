#!/usr/bin/env bash
# Fuzzes the WireGuard parsers that read network and UAPI-socket input, with libFuzzer, for a bounded time.
#
# Builds Fuzz/WireGuardFuzz.swift with Sources/WireGuard/Protocol/*.swift and the pure Device files
# (UAPI.swift, AllowedIPs.swift, Endpoint.swift) as one module, over TunnelgateSettings and the one
# LinuxSystem file Endpoint.swift needs (IPSocketAddress.swift) compiled as static libraries, with
# `swiftc -sanitize=fuzzer,address` (the Swift toolchain ships libFuzzer). libsodium comes through
# Sources/CSodium's module map, the transport AEAD through Sources/CTransportAEAD's (its C compiled with
# the toolchain's clang, linked with the static libcrypto's ChaCha20 and Poly1305). The target checks invariants, not only "no crash"; see the comment at
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
# shellcheck source=Scripts/fuzz-lib.sh
. Scripts/fuzz-lib.sh
fuzz_arguments '2,22p' "$@"

out=$root/.build/fuzz-wireguard
mkdir -p "$out/obj" "$out/corpus" "$out/artifacts"
log=$out/last-run.log

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
{ swiftc "${flags[@]}" -module-name TunnelgateSettings -emit-library -static \
         -emit-module -emit-module-path "$out/obj/TunnelgateSettings.swiftmodule" \
         -o "$out/obj/libTunnelgateSettings.a" "${settings[@]}" &&
       swiftc "${flags[@]}" -module-name LinuxSystem -emit-library -static \
         -emit-module -emit-module-path "$out/obj/LinuxSystem.swiftmodule" \
         -o "$out/obj/libLinuxSystem.a" "${system[@]}" &&
       clang -O2 -g -c Sources/CTransportAEAD/aead.c -I Sources/CTransportAEAD/include -o "$out/obj/aead.o" &&
       swiftc "${flags[@]}" -module-name WireGuard -I "$out/obj" -I Sources/CSodium -I Sources/CTransportAEAD/include \
         -L "$out/obj" -lTunnelgateSettings -lLinuxSystem "$out/obj/aead.o" -l:libcrypto.a -o "$out/wireguard-fuzz" "${wireguard[@]}"
     } > "$out/build.log" 2>&1
fuzz_built $? WireGuard

# --- Run ------------------------------------------------------------------------------------------------
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
fuzz_run "$out/wireguard-fuzz" WireGuard "$out/wireguard.dict" WG_FUZZ_SEED_DIR Scripts/fuzz-wireguard.sh
