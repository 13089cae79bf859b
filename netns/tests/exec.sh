#!/usr/bin/env bash
# `tunnelgate exec CONFIG -- CMD` (issue 17 point 5): one command in a namespace made for it, behind the
# tunnel, as the invoking user, with the tunnel's DNS in its resolv.conf; everything removed when it ends.
#
#   E  tgexec-NAME-PID, made by exec: lo and the TUN only; CMD runs here as the user
#   C  tunnelgate exec and its tunnel's owner run here (the WireGuard socket, ListenPort 5200N)
#   R  router: counts every packet from C that is not a carrier (the leak watch)
#   I  wireguard-go and the tunnels' DNS server (netns/containers.sh, The tunnels' peer): $INCLUDED4
#
# Asserted: CMD runs as --user's uid and as SUDO_UID's; reaches $INCLUDED4 and $INCLUDED6 only through the
# tunnel (the peer's RX grows, R counts nothing but carriers, its route is the TUN); its /etc/resolv.conf
# names the tunnel's server, and a lookup through it is answered from the tunnel's address; exit 7 gives
# 7; after it ends, and after SIGTERM to tunnelgate mid-run (passed on to CMD: 143), no namespace, no
# /etc/netns directory, no state directory, no process and no WireGuard socket is left, and C is as before;
# the tunnel's engine SIGKILLed under the command: the command is stopped, exec exits 1, nothing is left.
# Refused before anything is made: no `--`, an unknown user, a bad configuration.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../containers.sh"

WGI=wgi$((RANDOM % 100000))
cleanup() {
  local n
  for n in $(ls /run/netns 2>/dev/null | grep -E '^tgexec-tgx[0-9]-'); do
    [ -n "${EXEC_PIDS:-}" ] && kill $EXEC_PIDS 2>/dev/null
    ip netns del "$n" 2>/dev/null
  done
  rm -f "/var/run/wireguard/$WGI.sock"
}
tg_begin --needs wireguard-go,dnsmasq,busybox
tg_defer cleanup
TUNNELS=$TG_TMP/tunnels
# tunnelgate in C's network namespace but this mount namespace (nsenter, as containers.sh runs the engines):
# the namespace exec names is then bind-mounted where this script sees it (under `ip netns exec` it would be
# in that command's private mount namespace).
in_c() { nsenter --net="/run/netns/$NS_C" "$@"; }
tg_vpn_peer_start "$WGI" "$TUNNELS"
tg_vpn_tunnel tgx2 2
tg_vpn_tunnel tgx3 3
tg_lab_leak_declare "${TG_VPN_CARRIERS[@]}"
wait_for "C's links are settled" 5 _tg_settled "$NS_C"
tg_snapshot "$NS_C" "$TG_TMP/c-before"
exec_names() { ls -1 /run/netns 2>/dev/null | grep -E '^tgexec-tgx[0-9]-'; ls -1 /etc/netns 2>/dev/null | grep -E '^tgexec-tgx[0-9]-'; true; }
nothing_left() { [ -z "$(exec_names)" ] && tg_no_tunnel_process "$NS_C"; }

# --- Refusals: nothing is made -----------------------------------------------------------------------------
tg_run in_c "$TG" exec "$TUNNELS/tgx2.conf" id -u
check_rc "exec without -- is a usage error" 64
check_match "... saying so" 'no `--` before the command' "$TG_ERR"
tg_run in_c "$TG" exec "$TUNNELS/tgx2.conf" --user tg-no-such-user -- id -u
check_rc "exec --user UNKNOWN is a usage error" 64
check_match "... naming the user" 'tg-no-such-user: no such user' "$TG_ERR"
echo '{"name": "tgx2"' >"$TG_TMP/bad.json"
tg_run in_c "$TG" exec "$TG_TMP/bad.json" -- id -u
check_rc "exec with a bad configuration fails" 1
check_eq "after the refusals: no namespace or /etc/netns directory made" "" "$(exec_names)"

