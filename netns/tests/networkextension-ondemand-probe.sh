#!/usr/bin/env bash
# networkextension-ondemand-probe: an on-demand rule's probeURL, fetched by `tunnelgate on-demand` outside
# the tunnel. A real HTTP server in R (probe_server.py) answers the code its status file holds. The rules:
# Connect on Ethernet when http://probe.lab.example:8080/ok (the name in C's /etc/hosts) answers 200, else
# Disconnect. 200 → connected; the tunnel's default route captures R's address, yet the next probes
# reach the server from C's eth0 address (not the tunnel's), and the decision holds; 503 → the probe does
# not match and the tunnel stops; 200 again → connected; the server gone → no match, stays stopped and the
# log names the refused connection. C's kernel state at the end equals the state before.
#
#   C ── tunnelgate on-demand ─spawn─▶ tunnelgate-provider-example ── tgp (10.8.0.2/24, default route)
#   │ eth0 10.231.0.2 (wired)                    probe GET, bound to eth0
#   R ── 10.231.0.1:8080 probe_server.py
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
PROVIDER=${TG_PROVIDER_EXAMPLE:-$TG_ROOT/.build/debug/tunnelgate-provider-example}
MANAGER=${TG_MANAGER_EXAMPLE:-$TG_ROOT/.build/debug/tunnelgate-manager-example}
[ -x "$PROVIDER" ] && [ -x "$MANAGER" ] || tg_bail "the examples are built in $TG_ROOT/.build/debug" "build them with: swift build"
tg_begin --needs jq
tg_plane_test_hooks TG_NE_REMOTE TG_NE_DNS TG_NE_STOP_FILE
mkdir -p "/etc/netns/$NS_C"
tg_defer rm -rf "/etc/netns/$NS_C"
printf 'nameserver %s\nsearch lab.example\n' "$R_C0_4" >"/etc/netns/$NS_C/resolv.conf"
printf '127.0.0.1 localhost\n%s probe.lab.example\n' "$R_C0_4" >"/etc/netns/$NS_C/hosts"
tg_snapshot "$NS_C" "$TG_TMP/before"
in_c() { ip netns exec "$NS_C" "$@"; }
end_if_running() { kill "$1" 2>/dev/null; }

status=$TG_TMP/status
echo 200 >"$status"
ip netns exec "$NS_R" /usr/bin/python3 "$TG_ROOT/netns/tests/probe_server.py" "$R_C0_4" 8080 "$status" >"$TG_TMP/server.log" 2>&1 &
server=$!
tg_defer end_if_running "$server"
served() { grep -qx -- "$1" "$TG_TMP/server.log"; }
wait_for "the probe server listens in R" 5 served ready

tg_run in_c "$MANAGER" save --provider "$PROVIDER" --name tgp \
  --on-demand 'connect:ethernet:probe=http://probe.lab.example:8080/ok' --on-demand disconnect -- --provider counting --name tgp
check_eq "the app saves the rules" 0 "$TG_RC"
preferences=$(tg_state_dir "$NS_C")/preferences.json
check_eq "... with the probe URL" "http://probe.lab.example:8080/ok" "$(jq -r '.managers[0].onDemandRules[0].probeURL' "$preferences" 2>&1)"

log=$TG_TMP/on-demand.log
ip netns exec "$NS_C" env TG_NE_REMOTE="$CARRIER4" TG_NE_DNS=none TG_NE_STOP_FILE="$TG_HOOKS/tgp.stops" "$TG" on-demand >"$log" 2>&1 &
watcher=$!
tg_defer end_if_running "$watcher"
said() { grep -qE -- "$1" "$log"; }
status_is() { [ "$(in_c "$MANAGER" status --name tgp 2>/dev/null)" == "$1" ]; }

# 200: the Connect rule matches.
wait_for "the probe answers 200: the tunnel connects" 20 status_is connected
check "the watcher logs the probe's answer" said 'on demand: tgp: probe http://probe.lab.example:8080/ok on eth0: HTTP 200 \(matches\)'
check "... and the rule that started it" said 'rule 0 \(connect\) matches eth0 .*: starting the tunnel'
check_match "the first GET came from C's eth0 address" "^$C_ETH0_4 /ok 200\$" "$(sed -n 2p "$TG_TMP/server.log")"
check_eq "the tunnel's routes take R's address (an unbound socket would go into tgp)" tgp \
  "$(ip -n "$NS_C" -4 route get "$R_C0_4" | sed -n 's/.* dev \([^ ]*\).*/\1/p;q')"
gets() { grep -c " /ok " "$TG_TMP/server.log"; }
first=$(gets)
more_gets() { [ "$(gets)" -gt "$first" ]; }
wait_for "with the tunnel up the watcher probes again (at most every 10 s)" 20 more_gets
check_eq "... and every GET came from eth0's address, outside the tunnel" 0 \
  "$(grep ' /ok ' "$TG_TMP/server.log" | grep -vc "^$C_ETH0_4 ")"
check "the tunnel stays connected while the probe answers 200" status_is connected

# 503: the probe does not match; the next rule (Disconnect) does.
echo 503 >"$status"
wait_for "the probe answers 503: the tunnel stops" 30 status_is disconnected
check "the watcher logs the 503" said 'probe http://probe.lab.example:8080/ok on eth0: HTTP 503 \(does not match: only 200 OK does\)'
check "... and the Disconnect rule" said 'rule 1 \(disconnect\) matches eth0 .*: stopping the tunnel'
check_fails "tgp is gone" ip -n "$NS_C" link show dev tgp

# 200 again: connected again.
echo 200 >"$status"
wait_for "200 again: the tunnel connects again" 30 status_is connected

# The server gone: the probe fails, the Disconnect rule stops the tunnel.
kill "$server"; wait "$server" 2>/dev/null
wait_for "no server: the probe fails and the tunnel stops" 30 status_is disconnected
check "the log names the refused connection" said "probe http://probe.lab.example:8080/ok on eth0: $R_C0_4: connect: .*refused"

kill -TERM "$watcher"; wait "$watcher"
check_eq "the watcher exits 0 at SIGTERM" 0 "$?"
tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "C's kernel state at the end equals the state before" "$TG_TMP/before" "$TG_TMP/after"
tg_summary
