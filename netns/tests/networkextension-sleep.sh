#!/usr/bin/env bash
# networkextension-sleep: NEVPNProtocol.disconnectOnSleep. Two provider hosts, started with a
# manager's handoff (netns/tests/handoff.py): tgs's (in C) protocol has disconnectOnSleep, tgn's (in I) does not. The
# system bus is a private dbus-daemon (DBUS_SYSTEM_BUS_ADDRESS, as sd_bus_open_system reads it) on which
# netns/tests/logind_standin.py owns org.freedesktop.login1 and sends PrepareForSleep. A PrepareForSleep(true)
# from anyone else changes nothing; logind's stops tgs with stopTunnel(.sleep = 15) and leaves tgn
# connected, its provider's sleep(completionHandler:) called, then wake() at logind's wake. tgs holds a
# logind delay inhibitor (Inhibit("sleep", …, "delay"), listed by systemd-inhibit --list through the
# stand-in's ListInhibitors) from its start until its tunnel is down after PrepareForSleep(true); tgn
# holds none. A host with disconnectOnSleep on a bus without logind says in `status` that sleep is not
# followed.
#
#   C ── tgs (disconnectOnSleep) ── carrier $CARRIER4 over eth0
#   │        private bus $TG_TMP/bus (unix socket, every namespace): logind_standin.py, an impostor
#   R ── I ── tgn (without disconnectOnSleep)
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
PROVIDER=${TG_PROVIDER_EXAMPLE:-$TG_ROOT/.build/debug/tunnelgate-provider-example}
[ -x "$PROVIDER" ] || tg_bail "the example host is built at $PROVIDER" "build it with: swift build"
tg_begin --needs dbus-daemon,jq
/usr/bin/python3 -c 'import dbus, gi' 2>/dev/null || tg_bail "python3-dbus or python3-gi is not installed" "run Scripts/setup.sh"
tg_plane_test_hooks TG_NE_REMOTE TG_NE_DNS TG_NE_STOP_FILE
tg_snapshot "$NS_C" "$TG_TMP/before"
tg_snapshot "$NS_I" "$TG_TMP/before-i"
state=$(tg_state_dir "$NS_C")

# The private bus, and logind's stand-in reading its commands from a FIFO.
bus=unix:path=$TG_TMP/bus
dbus-daemon --session --nofork --address="$bus" >"$TG_TMP/dbus.log" 2>&1 &
bus_pid=$!
end_if_running() { kill "$1" 2>/dev/null; }
tg_defer end_if_running "$bus_pid"
bus_up() { [ -S "$TG_TMP/bus" ]; }
wait_for "the private bus listens" 5 bus_up
mkfifo "$TG_TMP/logind.in" "$TG_TMP/impostor.in"
exec 7<>"$TG_TMP/logind.in" 8<>"$TG_TMP/impostor.in"
/usr/bin/python3 "$TG_ROOT/netns/tests/logind_standin.py" "$bus" <&7 >"$TG_TMP/logind.out" 2>&1 &
tg_defer end_if_running $!
/usr/bin/python3 "$TG_ROOT/netns/tests/logind_standin.py" "$bus" --impostor <&8 >"$TG_TMP/impostor.out" 2>&1 &
tg_defer end_if_running $!
said() { grep -qx -- "$2" "$TG_TMP/$1.out"; }
wait_for "logind's stand-in owns org.freedesktop.login1" 5 said logind ready
wait_for "the impostor is on the bus" 5 said impostor ready

connected() {  # connected NAME [NS]
  grep -q '"status" *: *"connected"' "$(tg_state_dir "${2:-$NS_C}")/$1.state" 2>/dev/null
}
start() {  # start NAME DISCONNECT-ON-SLEEP BUS [NS]: a host for NAME with that protocol, on that system bus, in NS (C)
  local proto handoff ns=${4:-$NS_C}
  proto=$(jq -cn --argjson d "$2" '{disconnectOnSleep: $d}')
  handoff=$(jq -cn --arg n "$1" --arg p "$proto" '{interfaceName: $n, protocol: $p}')
  ip netns exec "$ns" env DBUS_SYSTEM_BUS_ADDRESS="$3" TG_NE_REMOTE="$CARRIER4" TG_NE_DNS=10.8.0.1 \
    TG_NE_STOP_FILE="$TG_HOOKS/$1.stops" /usr/bin/python3 "$TG_ROOT/netns/tests/handoff.py" "$handoff" \
    "$PROVIDER" --provider counting --name "$1" >"$TG_TMP/$1.log" 2>&1 &
  eval "pid_$1=\$!"
}
start tgs true "$bus"
start tgn false "$bus" "$NS_I"  # (one tunnel per namespace may set DNS)
wait_for "tgs (disconnectOnSleep) is connected" 15 connected tgs
wait_for "tgn (without) is connected, in I" 15 connected tgn "$NS_I"
tg_run ip netns exec "$NS_C" "$TG" status tgs
check_match "status: tgs follows logind's PrepareForSleep on the private bus, with a delay inhibitor" \
  "^  disconnect on sleep: following logind's PrepareForSleep on $bus, with a delay inhibitor\$" "$TG_OUT"