# --- The command's world ----------------------------------------------------------------------------------
script=$TG_TMP/inside.sh
cat >"$script" <<SH
echo "uid \$(id -u) gid \$(id -g)"
echo "netns \$(readlink /proc/self/ns/net)"
ip route get $INCLUDED4
ping -c 1 -W 3 $INCLUDED4 >/dev/null && echo "ping4 ok"
ping -6 -c 1 -W 3 $INCLUDED6 >/dev/null && echo "ping6 ok"
cat /etc/resolv.conf
busybox nslookup probe.tunnel.example
exit 7
SH
chmod 755 "$script"
rx=$(tg_vpn_peer_rx)
tg_lab_leaks_reset
# The script's text as an argument: $TG_TMP is root's alone, which uid 65534 cannot read.
tg_run in_c "$TG" exec "$TUNNELS/tgx2.conf" --user 65534 -- sh -c "$(cat "$script")"
check_rc "exec --user 65534 -- sh inside.sh: CMD's exit status (7)" 7
check_match "CMD ran as uid 65534" '^uid 65534 gid 65534$' "$TG_OUT"
check_match "CMD ran in a namespace of its own" '^netns net:\[' "$TG_OUT"
check_no_match "... not C's" "^netns net:\\[$(stat -L -c %i "/run/netns/$NS_C")\\]" "$TG_OUT"
check_match "CMD's route to $INCLUDED4 is the tunnel" "$(tg_re "$INCLUDED4") dev tgx2" "$TG_OUT"
check_match "CMD's resolv.conf names the tunnel's DNS server" '^nameserver 10\.8\.0\.1$' "$TG_OUT"
check_match "CMD's lookup through its resolv.conf is answered" "$(tg_re "$INCLUDED4")" "$TG_OUT"
check_match "... by the tunnel's server, which saw it from the tunnel's address" 'probe\.tunnel\.example from 10\.8\.0\.2' \
  "$(cat "$TG_TMP/dnsmasq.log")"
check "... through the tunnel (RX $rx -> $(tg_vpn_peer_rx))" test "$(tg_vpn_peer_rx)" -gt "$rx"
wait_for "after CMD: nothing left (namespace, /etc/netns, tunnel process)" 10 nothing_left

rx=$(tg_vpn_peer_rx)
tg_run in_c env SUDO_UID=4242 SUDO_GID=4343 "$TG" exec "$TUNNELS/tgx2.conf" -- sh -c "$(cat "$script")"
check_rc "exec under sudo (SUDO_UID=4242) -- sh inside.sh" 7
check_match "CMD ran as SUDO_UID and SUDO_GID" '^uid 4242 gid 4343$' "$TG_OUT"
tg_lab_leaks_reset
tg_run in_c "$TG" exec "$TUNNELS/tgx2.conf" --user root -- sh "$script"
check_match "as root: CMD reaches $INCLUDED4" '^ping4 ok$' "$TG_OUT"
check_match "as root: CMD reaches $INCLUDED6 over IPv6" '^ping6 ok$' "$TG_OUT"
check "... through the tunnel (RX $rx -> $(tg_vpn_peer_rx))" test "$(tg_vpn_peer_rx)" -gt "$rx"
# CMD's namespace has no link but the TUN: what R may see from C besides the carriers is C's own MLD
# reports (its link-local addresses to ff02::16), never CMD's packets.
check_lab_no_leaks "exec: nothing but the carriers (and C's own MLD reports, which the lab leaves out) left C while CMD ran"
wait_for "after CMD: nothing left" 10 nothing_left
check_eq "CMD reads tunnelgate's standard input" "through the tunnel" \
  "$(echo "through the tunnel" | in_c "$TG" exec "$TUNNELS/tgx2.conf" --user 65534 -- cat 2>/dev/null)"
