#!/usr/bin/env bash
# `tunnelgate-lab run` leaves the host as it found it: after a scenario that passes, one that fails,
# one stopped with SIGTERM, and one SIGKILLed (then `tunnelgate-lab sweep`); and its TAP and JUnit
# files are well-formed and record the failures.
#
#   the default topology (Examples/lab/vpn-client.json), built and removed four times:
#   client ══ router ══ internet ══ carrier / included / excluded,  router ══ lan
#
# The host's state compared: its links, /run/netns, /etc/netns, its nftables ruleset and
# /run/tunnelgate-lab.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
tg_begin --no-topology --no-binary --lab --tmp --needs xmllint
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
# The scenario's shell outlives the runner until it is swept: sweep ends every process in the namespaces.
tg_run "$LAB" sweep
check_rc "lab sweep" 0
check_match "sweep names the dead run" "^swept $R\$" "$TG_OUT"
host_state "$R" >"$TMP/after"
check_same_snapshot "the host is as before after SIGKILL and sweep" "$TMP/before" "$TMP/after"
rm -f "/tmp/lab-teardown-ready-$R"; rm -rf /tmp/tunnelgate-lab-"$R"-*
tg_summary