inhibitors() { DBUS_SYSTEM_BUS_ADDRESS="$bus" systemd-inhibit --list --no-pager 2>&1; }
tgs_pid=$(jq -r .pid "$state/tgs.state" 2>/dev/null)
check_match "systemd-inhibit --list shows tgs's host's delay inhibitor for sleep" \
  "^Tunnelgate +0 +root +$tgs_pid +.* sleep +stopping tunnel tgs before sleep \(disconnectOnSleep\) +delay\$" "$(inhibitors)"
check_eq "... and only that one (tgn, without disconnectOnSleep, takes none)" 1 "$(inhibitors | grep -c '^Tunnelgate ')"
tg_run ip netns exec "$NS_I" "$TG" status tgn
check_no_match "status: tgn says nothing of sleep" 'disconnect on sleep' "$TG_OUT"

# Somebody else's PrepareForSleep(true), then logind's wake: tgs logs the wake and is still connected.
echo sleep >&8
wait_for "the impostor sent PrepareForSleep(true)" 5 said impostor "sent sleep"
echo wake >&7
wait_for "logind's stand-in sent PrepareForSleep(false)" 5 said logind "sent wake"
woke() { grep -qF "the host woke (logind's PrepareForSleep(false))" "$TG_TMP/tgs.log"; }
wait_for "tgs saw logind's wake" 5 woke
check "tgs is still connected: a PrepareForSleep not from logind is not delivered" connected tgs
check_fails "tgs's provider was not stopped" test -e "$TG_HOOKS/tgs.stops"

# logind: about to sleep.
echo sleep >&7
wait_for "logind's stand-in sent PrepareForSleep(true)" 5 said logind "sent sleep"
wait_for "tgs's host exits" 30 tg_exited "$pid_tgs"
check "the stand-in saw the inhibitor released" said logind "released sleep Tunnelgate delay"
check_eq "systemd-inhibit --list: no inhibitor left" "No inhibitors." "$(inhibitors | tail -n 1)"
check_match "tgs released it once its tunnel was down" 'the tunnel is down: released the delay inhibitor' "$(cat "$TG_TMP/tgs.log")"
released_line=$(grep -n 'released the delay inhibitor' "$TG_TMP/tgs.log" | cut -d: -f1)
stopped_line=$(grep -n 'stopTunnel: 15' "$TG_TMP/tgs.log" | head -n 1 | cut -d: -f1)
check "... after the provider's stopTunnel(.sleep) in its log" test "${stopped_line:-999999}" -lt "${released_line:-0}"
wait "$pid_tgs"
check_eq "tgs's host ends (exit 0) when the host is about to sleep" 0 "$?"
check_eq "tgs's provider saw stopTunnel once, reason 15 (NEProviderStopReason.sleep)" "stopTunnel 15" "$(cat "$TG_HOOKS/tgs.stops" 2>&1)"
check_match "tgs's log says why it stopped" 'the host is about to sleep .*disconnectOnSleep' "$(cat "$TG_TMP/tgs.log")"
check_fails "tgs is gone" ip -n "$NS_C" link show dev tgs
check "tgn (without disconnectOnSleep) is still connected" connected tgn "$NS_I"
notes_are() { [ "$(tr '\n' ' ' <"$TG_HOOKS/$1" 2>/dev/null)" == "$2" ]; }
wait_for "tgn's provider was told: sleep(completionHandler:), and not stopped" 10 notes_are tgn.stops "sleep "
echo wake >&7
said_twice() { [ "$(grep -cx -- "$2" "$TG_TMP/$1.out")" -ge 2 ]; }
wait_for "logind's stand-in sent the wake" 5 said_twice logind "sent wake"
wait_for "tgn's provider was told: wake()" 10 notes_are tgn.stops "sleep wake "
check "tgn is connected after the wake" connected tgn "$NS_I"
kill -TERM "$pid_tgn"; wait "$pid_tgn"
check_eq "tgn stops at SIGTERM" "sleep wake stopTunnel 1 " "$(tr '\n' ' ' <"$TG_HOOKS/tgn.stops" 2>&1)"

# A bus without logind: nothing is followed, and status says so.
dbus-daemon --session --nofork --address="unix:path=$TG_TMP/bare" >/dev/null 2>&1 &
bare_pid=$!
tg_defer end_if_running "$bare_pid"
bare_up() { [ -S "$TG_TMP/bare" ]; }
wait_for "a bus without logind listens" 5 bare_up
start tgs true "unix:path=$TG_TMP/bare"
wait_for "tgs is connected on a bus without logind" 15 connected tgs
tg_run ip netns exec "$NS_C" "$TG" status tgs --json
check_match "status --json: .disconnectOnSleep says no logind, so sleep is not followed" \
  '^not followed: no logind on the system bus unix:path=.*/bare' "$(jq -r .disconnectOnSleep <<<"$TG_OUT")"
kill -TERM "$pid_tgs"; wait "$pid_tgs"

tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "C's kernel state at the end equals the state before" "$TG_TMP/before" "$TG_TMP/after"
tg_snapshot "$NS_I" "$TG_TMP/after-i"
check_same_snapshot "I's kernel state at the end equals the state before" "$TG_TMP/before-i" "$TG_TMP/after-i"
tg_summary