wait_for "after it: nothing left" 10 nothing_left
tg_run in_c "$TG" exec "$TUNNELS/tgx2.conf" -- tg-no-such-command
check_rc "a command that is not found: 127" 127
wait_for "after it: nothing left" 10 nothing_left

# --- SIGTERM to tunnelgate mid-run --------------------------------------------------------------------------
# Not through a shell function: $! must be tunnelgate's pid (nsenter execs it).
nsenter --net="/run/netns/$NS_C" "$TG" exec "$TUNNELS/tgx3.conf" --user 65534 -- \
  sh -c 'trap "echo got TERM; exit 143" TERM; sleep 280 & wait' >"$TG_TMP/term.out" 2>"$TG_TMP/term.err" &
EXEC_PIDS=$!
ens=""
find_ns() { ens=$(ls -1 /run/netns 2>/dev/null | grep -E '^tgexec-tgx3-' | head -n 1); [ -n "$ens" ]; }
wait_for "the exec namespace exists" 15 find_ns
wait_for "its tunnel is connected" 15 bash -c "nsenter --net=/run/netns/$NS_C $TG status tgx3 --netns $ens | grep -q 'tgx3: connected'"
wait_for "CMD's sleep runs in it" 10 bash -c "ip netns pids $ens | xargs -r -n1 -I{} cat /proc/{}/comm | grep -qx sleep"
inode=$(stat -L -c %i "/run/netns/$ens")
check "the exec namespace has its state directory" test -d "/run/tunnelgate/net-$inode"
check_eq "\$! is tunnelgate exec" "$(readlink -f "$TG")" "$(readlink "/proc/$EXEC_PIDS/exe")"
kill -TERM "$EXEC_PIDS"
wait "$EXEC_PIDS"
rc=$?
check_eq "SIGTERM to tunnelgate exec: CMD's status (it exits 143 on TERM)" 143 "$rc"
check_match "... CMD got the signal" '^got TERM$' "$(cat "$TG_TMP/term.out")"
wait_for "after SIGTERM: nothing left" 10 nothing_left
check_fails "no state directory left for the namespace" test -e "/run/tunnelgate/net-$inode"
check_eq "no process left of CMD (sleep 280 as uid 65534)" "" "$(pgrep -u 65534 -f 'sleep 280')"
check_fails "WireGuard's API socket of tgx3 is gone" test -e /var/run/wireguard/tgx3.sock

# --- The tunnel's engine killed under the command ----------------------------------------------------------
nsenter --net="/run/netns/$NS_C" "$TG" exec "$TUNNELS/tgx3.conf" --user 65534 -- sleep 280 >"$TG_TMP/kill.out" 2>"$TG_TMP/kill.err" &
EXEC_PIDS=$!
wait_for "the exec namespace exists" 15 find_ns
wait_for "its tunnel is connected" 15 bash -c "nsenter --net=/run/netns/$NS_C $TG status tgx3 --netns $ens | grep -q 'tgx3: connected'"
engine=$(nsenter --net="/run/netns/$NS_C" "$TG" status tgx3 --netns "$ens" --json | jq -r .pid)
check "the tunnel's engine is a tunnelgate process ($engine)" test "$(readlink "/proc/$engine/exe")" = "$(readlink -f "$TG")"
kill -KILL "$engine"
wait "$EXEC_PIDS"
rc=$?
check_eq "the engine killed: tunnelgate exec stops the command and fails" 1 "$rc"
check_match "... saying the tunnel ended before the command" 'the tunnel ended before sleep did' "$(cat "$TG_TMP/kill.err")"
wait_for "after it: nothing left (the dead engine's residue removed from its journal)" 10 nothing_left
check_eq "no process left of CMD" "" "$(pgrep -u 65534 -f 'sleep 280')"

tg_snapshot "$NS_C" "$TG_TMP/c-after"
check_same_snapshot "C is as before" "$TG_TMP/c-before" "$TG_TMP/c-after"

tg_summary
