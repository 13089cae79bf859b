#!/usr/bin/env bash
# `tunnelgate-lab run` leaves the host as it found it: after a scenario that passes, one that fails,
# one stopped with SIGTERM, and one SIGKILLed (then `tunnelgate-lab sweep`, which also removes the state
# directory a SIGKILLed Tunnelgate tunnel left in one of the run's namespaces, and no other namespace's);
# and its TAP and JUnit files are well-formed and record the failures.
#
#   the default topology (Examples/lab/vpn-client.json), built and removed four times:
#   client ══ router ══ internet ══ carrier / included / excluded,  router ══ lan
#
# The host's state compared: its links, /run/netns, /etc/netns, its nftables ruleset and
# /run/tunnelgate-lab.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
tg_begin --no-topology --lab --tmp --needs xmllint,python3
TOPO=$TG_ROOT/Examples/lab/vpn-client.json
TMP=$TG_TMP
RUNS=()
runs_down() { local r; for r in "${RUNS[@]}"; do "$LAB" down "$r" >/dev/null 2>&1; done; return 0; }
tg_defer runs_down

host_state() { # RUN: the host's state, with only this run's names (other runs may come and go meanwhile)
  ip -o link show | sed -E 's/ link-netns(id)? [^ ]+//' | awk '{ $1=""; print }'
  ls /run/netns /etc/netns 2>/dev/null | grep "^tgl-$1-"
  nft list ruleset
  ls /run/tunnelgate-lab 2>/dev/null | grep -x "$1"
}

cat >"$TMP/pass.sh" <<'SCENARIO'
phase steady
expect reach client 198.18.30.30
expect route client 198.18.30.30 eth0
SCENARIO
cat >"$TMP/fail.sh" <<'SCENARIO'
phase steady
expect reach client 198.18.30.30
expect no-reach client 198.18.30.30 --name "a deliberate failure <&> with XML's special characters"
expect route client 198.18.30.30 eth1
SCENARIO
cat >"$TMP/hang.sh" <<'SCENARIO'
phase waiting
expect reach client 198.18.30.30
touch "$TUNNELGATE_LAB_WORK/../lab-teardown-ready-$TUNNELGATE_LAB_RUN"
lab_wait 120 false
SCENARIO

# --- a scenario that passes ------------------------------------------------------------------------
R=p$$; RUNS+=("$R")
host_state "$R" >"$TMP/before"
tg_run "$LAB" run "$TMP/pass.sh" --topology "$TOPO" --run-id "$R" --tap "$TMP/pass.tap" --junit "$TMP/pass.xml"
check_rc "a passing scenario exits 0" 0
check_match "its last line is the summary" '^2 passed, 0 failed$' "$(printf '%s\n' "$TG_OUT" | tail -n 1)"
host_state "$R" >"$TMP/after"
check_same_snapshot "the host is as before after a passing scenario" "$TMP/before" "$TMP/after"
check "its JUnit file is well-formed XML" xmllint --noout "$TMP/pass.xml"
check_eq "TAP: the plan and two ok lines" $'1..2\nok 1 - [steady] client reaches 198.18.30.30\nok 2 - [steady] client routes 198.18.30.30 via eth0' \
  "$(grep -E '^(1\.\.|ok|not ok)' "$TMP/pass.tap")"

# --- a scenario that fails -----------------------------------------------------------------------
R=f$$; RUNS+=("$R")
host_state "$R" >"$TMP/before"
tg_run "$LAB" run "$TMP/fail.sh" --topology "$TOPO" --run-id "$R" --tap "$TMP/fail.tap" --junit "$TMP/fail.xml"
check_rc "a failing scenario exits 1" 1
check_match "the summary counts the failures" '^1 passed, 2 failed$' "$(printf '%s\n' "$TG_OUT" | tail -n 1)"
host_state "$R" >"$TMP/after"
check_same_snapshot "the host is as before after a failing scenario" "$TMP/before" "$TMP/after"
check "the failing scenario's JUnit file is well-formed XML" xmllint --noout "$TMP/fail.xml"
check_eq "JUnit records 3 tests, 2 failures" "3 2" \
  "$(xmllint --xpath 'concat(/testsuites/testsuite/@tests, " ", /testsuites/testsuite/@failures)' "$TMP/fail.xml")"
check_eq "JUnit names the failed testcase, escaped" "a deliberate failure <&> with XML's special characters" \
  "$(xmllint --xpath 'string(//testcase[failure][1]/@name)' "$TMP/fail.xml")"
check_match "JUnit's failure says what the route lookup found" 'expected dev eth1, got: 198\.18\.30\.30 .*dev eth0' \
  "$(xmllint --xpath 'string(//testcase[failure][2]/failure)' "$TMP/fail.xml")"
