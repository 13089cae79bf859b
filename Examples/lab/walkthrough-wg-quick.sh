#!/usr/bin/env bash
# Examples/lab/walkthrough-wg-quick.sh: testing a VPN client that is not Tunnelgate, wg-quick with
# wireguard-go, in the lab: from nothing to a JUnit file. docs/lab.md shows this file as it is, and
# netns/tests/lab-walkthrough.sh runs it. Needs root and Debian's wireguard-go and wireguard-tools.
set -euo pipefail
LAB=${LAB:-tunnelgate-lab}                 # the lab binary (.build/debug/tunnelgate-lab in a checkout)
EXAMPLES=${EXAMPLES:-Examples/lab}         # the topology and the shipped scenarios
OUT=${OUT:-lab-results}                    # where the keys, configurations and results go
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
RUN=w$((RANDOM % 100000))                  # the run id; also names the WireGuard interfaces
CLIENT_IF=wgc$RUN SERVER_IF=wgs$RUN

# 1. Keys, and the two sides' configurations. The server is wireguard-go configured with wg(8) in node
#    "carrier" (198.18.10.10); the client is a plain wg-quick full tunnel in node "client".
umask 077
wg genkey >"$OUT/client.key"; wg pubkey <"$OUT/client.key" >"$OUT/client.pub"
wg genkey >"$OUT/server.key"; wg pubkey <"$OUT/server.key" >"$OUT/server.pub"
cat >"$OUT/$CLIENT_IF.conf" <<CONF
[Interface]
PrivateKey = $(cat "$OUT/client.key")
Address = 10.70.0.2/32, fd70::2/128

[Peer]
PublicKey = $(cat "$OUT/server.pub")
Endpoint = 198.18.10.10:51820
AllowedIPs = 0.0.0.0/0, ::/0
CONF

# 2. The client under test, described to the shipped scenarios (Examples/lab/scenarios/common.sh).
export WG_QUICK_USERSPACE_IMPLEMENTATION=wireguard-go
export LAB_SERVER_UP="wireguard-go $SERVER_IF && wg set $SERVER_IF private-key $OUT/server.key listen-port 51820 \
  peer $(cat "$OUT/client.pub") allowed-ips 10.70.0.2/32,fd70::2/128 && ip addr add 10.70.0.1/24 dev $SERVER_IF \
  && ip addr add fd70::1/64 dev $SERVER_IF && ip link set $SERVER_IF up"
export LAB_CLIENT_UP="wg-quick up $OUT/$CLIENT_IF.conf"
export LAB_CLIENT_DOWN="wg-quick down $OUT/$CLIENT_IF.conf"
export LAB_CLIENT_PROCESS=wireguard-go
export LAB_CARRIERS=198.18.10.10:51820/udp
export LAB_TUNNEL_CHECK=10.70.0.1

# 3. Run the leak scenario against a fresh copy of the default topology: TAP on stdout, JUnit in a file.
status=0
"$LAB" run "$EXAMPLES/scenarios/leaks.sh" --topology "$EXAMPLES/vpn-client.json" --run-id "$RUN" \
  --tap "$OUT/leaks.tap" --junit "$OUT/leaks.xml" || status=$?
rm -f "/var/run/wireguard/$CLIENT_IF.sock" "/var/run/wireguard/$SERVER_IF.sock"
echo "results: $OUT/leaks.xml (exit $status)"
exit "$status"
