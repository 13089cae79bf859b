#!/usr/bin/env bash
# The README's first command, Scripts/demo.sh, run as a test: the built-in WireGuard in C against
# wireguard-go on the internet host. Asserted from what the demo printed and its exit status: traffic
# crossed the tunnel in IPv4 and IPv6, both ends' wg(8) show the handshake, C's kernel state after
# `down` is identical to before, the private key was never printed, and its namespaces are gone.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
tg_begin --no-topology --tmp

TG_DEMO_NO_BUILD=1 TG="$TG" timeout 240 bash "$TG_ROOT/Scripts/demo.sh" >"$TG_TMP/demo.out" 2>&1
rc=$?
out=$(cat "$TG_TMP/demo.out")
check_eq "Scripts/demo.sh exits 0" 0 "$rc"
check_match "ping 198.18.0.30 crossed the WireGuard tunnel" "^  3 packets transmitted, 3 received, 0% packet loss" "$out"
check_eq "... in IPv4 and IPv6 (two pings with no loss)" 2 "$(grep -c '3 received, 0% packet loss' <<<"$out")"
check_eq "both wg(8) views show a handshake" 2 "$(grep -c 'latest handshake: ' <<<"$out")"
check_match "wg show reads Tunnelgate's interface" "^    fwmark: 0x1d24" "$out"
check_match "the up summary names the built-in WireGuard" "built-in WireGuard on UDP port" "$out"
check_match "after down, C's kernel state is identical to before" "^  identical \\(" "$out"
check_no_match "the private key is shown only redacted" "PrivateKey = [A-Za-z0-9+/]{43}=" "$out"
demo_ns=$(sed -n 's/^  namespaces: //p' "$TG_TMP/demo.out")
check "the demo named its four namespaces ($demo_ns)" test "$(wc -w <<<"$demo_ns")" -eq 4
left=$(for ns in $demo_ns; do ip netns list | awk '{print $1}' | grep -Fx "$ns"; done)
check_eq "none of them is left behind" "" "$left"
tg_summary
