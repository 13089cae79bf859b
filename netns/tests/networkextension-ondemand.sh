#!/usr/bin/env bash
# networkextension-ondemand: Connect On Demand. A container app (tunnelgate-manager-example save) saves
# an enabled configuration with isOnDemandEnabled and rules, and starts nothing; `tunnelgate on-demand`
# in C plays the system's part. The rules, in order: Disconnect when a DNS search domain is
# corp.example, Ignore when it is ignore.example, Connect on Ethernet. Driven by C's primary link and
# resolver: no default route → nothing; the wired link's default route appears → connected; an app's
# stopVPNTunnel → connected again (the Connect rule still matches, as on iOS); the network's search
# domain becomes corp.example → disconnected; logind announces sleep (a private bus, as in
# networkextension-sleep.sh) → the disconnectOnSleep tunnel stops and is not started again until the wake; ignore.example → a disconnected tunnel stays so and a
# connected one stays up; `tunnelgate down` (the user's disconnect) → on-demand turned off in the
# preferences and the tunnel stays down. A malformed rule is refused at save time by key path and the
# preferences file is unchanged.
#
#   C ── tunnelgate on-demand ─spawn─▶ tunnelgate-provider-example ── tgd (10.8.0.2/24)
#   │ eth0: the primary link (wired, a veth); /etc/netns/C/resolv.conf: the network's resolver
#   R ── I
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
PROVIDER=${TG_PROVIDER_EXAMPLE:-$TG_ROOT/.build/debug/tunnelgate-provider-example}
MANAGER=${TG_MANAGER_EXAMPLE:-$TG_ROOT/.build/debug/tunnelgate-manager-example}
[ -x "$PROVIDER" ] && [ -x "$MANAGER" ] || tg_bail "the examples are built in $TG_ROOT/.build/debug" "build them with: swift build"
tg_begin --needs jq,dbus-daemon
/usr/bin/python3 -c 'import dbus, gi' 2>/dev/null || tg_bail "python3-dbus or python3-gi is not installed" "run Scripts/setup.sh"
tg_plane_test_hooks TG_NE_REMOTE TG_NE_DNS TG_NE_STOP_FILE
resolv=/etc/netns/$NS_C/resolv.conf
mkdir -p "/etc/netns/$NS_C"
tg_defer rm -rf "/etc/netns/$NS_C"
network_dns() { printf 'nameserver %s\nsearch %s\n' "$R_C0_4" "$1" >"$resolv"; }
network_dns lab.example
tg_snapshot "$NS_C" "$TG_TMP/before"
state=$(tg_state_dir "$NS_C")
preferences=$state/preferences.json
in_c() { ip netns exec "$NS_C" "$@"; }
stops=$TG_HOOKS/tgd.stops
# Each start's packet plane may have another uid: the file every one of them appends to is writable by all.
: >"$stops" && chmod 666 "$stops"
end_if_running() { kill "$1" 2>/dev/null; }

# The system bus: a private one on which logind_standin.py owns org.freedesktop.login1.
bus=unix:path=$TG_TMP/bus
dbus-daemon --session --nofork --address="$bus" >/dev/null 2>&1 &
tg_defer end_if_running $!
bus_up() { [ -S "$TG_TMP/bus" ]; }
wait_for "the private bus listens" 5 bus_up
mkfifo "$TG_TMP/logind.in"
exec 7<>"$TG_TMP/logind.in"
/usr/bin/python3 "$TG_ROOT/netns/tests/logind_standin.py" "$bus" <&7 >"$TG_TMP/logind.out" 2>&1 &
tg_defer end_if_running $!
logind_said() { grep -qx -- "$1" "$TG_TMP/logind.out"; }
wait_for "logind's stand-in owns org.freedesktop.login1" 5 logind_said ready

# A malformed rule: refused at save, nothing written.
tg_run in_c "$MANAGER" save --provider "$PROVIDER" --name tgd --on-demand 'disconnect:search=bad..example' -- --provider counting --name tgd
check_eq "a malformed rule fails the save" 1 "$TG_RC"
check_match "... naming the rule's key path" 'onDemandRules\[0\]\.dnsSearchDomainMatch\[0\]: .*bad\.\.example' "$TG_ERR"
check_fails "... and no preferences file was written" test -e "$preferences"

tg_run in_c "$MANAGER" save --provider "$PROVIDER" --name tgd --on-demand disconnect:search=corp.example \
  --on-demand ignore:search=ignore.example --on-demand connect:ethernet --disconnect-on-sleep -- --provider counting --name tgd
check_eq "the app saves the on-demand configuration" 0 "$TG_RC"
check_eq "isOnDemandEnabled and three rules are saved" "true 3" \
  "$(jq -r '.managers[0] | "\(.isOnDemandEnabled) \(.onDemandRules | length)"' "$preferences" 2>&1)"
saved=$(cat "$preferences")
tg_run in_c "$MANAGER" save --provider "$PROVIDER" --name tgd --on-demand 'connect:server=999.1.1.1' -- --provider counting --name tgd
check_eq "a server pattern that is no address is refused at save too" 1 "$TG_RC"
check_eq "... and the saved configuration is unchanged" "$saved" "$(cat "$preferences")"

