#!/usr/bin/env bash
# The carrier path, judged by Tunnelgate itself: when no carrier endpoint of a tunnel has a route (the
# kernel's lookup with the tunnel's fwmark), or its route leaves by a link without carrier, the tunnel is
# reasserting although its runtime still says ready; when a path is back it is connected again.
#
#   C (tunnelgate "tga", 10.60.0.1) ── eth0 ── R ── L (tunnelgate "tgb", 10.60.0.2)
#     │  example runtime: UDP 10.231.0.2:5400  <══>  192.168.231.2:5400 (its sockets marked 0x1d24)
#     └─ eth1 ── R   (a second path, used only when a test route sends a carrier there)
#   carrier endpoints of tga: 192.168.231.2 (the peer) and 198.18.0.10 (I, unused by the runtime)
#   X: a container for an isolated tunnel ("tgx", runtime none) whose carrier sockets would live in C
#
# Asserted: connected at first; with C's default route deleted, status --json says reasserting within 2 s
# while the runtime's own state (.runtime.state) is still ready (its silence timeout is 60 s), and the log
# says which path went and why; back to connected when the route is back, and ping crosses the tunnel;
# the same for the peer link without carrier (R's c0 down: "eth0 has no carrier") and for a policy rule
# that sends only packets with the tunnel's mark to an unreachable route (an unmarked lookup still
# works); with one carrier endpoint still reachable (via eth1) the tunnel stays connected; --watch printed
# the transitions; a tunnel without a runtime, isolated in X, follows the carrier rule alone; after down
# C's kernel state equals the state before.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
tg_begin --runtime

tg_secret_file "carrier-secret-$$-$RANDOM"
# The runtime runs in its packet plane, whose uid is the tunnel's carrier identity: its UDP socket is the
# plane's. The tunnel's routes do not take the carrier, so no exemption rule is needed; checked below.

config() { # FILE NAME ADDRESS BIND PEER EXTRA-ARGS EXTRA-TOP (lib.sh tg_runtime_config)
  tg_runtime_config "$1" "$2" "$3" "$4" "$5" --args ', "--silence-ms", "60000", "--keepalive-ms", "150"'"$6" \
    --packet-path callback --top "$7"
}
# status_is NS NAME JQ-EXPRESSION [tunnelgate options]: status --json satisfies the expression (a predicate).
status_is() {
  local ns=$1 name=$2 expr=$3
  shift 3
  ip netns exec "$ns" "$TG" status "$name" --json "$@" | jq -e "$expr" >/dev/null
}
log_has() { grep -qE -- "$2" "$1"; }  # log_has FILE REGEX (a predicate)

tg_snapshot "$NS_C" "$TG_TMP/c-before"
config "$TG_TMP/a.json" tga 10.60.0.1 "$C_ETH0_4:5400" "$LAN4:5400" "" \
  ", \"carrierEndpoints\": [\"$CARRIER4\"]"
config "$TG_TMP/b.json" tgb 10.60.0.2 "$LAN4:5400" "$C_ETH0_4:5400" "" ""
tg_run ip netns exec "$NS_C" "$TG" up "$TG_TMP/a.json" --detach
check_rc "tga up in C" 0
tg_run ip netns exec "$NS_L" "$TG" up "$TG_TMP/b.json" --detach
check_rc "tgb up in L" 0
PLANE_UID=$(ip netns exec "$NS_C" "$TG" status tga --json | jq -r '.planeUser // empty')
check "tga's runtime runs in a packet plane of its own uid ($PLANE_UID)" test -n "$PLANE_UID"
# The tunnel routes only 10.60.0.0/24: the carrier is outside its routes, so its identity needs no
# exemption (no uidrange rule, no connection-mark table: nothing to pay per packet for).
check_no_match "... the carrier is outside the tunnel's routes: no uidrange rule exempts anyone to it" \
  "uidrange" "$(ip -n "$NS_C" -4 rule show)"
check "... and no nftables table (no connection tracking for a mark)" \
  test -z "$(ip netns exec "$NS_C" nft list tables 2>/dev/null | grep tunnelgate-tga)"
