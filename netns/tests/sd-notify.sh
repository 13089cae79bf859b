#!/usr/bin/env bash
# sd-notify: `tunnelgate up` speaks systemd's notification protocol to a NOTIFY_SOCKET this test binds
# (a datagram socket read by a small python3 receiver, as PID 1 would read it), with WATCHDOG_USEC set.
#
#   this namespace: receiver (python3) ◄── AF_UNIX datagrams ── C: tunnelgate up CONFIG (engine)
#   $TG_TMP/notify.sock                                          └─ packet plane (no NOTIFY_SOCKET)
#   C ── R ── I (netns/lib.sh's topology; the carrier 198.18.0.10 in I)
#
# Asserted: READY=1 arrives once, and the routes and the rule of the tunnel were in the kernel when it
# arrived (the receiver snapshots C's rules and routes the moment it reads READY=1); STATUS= carries
# connected; WATCHDOG=1 arrives at about twice the rate WATCHDOG_USEC asks for while the engine runs,
# none while it is SIGSTOPped, again after SIGCONT; the packet plane's environment has no NOTIFY_SOCKET
# nor WATCHDOG_*; STOPPING=1 arrives at `tunnelgate down` while the engine still runs, READY before
# STOPPING; an abstract NOTIFY_SOCKET (@name, in C) works too; a start that fails (a runtime library
# without the ABI's symbols) sends STATUS= and STOPPING=1 but no READY=1. Bounded: every wait polls
# with a timeout; the SIGSTOP window is 2 s.
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
receiver_pid=""
tg_stop_receiver() { [ -n "$receiver_pid" ] && kill "$receiver_pid" 2>/dev/null; receiver_pid=""; return 0; }
tg_begin
tg_defer tg_stop_receiver

# The receiver: each datagram as lines "TIME SEQ ASSIGNMENT" (time.time(), the datagram's number); on
# READY=1 it snapshots NS's rules and routes into SNAPSHOT at once; on STOPPING=1 it notes whether the
# process whose pid is in PIDFILE still lives ("STOPPING-ALIVE yes|no").
cat >"$TG_TMP/receiver.py" <<'EOF'
import os, socket, subprocess, sys, time
address, log, ns, snapshot, pidfile = sys.argv[1:6]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + address[1:] if address.startswith("@") else address)
out = open(log, "a", buffering=1)
out.write("BOUND\n")
seq = 0
while True:
    data = s.recv(4096)
    now = time.time()
    seq += 1
    lines = data.decode("utf-8", "replace").split("\n")
    if "READY=1" in lines:
        with open(snapshot, "w") as f:
            for args in (["-4", "rule"], ["-6", "rule"], ["-4", "route", "show", "table", "all"], ["-6", "route", "show", "table", "all"]):
                f.write(subprocess.run(["ip", "-n", ns] + args, capture_output=True, text=True).stdout)
    for line in lines:
        out.write("%.6f %d %s\n" % (now, seq, line))
    if "STOPPING=1" in lines:
        try:
            os.kill(int(open(pidfile).read()), 0)
            alive = "yes"
        except Exception:
            alive = "no"
        out.write("%.6f %d STOPPING-ALIVE %s\n" % (now, seq, alive))
EOF
# start_receiver ADDRESS LOG [NETNS]: the receiver bound at ADDRESS (in NETNS when given: abstract names
# are per namespace).
start_receiver() {
  : >"$2"
  if [ -n "${3:-}" ]; then
    ip netns exec "$3" python3 "$TG_TMP/receiver.py" "$1" "$2" "$NS_C" "$TG_TMP/ready-snapshot" "$TG_TMP/up.pid" &
  else
    python3 "$TG_TMP/receiver.py" "$1" "$2" "$NS_C" "$TG_TMP/ready-snapshot" "$TG_TMP/up.pid" &
  fi
  receiver_pid=$!
  wait_for "the receiver is bound at $1" 10 grep -q '^BOUND$' "$2"
}
count() { grep -c -- " $1\$" "$log" 2>/dev/null || true; }
at_least() { [ "$(count "$1")" -ge "$2" ]; }

# --- A tunnel that comes up, is watched, and goes down -------------------------------------------------
cfg=$TG_TMP/tgsd.json
tg_full_tunnel_config "$cfg" tgsd
log=$TG_TMP/notify.log
start_receiver "$TG_TMP/notify.sock" "$log"
# WATCHDOG_USEC=1 s: a ping every 0.5 s.
ip netns exec "$NS_C" env NOTIFY_SOCKET="$TG_TMP/notify.sock" WATCHDOG_USEC=1000000 \
  TUNNELGATE_PLANE_PASS_ENVIRONMENT=NOTIFY_SOCKET,WATCHDOG_USEC,WATCHDOG_PID "$TG" up "$cfg" \
  >"$TG_TMP/up.out" 2>"$TG_TMP/up.err" &
up_pid=$!
echo "$up_pid" >"$TG_TMP/up.pid"
wait_for "READY=1 arrives" 20 at_least READY=1 1
connected() { grep -q '"status" : "connected"' <<<"$(ip netns exec "$NS_C" "$TG" status tgsd --json 2>/dev/null)"; }
wait_for "the tunnel is connected" 10 connected
table=$(tg_tunnel_table "$NS_C" 4)
snapshot=$(cat "$TG_TMP/ready-snapshot" 2>/dev/null)
check_eq "at READY=1, the tunnel's IPv4 and IPv6 default routes were in its table ($table)" 2 \
  "$(printf '%s\n' "$snapshot" | grep -cE "^default dev tgsd table $table( |\$)")"