# No primary network yet: C has no default route.
ip -n "$NS_C" -4 route del default
ip -n "$NS_C" -6 route del default 2>/dev/null
log=$TG_TMP/on-demand.log
ip netns exec "$NS_C" env DBUS_SYSTEM_BUS_ADDRESS="$bus" TG_NE_REMOTE="$CARRIER4" TG_NE_DNS=none TG_NE_STOP_FILE="$stops" "$TG" on-demand >"$log" 2>&1 &
watcher=$!
tg_defer end_if_running "$watcher"
said() { grep -qE -- "$1" "$log"; }
wait_for "the watcher says there is no primary network" 5 said 'on demand: tgd: no primary network'
tg_run in_c "$TG" on-demand
check_eq "a second watcher in the namespace is refused" 1 "$TG_RC"
check_match "... saying another one watches" 'another `tunnelgate on-demand` watches this namespace' "$TG_ERR"
check_eq "... and starts nothing" disconnected "$(in_c "$MANAGER" status --name tgd 2>&1)"

# The wired link gets its default route: the Connect rule matches.
status_is() { [ "$(in_c "$MANAGER" status --name tgd 2>/dev/null)" == "$1" ]; }
tg_c_default_route 4
tg_c_default_route 6
wait_for "a default route over eth0 (wired) appears: the tunnel connects" 20 status_is connected
check "the watcher says which rule started it" said 'on demand: tgd: rule 2 \(connect\) matches eth0 \(wired, search lab\.example\): starting the tunnel'
check_match "tgd has the provider's address" 'inet 10\.8\.0\.2/24 ' "$(ip -n "$NS_C" addr show dev tgd 2>&1)"

# An app's stopVPNTunnel: iOS starts an on-demand tunnel again while Connect matches.
tg_run in_c "$MANAGER" stop --name tgd
stopped_once() { [ "$(cat "$stops" 2>/dev/null)" == "stopTunnel 1" ]; }
wait_for "the app's stopVPNTunnel stops it (stopTunnel 1)" 10 stopped_once
wait_for "... and on demand starts it again (the Connect rule still matches)" 20 status_is connected
check_eq "isOnDemandEnabled stays true after an app's stop" true "$(jq -r '.managers[0].isOnDemandEnabled' "$preferences")"

# Sleep: the provider (disconnectOnSleep) stops with reason 15; on demand judges nothing until the wake.
echo sleep >&7
wait_for "logind announces sleep" 5 logind_said "sent sleep"
wait_for "the tunnel stops for the sleep" 20 status_is disconnected
stopped_for_sleep() { [ "$(sed -n 2p "$stops" 2>/dev/null)" == "stopTunnel 15" ]; }
wait_for "the provider saw stopTunnel(.sleep = 15)" 10 stopped_for_sleep
wait_for "the watcher noticed the change (the TUN gone) and did not judge it" 10 said 'a change while the host sleeps: not judged'
check_eq "no start while the host sleeps" 0 \
  "$(sed -n '/the host is about to sleep/,$p' "$log" | grep -c 'starting the tunnel')"
check "the tunnel is still disconnected" status_is disconnected
echo wake >&7
wait_for "logind announces the wake" 5 logind_said "sent wake"
wait_for "after the wake the Connect rule starts it again" 20 status_is connected
check "the watcher says it judged again after the wake" said 'on demand: the host woke: judging again'

# The network's search domain becomes corp.example: Disconnect.
network_dns corp.example
wait_for "the search domain corp.example disconnects the tunnel" 20 status_is disconnected
check "the watcher says which rule stopped it" said 'rule 0 \(disconnect\) matches eth0 \(wired, search corp\.example\): stopping the tunnel'
check_fails "tgd is gone" ip -n "$NS_C" link show dev tgd

# Ignore: a disconnected tunnel is not started...
network_dns ignore.example
wait_for "the watcher judges ignore.example" 10 said 'rule 1 \(ignore\) matches eth0 \(wired, search ignore\.example\): ignored, the tunnel stays disconnected'
check "... and the tunnel stays disconnected" status_is disconnected
# ... and a connected one is left up.
network_dns lab.example
wait_for "lab.example again: connected" 20 status_is connected
network_dns ignore.example
wait_for "the watcher judges ignore.example while connected" 10 said 'rule 1 \(ignore\) matches .*: ignored, the tunnel stays connected'
check "... and the tunnel stays connected" status_is connected

# The user's disconnect: on demand goes off, the tunnel stays down.
network_dns lab.example
tg_run in_c "$TG" down tgd
check_match "tunnelgate down says on demand was turned off" '^tgd: on demand turned off for Tunnelgate example \(tgd\)' "$TG_OUT"
check_eq "isOnDemandEnabled is false in the preferences" false "$(jq -r '.managers[0].isOnDemandEnabled' "$preferences")"
wait_for "the watcher sees on demand off" 10 said 'on demand: tgd: off \(isOnDemandEnabled is false'
check "... and the tunnel stays disconnected though Connect would match" status_is disconnected

kill -TERM "$watcher"; wait "$watcher"
check_eq "the watcher exits 0 at SIGTERM" 0 "$?"
check "... saying so" said 'on demand: stopping \(signal\)'
tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "C's kernel state at the end equals the state before" "$TG_TMP/before" "$TG_TMP/after"
tg_summary
