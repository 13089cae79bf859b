#!/usr/bin/env bash
# crash-recovery: a foreground `up` killed with SIGKILL leaves residue (its policy rules) that `down`
# removes completely; after a second SIGKILL a new `up` clears the residue itself and succeeds without
# doubling anything; SIGTERM, SIGINT and `down` of a foreground `up` tear the tunnel down completely,
# and a second `up` of a running tunnel is refused without touching anything.
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
tg_begin

cfg=$TG_TMP/full.json
tg_full_tunnel_config "$cfg" tg0
tg_snapshot "$NS_C" "$TG_TMP/before"
rules4_before=$(tg_rule_count "$NS_C" 4)
rules6_before=$(tg_rule_count "$NS_C" 6)

# start_foreground LOG: `up` in the foreground, in the background of this script; sets $tg_pid (the
# tunnelgate process itself: env and ip netns exec exec it). env gives it SIGINT back: a non-interactive
# shell starts background jobs with SIGINT ignored, a terminal would not.
start_foreground() {
  env --default-signal=INT ip netns exec "$NS_C" "$TG" up "$cfg" >"$1" 2>&1 &
  tg_pid=$!
}

# reap PID: waits for PID and keeps its exit status in $tg_rc.
reap() {
  wait "$1" 2>/dev/null && tg_rc=0 || tg_rc=$?
}

# --- 1: SIGKILL, then `down` cleans the residue --------------------------------------------------------
start_foreground "$TG_TMP/up1.log"
wait_for "round 1: the foreground up routes $INCLUDED4 into tg0" 10 route_is "$NS_C" "$INCLUDED4" tg0 ||
  _tg_detail "up's output:" "$(cat "$TG_TMP/up1.log")"
rules4_up=$(ip -n "$NS_C" -4 rule show)
rules6_up=$(ip -n "$NS_C" -6 rule show)
kill -KILL "$tg_pid"
reap "$tg_pid"
check_eq "round 1: up was killed by SIGKILL (exit 137)" 137 "$tg_rc"
check "round 1: residue exists: more IPv4 rules than before ($rules4_before)" \
  test "$(tg_rule_count "$NS_C" 4)" -gt "$rules4_before"
check "round 1: residue exists: more IPv6 rules than before ($rules6_before)" \
  test "$(tg_rule_count "$NS_C" 6)" -gt "$rules6_before"
check_match "round 1: the residue is the tunnel's rule" 'not from all fwmark [^ ]+ lookup [^ ]+' \
  "$(ip -n "$NS_C" -4 rule show)"
tg_run ip netns exec "$NS_C" "$TG" status tg0 --json
check_eq "round 1: status reports the residue of tg0, disconnected" "true disconnected" \
  "$(jq -r '"\(.residue) \(.status)"' <<<"$TG_OUT" 2>&1)"
tg_run ip netns exec "$NS_C" "$TG" down tg0
check_rc "round 1: down tg0 after the crash exits 0" 0
tg_run ip netns exec "$NS_C" "$TG" status tg0 --json
check_eq "round 1: after down, status reports no residue" "false disconnected" \
  "$(jq -r '"\(.residue) \(.status)"' <<<"$TG_OUT" 2>&1)"
tg_snapshot "$NS_C" "$TG_TMP/after1"
check_same_snapshot "round 1: C's kernel state after down equals the state before up" \
  "$TG_TMP/before" "$TG_TMP/after1"

# --- 2: SIGKILL, then `up` again clears the residue first ---------------------------------------------
start_foreground "$TG_TMP/up2.log"
wait_for "round 2: the foreground up routes $INCLUDED4 into tg0" 10 route_is "$NS_C" "$INCLUDED4" tg0 ||
  _tg_detail "up's output:" "$(cat "$TG_TMP/up2.log")"
kill -KILL "$tg_pid"
reap "$tg_pid"
check_eq "round 2: up was killed by SIGKILL (exit 137)" 137 "$tg_rc"
check "round 2: residue exists: more IPv4 rules than before" \
  test "$(tg_rule_count "$NS_C" 4)" -gt "$rules4_before"