check_eq "… and its two policy rules (not fwmark … lookup $table)" 2 \
  "$(printf '%s\n' "$snapshot" | grep -cE "not from all fwmark [^ ]+ lookup $table( |\$)")"
check_match "… and the excluded hosts' throw routes" "^throw $EXCLUDED6 .*table $table( |\$)" \
  "$(printf '%s\n' "$snapshot" | grep -E "^throw $EXCLUDED4 .*table $table( |\$)" >/dev/null && printf '%s\n' "$snapshot")"
check_match "STATUS= says connected, with the summary" '^[0-9.]+ [0-9]+ STATUS=tgsd: connected \(table [0-9]+, [0-9]+ routes' "$(cat "$log")"
check_eq "READY=1 arrived once" 1 "$(count READY=1)"

# The packet plane's environment: none of the protocol's variables, although the test hook asks the
# engine to pass them on (TUNNELGATE_PLANE_PASS_ENVIRONMENT): the engine removed them before it started it.
plane=$(tg_plane_pids "$NS_C" | head -n 1)
check_no_match "the packet plane (pid ${plane:-none}) has no NOTIFY_SOCKET or WATCHDOG_* in its environment" \
  '^(NOTIFY_SOCKET|WATCHDOG_USEC|WATCHDOG_PID)=' \
  "$(if [ -n "$plane" ]; then tr '\0' '\n' <"/proc/$plane/environ"; else echo "NOTIFY_SOCKET=(no plane found)"; fi)"

# Watchdog pings: 7 of them, then the mean interval of those 7 (6 gaps).
wait_for "WATCHDOG=1 pings arrive (7 of them)" 10 at_least WATCHDOG=1 7
gaps=$(grep ' WATCHDOG=1$' "$log" | tail -n 7 | awk 'NR == 1 { a = $1 } END { printf "%.3f", ($1 - a) / 6 }')
check "the pings come about every 0.5 s (half of WATCHDOG_USEC; mean gap ${gaps} s)" \
  awk -v g="$gaps" 'BEGIN { exit !(g >= 0.35 && g <= 0.8) }'
kill -STOP "$up_pid"
stopped_at=$(count WATCHDOG=1)
# A 2 s window with the engine stopped: four pings would have come.
_tg_poll 2 at_least WATCHDOG=1 $((stopped_at + 2))
check_eq "no ping while the engine is SIGSTOPped (2 s; at most one already on its way)" yes \
  "$([ "$(count WATCHDOG=1)" -le $((stopped_at + 1)) ] && echo yes || echo "no: $stopped_at before, $(count WATCHDOG=1) after")"
kill -CONT "$up_pid"
resumed=$(count WATCHDOG=1)
wait_for "after SIGCONT the pings resume" 5 at_least WATCHDOG=1 $((resumed + 2))

# `tunnelgate down`: STOPPING=1 while the engine still runs, then it exits 0.
tg_run ip netns exec "$NS_C" "$TG" down tgsd
check_rc "tunnelgate down tgsd" 0
wait_for "STOPPING=1 arrives" 10 at_least STOPPING=1 1
check_match "… while the engine still ran" ' STOPPING-ALIVE yes$' "$(cat "$log")"
up_exited() { ! kill -0 "$up_pid" 2>/dev/null; }
wait_for "the engine exits" 15 up_exited
wait "$up_pid"
check_eq "… with status 0" 0 "$?"
ready_seq=$(awk '$3 == "READY=1" { print $2; exit }' "$log")
stopping_seq=$(awk '$3 == "STOPPING=1" { print $2; exit }' "$log")
check "READY=1 (datagram ${ready_seq:-none}) came before STOPPING=1 (datagram ${stopping_seq:-none})" \
  test "${ready_seq:-999999}" -lt "${stopping_seq:-0}"
check_eq "READY=1 still arrived once" 1 "$(count READY=1)"
tg_stop_receiver

# --- An abstract socket (@name, in C), and a start that fails: no READY=1 ----------------------------------
# libmnl: a real shared library (root's, under /usr) without the runtime ABI's symbols.
bad=$(ldconfig -p | awk '/libmnl\.so\.0 / { print $NF; exit }')
bad=$(readlink -f "${bad:-/nonexistent}")
jq --arg lib "$bad" '.name = "tgsdbad" | .runtime = {"kind": "callback", "library": $lib}' "$cfg" >"$TG_TMP/bad.json"
log=$TG_TMP/notify-bad.log
address="@tgsd-$$-$RANDOM"
start_receiver "$address" "$log" "$NS_C"
tg_run ip netns exec "$NS_C" env NOTIFY_SOCKET="$address" WATCHDOG_USEC=1000000 "$TG" up "$TG_TMP/bad.json"
check_rc_nonzero "up with a library that is not a runtime ($bad) fails"
check_match "… saying why (the runtime's symbols)" 'symbol|tunnelgate_runtime|not a runtime' "$TG_ERR"
wait_for "… and its STOPPING=1 arrives on the abstract socket $address" 10 at_least STOPPING=1 1
check_match "… after STATUS= said connecting" ' STATUS=tgsdbad: connecting' "$(cat "$log")"
check_eq "… and no READY=1 was sent" 0 "$(count READY=1)"
check_fails "… and nothing of tgsdbad is in C" ip -n "$NS_C" link show tgsdbad
tg_stop_receiver
tg_summary