tg_run ip netns exec "$NS_C" "$TG" plan "$TG_TMP/a.json"
check_match "... plan says none is needed, and why" "carrier exemption: none needed for $(tg_re "$LAN4"), $(tg_re "$CARRIER4"): the tunnel does not route them" "$TG_OUT"
log=$(tg_state_dir "$NS_C")/tga.log
ip netns exec "$NS_C" "$TG" status tga --watch >"$TG_TMP/watch" 2>&1 &
watcher=$!

wait_for "connected at first, the runtime ready" 3 status_is "$NS_C" tga '.status == "connected" and .runtime.state == "ready"'
check_ping "ping crosses the tunnel" "$NS_C" 10.60.0.2

# --- no route: C's default route deleted ---------------------------------------------------------------
ip -n "$NS_C" -4 route del default via "$R_C0_4" dev eth0
wait_for "[no route] status goes reasserting within 2 s" 2 status_is "$NS_C" tga '.status == "reasserting"'
check "[no route] ... while the runtime's own state is still ready" status_is "$NS_C" tga '.runtime.state == "ready"'
check "[no route] the log says the path to the peer went, and why" \
  log_has "$log" "carrier path to $(tg_re "$LAN4") gone: no route"
check "[no route] ... and that no carrier endpoint has a path" log_has "$log" "no carrier endpoint has a path"
tg_c_default_route 4
wait_for "[no route] connected again within 2 s of the route's return" 2 status_is "$NS_C" tga '.status == "connected"'
check "[no route] the log says the path is back via eth0" log_has "$log" "carrier path to $(tg_re "$LAN4") back via eth0"
wait_for "[no route] ping crosses the tunnel again" 5 ip netns exec "$NS_C" ping -n -c 1 -W 1 10.60.0.2

# --- no carrier: the link at the other end of C's eth0 down ---------------------------------------------
ip -n "$NS_R" link set c0 down
wait_for "[no carrier] status goes reasserting within 2 s" 2 status_is "$NS_C" tga '.status == "reasserting"'
check "[no carrier] ... while the runtime's own state is still ready" status_is "$NS_C" tga '.runtime.state == "ready"'
check "[no carrier] C still has its route to the peer (only the link lost its carrier)" route_is "$NS_C" "$LAN4" eth0
check "[no carrier] the log says eth0 has no carrier" log_has "$log" "carrier path to $(tg_re "$LAN4") gone: eth0 has no carrier"
ip -n "$NS_R" link set c0 up
wait_for "[no carrier] connected again" 5 status_is "$NS_C" tga '.status == "connected"'
wait_for "[no carrier] ping crosses the tunnel again" 5 ip netns exec "$NS_C" ping -n -c 1 -W 1 10.60.0.2

# --- a policy rule for the plane's user only: the lookup is the plane's --------------------------------
ip -n "$NS_C" -4 route add unreachable default table 100
ip -n "$NS_C" -4 rule add uidrange "$PLANE_UID-$PLANE_UID" lookup 100 pref 100
wait_for "[uid rule] status goes reasserting within 2 s" 2 status_is "$NS_C" tga '.status == "reasserting"'
check "[uid rule] the log says the route is unreachable" \
  log_has "$log" "carrier path to $(tg_re "$LAN4") gone: unreachable route"
check "[uid rule] root's lookup of the peer still finds eth0" route_is "$NS_C" "$LAN4" eth0
check_fails "[uid rule] ... the plane user's does not" ip -n "$NS_C" route get "$LAN4" uid "$PLANE_UID"
ip -n "$NS_C" -4 rule del uidrange "$PLANE_UID-$PLANE_UID" lookup 100 pref 100
ip -n "$NS_C" -4 route del unreachable default table 100
wait_for "[uid rule] connected again" 2 status_is "$NS_C" tga '.status == "connected"'

