#!/usr/bin/env bash
# A five-minute look at Tunnelgate, as root: builds four throwaway network namespaces (a client, a
# router, a LAN host and an "internet" host), brings a full tunnel up in the client, shows what changed
# and where packets go, takes the tunnel down and shows the client is exactly as it was. Nothing outside
# the namespaces is touched; they are removed on exit, also on Ctrl-C or failure.
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
  text=${text//$TG/tunnelgate}
  printf '%s$ %s%s\n' "$dim" "$text" "$off"
  "$@" 2>&1 | sed 's/^/  /'
  return "${PIPESTATUS[0]}"
}
die() { echo "demo: $*" >&2; exit 1; }
# in_c CMD...: runs CMD inside the client namespace.
in_c() { ip netns exec "$NS_C" "$@"; }
# decide ADDR WHY: one line of the route decision table.
decide() { printf '  %-18s %-32s -> %s\n' "$1" "$2" "$(route_dev "$NS_C" "$1")"; }

bash Scripts/setup.sh || die "Scripts/setup.sh failed"
if [ -z "${TG_DEMO_NO_BUILD:-}" ]; then
  say "Building tunnelgate (swift build)"
  swift build --product tunnelgate 2>&1 | tail -n 1
  [ "${PIPESTATUS[0]}" -eq 0 ] || die "swift build failed"
fi
[ -x "$TG" ] || die "no tunnelgate binary at $TG"

tg_trap_cleanup
say "1. A small network in four namespaces"
tg_topology_up
cat <<TOPOLOGY
  C (client, runs tunnelgate) ── eth0 ──┐                ┌── L  LAN host $LAN4
    default route via eth0              R (router) ──────┤
  C ── eth1 (a second path) ────────────┘                └── I  "internet": $CARRIER4 carrier endpoint
                                                                           $EXCLUDED4 excluded host
                                                                           $INCLUDED4 included host
                                                              (and ::10, ::20, ::30 in 2001:db8:18::/64)
  namespaces: $NS_C $NS_R $NS_L $NS_I
TOPOLOGY

cfg=$TG_TMP/tg0.json
tg_full_tunnel_config "$cfg" tg0
say "2. The tunnel's settings (NEPacketTunnelNetworkSettings names)"
note "Everything goes into the tunnel except $EXCLUDED4, $EXCLUDED6 and the carrier endpoints, which"
note "must keep using the physical network (or the tunnel would route itself into itself)."
sed 's/^/  /' "$cfg"
tg_snapshot "$NS_C" "$TG_TMP/before"

say "3. What 'up' would change, without touching anything"
show in_c "$TG" plan "$cfg" || die "plan failed"

say "4. Bring the tunnel up (--detach returns once the kernel state is applied and verified)"
show in_c "$TG" up "$cfg" --detach || die "up failed"

say "5. Status"
show in_c "$TG" status tg0
show in_c "$TG" status tg0 --json

say "6. What is in the kernel now"
note "A TUN device with the tunnel's addresses and MTU:"
show ip -n "$NS_C" addr show dev tg0
note "Policy rules send every lookup not marked as the tunnel's own traffic to the tunnel's table:"
show ip -n "$NS_C" -4 rule show
show ip -n "$NS_C" -6 rule show
table4=$(tg_tunnel_table "$NS_C" 4)
table6=$(tg_tunnel_table "$NS_C" 6)
note "The tunnel's table: included routes lead into tg0; excluded routes and carriers 'throw' the"
note "lookup back to the main table, which follows whatever physical path exists right now:"
[ -n "$table4" ] && show ip -n "$NS_C" -4 route show table "$table4"
[ -n "$table6" ] && show ip -n "$NS_C" -6 route show table "$table6"
note "The main table, its default route included, is untouched:"
show ip -n "$NS_C" route show

say "7. Where packets go (the device ip route get chooses)"
decide "$INCLUDED4" "(covered by 0.0.0.0/0)"
decide "$INCLUDED6" "(covered by ::/0)"
decide "$EXCLUDED4" "(excludedRoutes)"
decide "$EXCLUDED6" "(excludedRoutes)"
decide "$CARRIER4" "(carrier endpoint)"
decide "$CARRIER6" "(carrier endpoint)"
decide "$LAN4" "(LAN, covered by the default)"
show ip -n "$NS_C" route get "$INCLUDED4"
show ip -n "$NS_C" route get "$EXCLUDED4"
note "Real packets to the excluded host and the carrier still get answers over eth0:"
show in_c ping -n -c 1 -W 1 "$EXCLUDED4"
show in_c ping -n -c 1 -W 1 "$CARRIER6"

say "8. The physical path changes: C's default route moves to eth1"
ip -n "$NS_C" -4 route replace default via "$R_C1_4" dev eth1
ip -n "$NS_C" -6 route replace default via "$R_C1_6" dev eth1
note "The carriers follow it without tunnelgate doing anything (their throw routes defer to main):"
decide "$CARRIER4" "(carrier endpoint)"
decide "$CARRIER6" "(carrier endpoint)"
decide "$INCLUDED4" "(still the tunnel)"
ip -n "$NS_C" -4 route replace default via "$R_C0_4" dev eth0
ip -n "$NS_C" -6 route replace default via "$R_C0_6" dev eth0

say "9. Take the tunnel down"
show in_c "$TG" down tg0 || die "down failed"
_tg_poll 10 tg_no_tunnel_process "$NS_C" || note "(the detached tunnelgate process is still running)"
tg_snapshot "$NS_C" "$TG_TMP/after"
if diff -u "$TG_TMP/before" "$TG_TMP/after" >"$TG_TMP/diff"; then
  note "Rules, routes of every table, addresses, links and nftables of C compared with before 'up':"
  echo "  identical ($(wc -l <"$TG_TMP/before") lines of kernel state)"
else
  note "C's kernel state differs from before 'up':"
  sed 's/^/  /' "$TG_TMP/diff"
  exit 1
fi
decide "$INCLUDED4" "(no tunnel any more)"

say "Done. The namespaces are removed on exit."
