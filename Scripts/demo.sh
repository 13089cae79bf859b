#!/usr/bin/env bash
# A five-minute look at Tunnelgate, as root: builds four throwaway network namespaces (a client, a
# router, a LAN host and an "internet" host), runs a WireGuard server (wireguard-go, configured with
# wg(8)) on the internet host, brings a full tunnel up in the client with `tunnelgate up tg0.conf` on
# the built-in WireGuard, shows what changed, where packets go and traffic crossing the tunnel, takes
# the tunnel down and shows the client is exactly as it was. Nothing outside the namespaces is touched;
# they are removed on exit, also on Ctrl-C or failure.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
if [ "$(id -u)" -ne 0 ]; then
  echo "Error: Scripts/demo.sh creates network namespaces and must run as root" >&2
  exit 1
fi
if ! command -v swift >/dev/null && [ -x /opt/swift/usr/bin/swift ]; then
  PATH=/opt/swift/usr/bin:$PATH
fi
# shellcheck source=netns/lib.sh
. netns/lib.sh

bold=$'\e[1m' dim=$'\e[2m' off=$'\e[0m'
[ -t 1 ] || { bold='' dim='' off=''; }
say() { printf '\n%s%s%s\n' "$bold" "$*" "$off"; }
note() { printf '%s%s%s\n' "$dim" "$*" "$off"; }
# show CMD...: prints the command, then runs it with its output indented.
show() {
  local text="$*"
  text=${text/#in_c /ip netns exec $NS_C }
  text=${text/#in_i /ip netns exec $NS_I }
  text=${text//$TG/tunnelgate}
  printf '%s$ %s%s\n' "$dim" "$text" "$off"
  "$@" 2>&1 | sed 's/^/  /'
  return "${PIPESTATUS[0]}"
}
die() { echo "demo: $*" >&2; exit 1; }
# decide ADDR WHY: one line of the route decision table.
decide() { printf '  %-18s %-32s -> %s\n' "$1" "$2" "$(route_dev "$NS_C" "$1")"; }

bash Scripts/setup.sh || die "Scripts/setup.sh failed"
if [ -z "${TG_DEMO_NO_BUILD:-}" ]; then
  say "Building tunnelgate and tunnelgate-lab, which builds the namespaces (swift build)"
  for product in tunnelgate tunnelgate-lab; do
    swift build --product "$product" 2>&1 | tail -n 1
    [ "${PIPESTATUS[0]}" -eq 0 ] || die "swift build --product $product failed"
  done
fi
[ -x "$TG" ] || die "no tunnelgate binary at $TG"
[ -x "$TG_LAB" ] || die "no tunnelgate-lab binary at $TG_LAB"

WG_SERVER=tgdemo$((RANDOM % 100000))
# lib.sh's EXIT trap runs the cleanup stack (the namespaces go there too); a signal just ends the demo.
tg_defer rm -f "/var/run/wireguard/$WG_SERVER.sock"
trap 'exit 130' INT
trap 'exit 143' TERM
say "1. A small network in four namespaces"
tg_topology_up
cat <<TOPOLOGY
  C (client, runs tunnelgate) ── eth0 ──┐                ┌── L  LAN host $LAN4
    default route via eth0              R (router) ──────┤
  C ── eth1 (a second path) ────────────┘                └── I  "internet": $CARRIER4 a WireGuard server
                                                                           $EXCLUDED4 another host
                                                                           $INCLUDED4 a host to reach
                                                              (and ::10, ::20, ::30 in 2001:db8:18::/64)
  namespaces: $NS_C $NS_R $NS_L $NS_I
TOPOLOGY

say "2. A WireGuard server on the internet host: wireguard-go, configured with wg(8)"
umask 077
wg genkey >"$TG_TMP/client.key"; wg pubkey <"$TG_TMP/client.key" >"$TG_TMP/client.pub"
wg genkey >"$TG_TMP/server.key"; wg pubkey <"$TG_TMP/server.key" >"$TG_TMP/server.pub"
ip netns exec "$NS_I" env LOG_LEVEL=error wireguard-go "$WG_SERVER" >/dev/null 2>&1 || die "wireguard-go did not start"
show in_i wg set "$WG_SERVER" private-key "$TG_TMP/server.key" listen-port 51820 \
  peer "$(cat "$TG_TMP/client.pub")" allowed-ips 10.8.0.2/32,fd00:8::2/128 || die "wg set failed"
ip -n "$NS_I" addr add 10.8.0.1/24 dev "$WG_SERVER"
ip -n "$NS_I" addr add fd00:8::1/64 dev "$WG_SERVER" nodad
ip -n "$NS_I" link set "$WG_SERVER" up
note "(addresses 10.8.0.1/24 and fd00:8::1/64 on $WG_SERVER, as wg-quick would add them)"

cfg=$TG_TMP/tg0.conf
cat >"$cfg" <<CONF
# The client: a wg-quick file, as WireGuard users have them.
[Interface]
PrivateKey = $(cat "$TG_TMP/client.key")
Address = 10.8.0.2/24, fd00:8::2/64

[Peer]
PublicKey = $(cat "$TG_TMP/server.pub")
Endpoint = $CARRIER4:51820
AllowedIPs = 0.0.0.0/0, ::/0
CONF
say "2b. The client's tunnel: tg0.conf (owner-only: it holds a private key)"
note "Everything goes into the tunnel except the endpoint, which must keep using the physical network"
note "(or the tunnel would route itself into itself). The private key is shown redacted here, and"
note "tunnelgate never prints it."
sed -e 's/^/  /' -e 's/^\(  PrivateKey = \).*/\1(redacted)/' "$cfg"
tg_snapshot "$NS_C" "$TG_TMP/before"

say "3. What 'up' would change, without touching anything"
show in_c "$TG" plan "$cfg" || die "plan failed"

say "4. Bring the tunnel up (--detach returns once the kernel state is applied and verified)"
show in_c "$TG" up "$cfg" --detach || die "up failed"

say "5. Traffic crosses the tunnel"
show in_c ping -n -c 3 -i 0.2 -W 2 "$INCLUDED4" || die "no ping crossed the tunnel"
show in_c ping -n -c 3 -i 0.2 -W 2 fd00:8::1 || die "no IPv6 ping crossed the tunnel"
note "The server saw the handshake and the packets (its view, through wg(8)):"
show in_i wg show "$WG_SERVER"
note "And wg(8) reads Tunnelgate's side the same way (the WireGuard API socket of tg0):"
show in_c wg show tg0

say "5b. Status"
show in_c "$TG" status tg0

say "6. What is in the kernel now"
note "A TUN device with the tunnel's addresses and MTU:"
show ip -n "$NS_C" addr show dev tg0
note "Policy rules send every lookup not marked as the tunnel's own traffic to the tunnel's table:"
show ip -n "$NS_C" -4 rule show
show ip -n "$NS_C" -6 rule show
table4=$(tg_tunnel_table "$NS_C" 4)
table6=$(tg_tunnel_table "$NS_C" 6)
note "The tunnel's table: included routes lead into tg0; the carrier (the WireGuard endpoint) 'throws'"
note "the lookup back to the main table, which follows whatever physical path exists right now:"
[ -n "$table4" ] && show ip -n "$NS_C" -4 route show table "$table4"
[ -n "$table6" ] && show ip -n "$NS_C" -6 route show table "$table6"
note "The main table, its default route included, is untouched:"
show ip -n "$NS_C" route show

say "7. Where packets go (the device ip route get chooses)"
decide "$INCLUDED4" "(covered by 0.0.0.0/0)"
decide "$INCLUDED6" "(covered by ::/0)"
decide "$CARRIER4" "(carrier endpoint)"
decide "$LAN4" "(LAN, covered by the default)"
show ip -n "$NS_C" route get "$INCLUDED4"
show ip -n "$NS_C" route get "$CARRIER4"

say "8. The physical path changes: C's default route moves to eth1"
ip -n "$NS_C" -4 route replace default via "$R_C1_4" dev eth1
ip -n "$NS_C" -6 route replace default via "$R_C1_6" dev eth1
note "The carriers follow it without tunnelgate doing anything (their throw routes defer to main):"
decide "$CARRIER4" "(carrier endpoint)"
decide "$INCLUDED4" "(still the tunnel)"
show in_c ping -n -c 1 -W 2 "$INCLUDED4"
tg_c_default_route 4
tg_c_default_route 6

say "9. Take the tunnel down"
show in_c "$TG" down tg0 || die "down failed"
_tg_poll 10 tg_no_tunnel_process "$NS_C" || note "(the detached tunnelgate process is still running)"
tg_snapshot "$NS_C" "$TG_TMP/after"
if "$TG_LAB" diff "$TG_TMP/before" "$TG_TMP/after" >"$TG_TMP/diff"; then
  note "Rules, routes of every table, addresses, links, nftables, resolv.conf and sysctls of C compared with before 'up':"
  echo "  identical ($(wc -l <"$TG_TMP/before") lines of kernel state)"
else
  note "C's kernel state differs from before 'up':"
  sed 's/^/  /' "$TG_TMP/diff"
  exit 1
fi
decide "$INCLUDED4" "(no tunnel any more)"

say "Done. The namespaces are removed on exit."
