#!/usr/bin/env bash
# The lab's leak scenario passes Tunnelgate with includeAllNetworks: `tunnelgate up` with the built-in
# WireGuard in node client, wireguard-go + wg(8) in node carrier (Examples/lab/vpn-client.json).
#
#   client (tunnelgate, full tunnel, kill switch) ══ router ══ internet ══ carrier (wireguard-go)
# The restart is a crash and a new `up` (the kill switch outlives the process; `down` would lift it
# on purpose); the crash phase SIGKILLs tunnelgate. Every phase must pass, the client be left as found.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
tg_begin --no-topology --lab --tmp
TMP=$TG_TMP
RUN=g$((RANDOM % 100000)) TGN=tgc$RUN SRV=wgs$RUN
tg_defer rm -f "/var/run/wireguard/$TGN.sock" "/var/run/wireguard/$SRV.sock"
umask 077
wg genkey >"$TMP/c.key"; wg pubkey <"$TMP/c.key" >"$TMP/c.pub"
wg genkey >"$TMP/s.key"; wg pubkey <"$TMP/s.key" >"$TMP/s.pub"
cat >"$TMP/$TGN.json" <<CONF
{
  "name": "$TGN",
  "tunnelRemoteAddress": "198.18.10.10",
  "ipv4Settings": {"addresses": ["10.70.0.2"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["0.0.0.0/0"]},
  "ipv6Settings": {"addresses": ["fd70::2"], "networkPrefixLengths": [64], "includedRoutes": ["::/0"]},
  "includeAllNetworks": true,
  "runtime": {"kind": "wireguard", "privateKeyFile": "$TMP/c.key",
              "peers": [{"publicKey": "$(cat "$TMP/s.pub")", "endpoint": "198.18.10.10:51820", "allowedIPs": ["0.0.0.0/0", "::/0"]}]}
}
CONF
export LAB_SERVER_UP="wireguard-go $SRV && wg set $SRV private-key $TMP/s.key listen-port 51820 peer $(cat "$TMP/c.pub") \
  allowed-ips 10.70.0.2/32,fd70::2/128 && ip addr add 10.70.0.1/24 dev $SRV && ip addr add fd70::1/64 dev $SRV && ip link set $SRV up"
export LAB_CLIENT_UP="$TG up $TMP/$TGN.json --detach"
export LAB_CLIENT_DOWN="$TG down $TGN"
# The new up waits until the killed owner is gone (its lock is released only then).
export LAB_CLIENT_RESTART="pid=\$($TG status $TGN --json | jq .pid) && kill -KILL \$pid && tail --pid=\$pid -f /dev/null && $TG up $TMP/$TGN.json --detach"
export LAB_CLIENT_PROCESS=tunnelgate LAB_CARRIERS=198.18.10.10:51820/udp LAB_TUNNEL_CHECK=10.70.0.1
tg_run "$LAB" run "$TG_ROOT/Examples/lab/scenarios/leaks.sh" --topology "$TG_ROOT/Examples/lab/vpn-client.json" \
  --run-id "$RUN" --junit "$TMP/tg.xml"
check_rc "the leak scenario passes Tunnelgate with includeAllNetworks" 0
check_match "every phase was checked (restart and crash included)" '^ok - \[crash\] nothing leaves after tunnelgate is SIGKILLed' "$TG_OUT"
check_match "the restart phase passed" '^ok - \[restart\] nothing but the carrier leaves while the client restarts' "$TG_OUT"
check_no_match "no assertion failed" '^not ok' "$TG_OUT"
[ "$TG_RC" -eq 0 ] || printf '%s\n' "$TG_OUT" | grep -E '^(not ok|#)' | head -30
tg_summary
