#!/usr/bin/env bash
# control: a tunnel's control socket (STATEDIR/NAME.sock) is owner-only, answers only its owner's user
# (SO_PEERCRED), answers `status` and `stop`, never waits for a client that sends nothing (at most 8 such
# connections are kept, the oldest closed first), replaces the stale socket a crashed owner left, and
# refuses to start beside a live socket of someone else, leaving the kernel as it was.
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
tg_begin

client="python3 $(cd "$(dirname "$0")" && pwd)/control_client.py"
cfg=$TG_TMP/full.json
tg_full_tunnel_config "$cfg" tg0
tgc() { ip netns exec "$NS_C" "$TG" "$@"; }
tg_snapshot "$NS_C" "$TG_TMP/before"

tg_run tgc up "$cfg" --detach
check_rc "up --detach exits 0" 0
sock="$(tg_state_dir "$NS_C")/tg0.sock"
check "the control socket is a socket at $sock" test -S "$sock"
check_eq "... owner-only (mode 600, owned by root)" "600 root" "$(stat -c '%a %U' "$sock" 2>&1)"

# --- status and bad requests ------------------------------------------------------------------------------
answer=$($client "$sock" request status 2>&1)
check "status over the socket: tg0, connected, pid of the tunnel process ($answer)" \
  jq -e --argjson pid "$(tg_tunnel_pids "$NS_C")" '.name == "tg0" and .status == "connected" and .pid == $pid' <<<"$answer"
answer=$($client "$sock" request frobnicate 2>&1)
check_eq "an unknown request gets an error" '{"ok":false,"error":"unknown request"}' "$answer"
answer=$($client "$sock" request "message %%%" 2>&1)
check_eq "a message that is not base64 gets an error" '{"ok":false,"error":"the message is not base64"}' "$answer"

# --- clients that send nothing do not hold the tunnel up ------------------------------------------------
out=$($client "$sock" idle 1 status 2>&1)
check "with a connection open and silent, a status request is answered ($(head -n 1 <<<"$out" | cut -c1-60))" \
  jq -e '.status == "connected"' <<<"$(head -n 1 <<<"$out")"
check_eq "... and the silent connection was not waited for and closed first" "closed: none" "$(tail -n 1 <<<"$out")"
out=$($client "$sock" idle 9 status 2>&1)
check "with 9 silent connections, a status request is still answered" \
  jq -e '.status == "connected"' <<<"$(head -n 1 <<<"$out")"
check_eq "... and the two oldest silent ones were closed to keep at most 8 waiting" "closed: 0 1" "$(tail -n 1 <<<"$out")"

# --- peer credentials -------------------------------------------------------------------------------------
answer=$($client "$sock" as-uid 65534 status 2>&1)
check_eq "another user cannot connect to the owner-only socket" "error: Permission denied" "$answer"
chmod 666 "$sock"
answer=$($client "$sock" as-uid 65534 status 2>&1)
check_eq "with the socket's mode opened up, another user is still refused (SO_PEERCRED)" \
  '{"ok":false,"error":"permission denied"}' "$answer"
answer=$($client "$sock" as-uid 65534 stop 2>&1)
check_eq "... also for stop" '{"ok":false,"error":"permission denied"}' "$answer"
check_eq "... and the tunnel is still connected" connected "$(tgc status tg0 --json | jq -r .status)"
chmod 600 "$sock"

# --- a stale socket from a crashed owner is replaced ------------------------------------------------------
old_pid=$(tg_tunnel_pids "$NS_C")
kill -KILL "$old_pid"
wait_for "the killed owner is gone" 10 tg_no_tunnel_process "$NS_C"
check "the crashed owner left its socket file behind" test -S "$sock"
check_fails "... and nobody answers on it" $client "$sock" request status
tg_run tgc up "$cfg" --detach
check_rc "up after the crash exits 0 (the stale socket is replaced)" 0
answer=$($client "$sock" request status 2>&1)
check "the new owner answers on the socket, with its own pid" \
  jq -e --argjson old "$old_pid" --argjson pid "$(tg_tunnel_pids "$NS_C")" '.status == "connected" and .pid == $pid and .pid != $old' <<<"$answer"

# --- stop over the socket -----------------------------------------------------------------------------------
answer=$($client "$sock" request stop 2>&1)
check_eq "stop over the socket is acknowledged" '{"ok":true}' "$answer"
wait_for "the tunnel process exits after stop" 10 tg_no_tunnel_process "$NS_C"
check_eq "status after stop: disconnected, no residue" "disconnected false" \
  "$(tgc status tg0 --json | jq -r '"\(.status) \(.residue)"' 2>&1)"
check_fails "the socket file is gone" test -e "$sock"
tg_snapshot "$NS_C" "$TG_TMP/after-stop"
check_same_snapshot "C's kernel state after stop equals the state before up" "$TG_TMP/before" "$TG_TMP/after-stop"

# --- a live socket that is not ours: up refuses and leaves nothing ------------------------------------------
exec {hold}> >($client "$sock" listen >"$TG_TMP/listener.out" 2>&1)
wait_for "a foreign process listens on $sock" 5 grep -q listening "$TG_TMP/listener.out"
tg_run tgc up "$cfg" --detach
check_rc_nonzero "up beside a live foreign socket fails"
check_match "... naming the control socket and why" "cannot create the control socket .*tg0\.sock.*(in use|EADDRINUSE)" "$TG_ERR"
wait_for "no tunnel process is left" 10 tg_no_tunnel_process "$NS_C"
tg_snapshot "$NS_C" "$TG_TMP/after-refused"
check_same_snapshot "C's kernel state after the refused up equals the state before" "$TG_TMP/before" "$TG_TMP/after-refused"
exec {hold}>&-
wait_for "the foreign listener is gone" 5 bash -c "! test -e '$sock'"

tg_summary