check_eq "TAP: plan 1..3 and two not ok lines" "1..3 2" \
  "$(grep -c '^not ok' "$TMP/fail.tap" | sed "s/^/$(grep '^1\.\.' "$TMP/fail.tap") /")"

# --- SIGTERM ---------------------------------------------------------------------------------------
R=t$$; RUNS+=("$R")
host_state "$R" >"$TMP/before"
rm -f "/tmp/lab-teardown-ready-$R"
"$LAB" run "$TMP/hang.sh" --topology "$TOPO" --run-id "$R" --tap "$TMP/term.tap" --junit "$TMP/term.xml" >"$TMP/term.out" 2>&1 &
runner=$!
wait_for "the hanging scenario is running" 60 sh -c "ls /tmp/tunnelgate-lab-$R-*/../lab-teardown-ready-$R 2>/dev/null | grep -q ."
kill -TERM "$runner"
wait "$runner"; rc=$?
check_eq "lab run stopped with SIGTERM exits 143" 143 "$rc"
host_state "$R" >"$TMP/after"
check_same_snapshot "the host is as before after SIGTERM" "$TMP/before" "$TMP/after"
check_match "TAP records the interruption" '^not ok [0-9]+ - \[waiting\] scenario interrupted by SIGTERM' "$(cat "$TMP/term.tap")"
check "the interrupted run's JUnit file is well-formed XML" xmllint --noout "$TMP/term.xml"
rm -f "/tmp/lab-teardown-ready-$R"

# --- SIGKILL, then sweep ------------------------------------------------------------------------------
R=k$$; RUNS+=("$R")
host_state "$R" >"$TMP/before"
"$LAB" run "$TMP/hang.sh" --topology "$TOPO" --run-id "$R" >"$TMP/kill.out" 2>&1 &
runner=$!
wait_for "the second hanging scenario is running" 60 sh -c "ls /tmp/tunnelgate-lab-$R-*/../lab-teardown-ready-$R 2>/dev/null | grep -q ."
kill -KILL "$runner"
wait "$runner" 2>/dev/null
check "after SIGKILL the run's namespaces are still there (nothing could remove them)" test -e "/run/netns/tgl-$R-client"
# A Tunnelgate tunnel in the run's client whose engine is SIGKILLed too leaves its state directory
# (/run/tunnelgate/net-INODE, named by the namespace's inode), as a killed run of Tunnelgate's suite does.
cat >"$TMP/tgsw.json" <<'CFG'
{"name": "tgsw", "mtu": 1400, "tunnelRemoteAddress": "198.18.10.10",
 "ipv4Settings": {"addresses": ["10.77.0.2"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["10.77.0.0/24"]},
 "runtime": {"kind": "none"}}
CFG
state_dir=/run/tunnelgate/net-$(stat -L -c %i "/run/netns/tgl-$R-client")
tg_run ip netns exec "tgl-$R-client" "$TG" up "$TMP/tgsw.json" --detach
check_rc "a Tunnelgate tunnel comes up in the run's client" 0
engine=$(sed -n 's/.*running in the background as pid \([0-9]*\).*/\1/p' <<<"$TG_OUT")
kill -KILL "${engine:-0}"
wait_for "... its engine SIGKILLed (pid ${engine:-none})" 5 tg_exited "${engine:-0}"
check "... leaves its state directory $state_dir behind" test -f "$state_dir/tgsw.journal"
# Control: a state directory of another namespace (this host's own cookie in it, never one of the
# run's namespaces'), which the sweep must leave.
other=/run/tunnelgate/net-9$$$RANDOM
tg_defer rm -rf "$other"
mkdir -p -m 700 "$other" &&
  python3 -c 'import socket; s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); print(int.from_bytes(s.getsockopt(socket.SOL_SOCKET, 71, 8), "little"))' \
    >"$other/namespace"
check "control: another namespace's state directory $other, holding this host's cookie" grep -qx '[0-9][0-9]*' "$other/namespace"
# The scenario's shell outlives the runner until it is swept: sweep ends every process in the namespaces.
tg_run "$LAB" sweep
check_rc "lab sweep" 0
check_match "sweep names the dead run" "^swept $R\$" "$TG_OUT"
check "sweep removed the state directory the killed tunnel left ($state_dir)" test ! -e "$state_dir"
check "... and left the other namespace's ($other)" test -f "$other/namespace"
host_state "$R" >"$TMP/after"
check_same_snapshot "the host is as before after SIGKILL and sweep" "$TMP/before" "$TMP/after"
rm -f "/tmp/lab-teardown-ready-$R"; rm -rf /tmp/tunnelgate-lab-"$R"-*
tg_summary