tg_run ip netns exec "$NS_C" "$TG" up "$cfg" --detach
check_rc "round 2: up --detach over the residue exits 0" 0
check_route "round 2: $INCLUDED4 is looked up into tg0 again" "$NS_C" "$INCLUDED4" tg0
check_route_marked "round 2: the carrier $CARRIER4 is reached through eth0 by the tunnel's mark" "$NS_C" "$CARRIER4" \
  "$(tg_tunnel_table "$NS_C" 4)" eth0
check_route "round 2: anyone else's packets to the carrier go into tg0" "$NS_C" "$CARRIER4" tg0
check_eq "round 2: the IPv4 rules are those of one tunnel (residue not doubled)" "$rules4_up" \
  "$(ip -n "$NS_C" -4 rule show)"
check_eq "round 2: the IPv6 rules are those of one tunnel (residue not doubled)" "$rules6_up" \
  "$(ip -n "$NS_C" -6 rule show)"
tg_run ip netns exec "$NS_C" "$TG" down tg0
check_rc "round 2: down tg0 exits 0" 0
wait_for "round 2: the detached tunnelgate process has exited" 10 tg_no_tunnel_process "$NS_C"
tg_snapshot "$NS_C" "$TG_TMP/after2"
check_same_snapshot "round 2: C's kernel state after down equals the state before up" \
  "$TG_TMP/before" "$TG_TMP/after2"

# --- 3 and 4: SIGTERM and SIGINT of a foreground up tear down completely -------------------------------
for sig in TERM INT; do
  start_foreground "$TG_TMP/up-$sig.log"
  wait_for "SIG$sig: the foreground up routes $INCLUDED4 into tg0" 10 route_is "$NS_C" "$INCLUDED4" tg0 ||
    _tg_detail "up's output:" "$(cat "$TG_TMP/up-$sig.log")"
  kill "-$sig" "$tg_pid"
  wait_for "SIG$sig: up exits within 10 s" 10 tg_exited "$tg_pid" || kill -KILL "$tg_pid"
  reap "$tg_pid"
  check_eq "SIG$sig: up exits 0 after tearing down" 0 "$tg_rc"
  tg_snapshot "$NS_C" "$TG_TMP/after-$sig"
  check_same_snapshot "SIG$sig: C's kernel state after the signal equals the state before up" \
    "$TG_TMP/before" "$TG_TMP/after-$sig"
done

# --- 5: a second up of a running tunnel is refused; `down` stops a foreground up -----------------------
start_foreground "$TG_TMP/up-down.log"
wait_for "down: the foreground up routes $INCLUDED4 into tg0" 10 route_is "$NS_C" "$INCLUDED4" tg0 ||
  _tg_detail "up's output:" "$(cat "$TG_TMP/up-down.log")"
tg_snapshot "$NS_C" "$TG_TMP/running"
tg_run ip netns exec "$NS_C" "$TG" up "$cfg" --detach
check_rc "a second up of the running tg0 exits 1" 1
check_match "a second up of the running tg0 says it is already up" '^Error: .*tg0.*already' "$TG_ERR"
tg_snapshot "$NS_C" "$TG_TMP/running-after"
check_same_snapshot "a refused second up changes nothing" "$TG_TMP/running" "$TG_TMP/running-after"
tg_run ip netns exec "$NS_C" "$TG" down tg0
check_rc "down of a foreground up exits 0" 0
wait_for "down: the foreground up exits within 10 s" 10 tg_exited "$tg_pid" || kill -KILL "$tg_pid"
reap "$tg_pid"
check_eq "down: the foreground up exits 0" 0 "$tg_rc"
tg_snapshot "$NS_C" "$TG_TMP/after-down"
check_same_snapshot "down: C's kernel state equals the state before up" "$TG_TMP/before" "$TG_TMP/after-down"

tg_summary