# --- one carrier endpoint keeps a path: still connected ---------------------------------------------------
ip -n "$NS_C" -4 route add "$CARRIER4/32" via "$R_C1_4" dev eth1
wait_for "[one path left] the log says the path to $CARRIER4 moved to eth1" 2 \
  log_has "$log" "carrier path to $(tg_re "$CARRIER4") moved from eth0 to eth1"
lines_before=$(grep -c "gone: no route" "$log")
ip -n "$NS_C" -4 route del default via "$R_C0_4" dev eth0
wait_for "[one path left] the check ran: the path to the peer is gone" 2 \
  bash -c "[ \$(grep -c 'gone: no route' '$log') -gt $lines_before ]"
check "[one path left] ... but $CARRIER4 still has one: connected" status_is "$NS_C" tga '.status == "connected"'
ip -n "$NS_C" -4 route del "$CARRIER4/32" via "$R_C1_4" dev eth1
wait_for "[one path left] with that one gone too: reasserting" 2 status_is "$NS_C" tga '.status == "reasserting"'
tg_c_default_route 4
wait_for "[one path left] both back: connected" 2 status_is "$NS_C" tga '.status == "connected"'
wait_for "ping crosses the tunnel at the end" 5 ip netns exec "$NS_C" ping -n -c 1 -W 1 10.60.0.2
check "the runtime was ready throughout (its silence timeout never ran out)" bash -c "! grep -q 'runtime: reconnecting' '$log'"

check "status --watch printed reasserting and connected as JSON lines" \
  bash -c "grep -q '\"status\":\"reasserting\"' '$TG_TMP/watch' && grep -c '\"status\":\"connected\"' '$TG_TMP/watch' | grep -q '^[2-9]'"
tg_run ip netns exec "$NS_C" "$TG" down tga
check_rc "tga down" 0
tg_run ip netns exec "$NS_L" "$TG" down tgb
check_rc "tgb down" 0
wait_for "status --watch ended with disconnected" 5 tg_exited "$watcher"
check_match "... its last line says disconnected" '"status":"disconnected"' "$(tail -n 1 "$TG_TMP/watch")"
wait_for "no tunnelgate process is left in C or L" 5 bash -c \
  "[ -z \"\$(ip netns pids $NS_C)\" ] && [ -z \"\$(ip netns pids $NS_L)\" ]"
tg_snapshot "$NS_C" "$TG_TMP/c-after"
check_same_snapshot "after down C's kernel state equals the state before" "$TG_TMP/c-before" "$TG_TMP/c-after"

# --- no runtime, isolate mode: the carrier rule alone, judged in C where the carriers live --------------
NS_X=${NS_L%-l}-x
tg_netns_add "$NS_X"
cat >"$TG_TMP/x.json" <<CFG
{"name": "tgx", "tunnelRemoteAddress": "$CARRIER4", "mtu": 1400,
 "ipv4Settings": {"addresses": ["10.70.0.2"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["10.70.0.0/24"]},
 "runtime": {"kind": "none"}}
CFG
tg_run ip netns exec "$NS_C" "$TG" up "$TG_TMP/x.json" --netns "$NS_X" --detach
check_rc "[none, isolated] tgx up in X, run from C" 0
wait_for "[none, isolated] connected" 2 status_is "$NS_C" tgx '.status == "connected"' --netns "$NS_X"
ip -n "$NS_C" -4 route del default via "$R_C0_4" dev eth0
wait_for "[none, isolated] C's default route deleted: reasserting within 2 s" 2 \
  status_is "$NS_C" tgx '.status == "reasserting"' --netns "$NS_X"
tg_c_default_route 4
wait_for "[none, isolated] route back: connected" 2 status_is "$NS_C" tgx '.status == "connected"' --netns "$NS_X"
tg_run ip netns exec "$NS_C" "$TG" down tgx --netns "$NS_X"
check_rc "[none, isolated] tgx down" 0
tg_snapshot "$NS_C" "$TG_TMP/c-end"
check_same_snapshot "at the end C's kernel state equals the state before" "$TG_TMP/c-before" "$TG_TMP/c-end"

tg_summary
