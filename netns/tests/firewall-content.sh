#!/usr/bin/env bash
# The kill switch is verified by its content and repaired whatever changes in it; repair never pauses;
# when repairs cannot win, the tunnel fails closed. Asserted by the table C's kernel holds, by
# `tunnelgate status`, and by what arrives at the router R.
#
#   C (tunnelgate up, tg0, includeAllNetworks: nftables table inet tunnelgate-tg0) ── eth0 ── R ── I
#     $INCLUDED4 (198.18.0.30) is an "internet" host in I: never reachable from C outside the tunnel
#
# R counts, in prerouting, what arrives from C's interfaces (c0, c1): the lab's counters every flow, per
# 5-tuple (those to $INCLUDED4 are what the holes would let out), and a rule of its own every packet,
# neighbour discovery included (`any`). A program in C (nft(8), as any root process could) changes the
# tunnel's table: an element added to the set dns4 (which the plan leaves empty) and the carrier's own
# accept rule pointed at $INCLUDED4 (TunnelCrack's ServerIP hole: ping -I eth0 $INCLUDED4 would then
# leave C), the final drop rule deleted and an accept inserted at the top, the output chain's policy
# set to accept, an extra chain with policy accept, every rule flushed, the table made dormant, then 30
# changes in a tight loop.
# Each is put back within a second, counted, and the table is again exactly the plan's (nft -s -j, without
# handles, equal to the one right after up). A status read while the owner is stopped (SIGSTOP), between
# a change and its repair, reports the change, not "kill switch: on". Last, a competing process re-adds
# the element as fast as it can (nft -i): the tunnel fails closed (a block-all table: loopback only, policy drop on
# output, input and forward), `status` says why, and nothing at all leaves C until `down`. The same for a
# NetworkExtension provider host (tunnelgate-provider-example, CountingTunnelProvider), until SIGTERM.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
tg_begin

ip netns exec "$NS_R" nft -f - <<EOT || tg_bail "nft: counters in R"
table inet watch {
  chain pre {
    type filter hook prerouting priority -300; policy accept;
    iifname { "c0", "c1" } counter comment "any"
  }
}
EOT
# counter NAME: packets counted by R's rule with that comment.
counter() {
  ip netns exec "$NS_R" nft list chain inet watch pre |
    awk -v c="\"$1\"" '$0 ~ ("comment " c) { for (i = 1; i < NF; i++) if ($i == "packets") print $(i + 1) }'
}
# ping_30_via_eth0: three echo requests to $INCLUDED4 forced onto eth0 (SO_BINDTODEVICE), outside the tunnel.
ping_30_via_eth0() {
  ip netns exec "$NS_C" ping -n -c 3 -i 0.2 -W 0.3 -I eth0 "$INCLUDED4" >/dev/null 2>&1
  return 0
}

cfg=$TG_TMP/fc.json
cat >"$cfg" <<CFG
{"name": "tg0", "tunnelRemoteAddress": "$CARRIER4", "mtu": 1400,
 "ipv4Settings": {"addresses": ["10.8.0.2"], "subnetMasks": ["255.255.255.0"],
                  "includedRoutes": ["0.0.0.0/0"], "excludedRoutes": ["$EXCLUDED4/32"]},
 "ipv6Settings": {"addresses": ["fd00:8::2"], "networkPrefixLengths": [64], "includedRoutes": ["::/0"]},
 "carrierEndpoints": ["$CARRIER4", "$CARRIER6"],
 "includeAllNetworks": true}
CFG
tg_snapshot "$NS_C" "$TG_TMP/before"

# A control: without the tunnel the same pings reach R, so the counter can move.
tg_lab_leaks_reset
ping_30_via_eth0
check "control: without the tunnel, pings to $INCLUDED4 via eth0 reach R ($(tg_lab_leaked "$INCLUDED4") packets)" \
  test "$(tg_lab_leaked "$INCLUDED4")" -gt 0

tg_run ip netns exec "$NS_C" "$TG" up "$cfg" --detach
check_rc "up --detach with includeAllNetworks" 0
pid=$(tg_tunnel_pids "$NS_C" | head -n 1)
log=$(tg_state_dir "$NS_C")/tg0.log

nftc() { ip netns exec "$NS_C" nft "$@"; }
# table_json: the tunnel's table as nft -j lists it, without counter values (-s) and handles.
table_json() {
  nftc -s -j list table inet tunnelgate-tg0 2>/dev/null | jq -S -c 'walk(if type == "object" then del(.handle) else . end)'
}
plan=$(table_json)
check_match "the plan's table is listed" '"name":"tunnelgate-tg0"' "$plan"
table_is_plan() { [ "$(table_json)" == "$plan" ]; }
status_text() { ip netns exec "$NS_C" "$TG" status tg0 2>&1; }
status_json() { ip netns exec "$NS_C" "$TG" status tg0 --json 2>/dev/null; }
repairs() { status_json | jq '.counters.repairs // 0'; }
repairs_above() { [ "$(repairs)" -gt "$1" ]; }
check_match "status: kill switch on, content as planned" 'kill switch: on \(.*content as planned' "$(status_text)"
tg_lab_leaks_reset
ping_30_via_eth0
check_lab_not_reached "while up: pings to $INCLUDED4 via eth0 do not reach R" "$INCLUDED4"

# --- an element added to dns4 -------------------------------------------------------------------------------
n=$(repairs)
nftc add element inet tunnelgate-tg0 dns4 "{ $INCLUDED4 }"
wait_for "[element] $INCLUDED4 is removed from dns4 within a second" 1 table_is_plan
tg_lab_leaks_reset
ping_30_via_eth0
check_lab_not_reached "[element] pings to $INCLUDED4 via eth0 then do not reach R" "$INCLUDED4"
wait_for "[element] status counts the repair" 1 repairs_above "$n"
check_match "[element] status names it (lastRepair)" "set dns4 has element $(tg_re "$INCLUDED4") the plan does not have" \
  "$(status_json | jq -r '.counters.lastRepair')"
check_match "[element] the log says what was repaired" \
  "repaired after an outside change: nftables: set dns4 has element $(tg_re "$INCLUDED4")" "$(cat "$log")"

# --- the carrier's accept rule pointed at another host (the ServerIP hole) -----------------------------------
n=$(repairs)
handle=$(nftc -a list chain inet tunnelgate-tg0 output | sed -n 's/.*comment "tunnelgate:tg0 carrier" # handle \([0-9]*\).*/\1/p' | head -n 1)
check "[carrier] the carrier's accept rule is there to tamper with" test -n "$handle"
nftc replace rule inet tunnelgate-tg0 output handle "$handle" ip daddr "$INCLUDED4" accept comment '"tunnelgate:tg0 carrier"'
wait_for "[carrier] the carrier rule is back as planned within a second" 1 table_is_plan
tg_lab_leaks_reset
ping_30_via_eth0
check_lab_not_reached "[carrier] pings to $INCLUDED4 via eth0 then do not reach R" "$INCLUDED4"
wait_for "[carrier] status counts the repair" 1 repairs_above "$n"

# --- the final drop deleted, an accept inserted at the top ----------------------------------------------------
n=$(repairs)
handle=$(nftc -a list chain inet tunnelgate-tg0 output | sed -n 's/.*comment "tunnelgate:tg0 blocked" # handle \([0-9]*\).*/\1/p')
check_match "[verdict] the final drop rule's handle is found" '^[0-9]+$' "$handle"
nftc delete rule inet tunnelgate-tg0 output handle "${handle:-0}"
wait_for "[verdict] the deleted drop rule is back within a second" 1 table_is_plan
wait_for "[verdict] counted" 1 repairs_above "$n"
n=$(repairs)
nftc insert rule inet tunnelgate-tg0 output counter accept
wait_for "[verdict] the inserted accept rule is gone within a second" 1 table_is_plan
wait_for "[verdict] counted" 1 repairs_above "$n"
check_match "[verdict] lastRepair names the rule" 'chain output has a rule the plan does not have at position 1' \
  "$(status_json | jq -r '.counters.lastRepair')"

# --- the output chain's policy ---------------------------------------------------------------------------------
n=$(repairs)
nftc chain inet tunnelgate-tg0 output '{ policy accept; }'
wait_for "[policy] the output chain's policy is drop again within a second" 1 table_is_plan
wait_for "[policy] counted" 1 repairs_above "$n"
check_match "[policy] lastRepair says what it was" 'chain output policy is accept, not drop' "$(status_json | jq -r '.counters.lastRepair')"

# --- an extra chain that accepts ------------------------------------------------------------------------------
n=$(repairs)
nftc add chain inet tunnelgate-tg0 sneak '{ type filter hook output priority -10; policy accept; }'
wait_for "[chain] the extra chain is gone within a second" 1 table_is_plan
wait_for "[chain] counted" 1 repairs_above "$n"
check_match "[chain] lastRepair names it" 'chain sneak is not in the plan' "$(status_json | jq -r '.counters.lastRepair')"

# --- every rule flushed -----------------------------------------------------------------------------------------
n=$(repairs)
nftc flush table inet tunnelgate-tg0
wait_for "[flush] the rules are back within a second" 1 table_is_plan
wait_for "[flush] counted" 1 repairs_above "$n"

# --- the table made dormant (its chains then filter nothing) ---------------------------------------------------
n=$(repairs)
nftc add table inet tunnelgate-tg0 '{ flags dormant; }'
wait_for "[dormant] the table is active again within a second" 1 table_is_plan
wait_for "[dormant] counted" 1 repairs_above "$n"
check_match "[dormant] lastRepair says so" 'has flags dormant, not none' "$(status_json | jq -r '.counters.lastRepair')"

# --- 30 changes in a tight loop: no pause, every one repaired -----------------------------------------------------
n=$(repairs)
for i in $(seq 1 30); do
  nftc add element inet tunnelgate-tg0 dns4 "{ 198.18.2.$i }" 2>/dev/null
done
wait_for "[loop] within a second of the 30th change the table is exactly the plan's again" 1 table_is_plan
check_eq "[loop] the table equals the one listed right after up" "$plan" "$(table_json)"
check "[loop] repaired, and counted ($(repairs) repairs in all)" repairs_above "$n"
check_eq "[loop] the tunnel did not fail closed" "null" "$(status_json | jq -c '.counters.failedClosed')"
tg_lab_leaks_reset
ping_30_via_eth0
check_lab_not_reached "[loop] pings to $INCLUDED4 via eth0 do not reach R" "$INCLUDED4"

# --- status between a change and its repair ------------------------------------------------------------------------
kill -STOP "$pid"
nftc add element inet tunnelgate-tg0 dns4 "{ $INCLUDED4 }"
text=$(status_text)
json=$(status_json)
kill -CONT "$pid"
check_no_match "[status] read before the repair, status does not say the kill switch is on" 'kill switch: on' "$text"
check_match "[status] ... it says it was tampered with" 'kill switch: TAMPERED WITH' "$text"
check_match "[status] ... and what differs" "nftables: set dns4 has element $(tg_re "$INCLUDED4") the plan does not have" "$text"
check_eq "[status] --json: killSwitch false, firewall tampered with" 'false "tampered with"' "$(jq -r '"\(.killSwitch) \"\(.firewall)\""' <<<"$json")"
wait_for "[status] once the owner runs again the element is removed within a second" 1 table_is_plan
check_match "[status] and status says on again" 'kill switch: on \(' "$(status_text)"

# --- repairs undone as fast as they are made: fail closed ---------------------------------------------------------
# compete: one nft process re-adding the element as fast as it reads the command (each line its own
# transaction), for at most 20 s and 200000 lines, or until $TG_TMP/stop-competitor exists. Its pid: $competitor.
compete() {
  rm -f "$TG_TMP/stop-competitor"
  (
    end=$((SECONDS + 20))
    for ((i = 0; i < 200000; i++)); do
      [ "$SECONDS" -lt "$end" ] && [ ! -e "$TG_TMP/stop-competitor" ] || break
      echo "add element inet tunnelgate-tg0 dns4 { $INCLUDED4 }"
    done | ip netns exec "$NS_C" nft -i >/dev/null 2>&1
  ) &
  competitor=$!
}
stop_competing() {
  touch "$TG_TMP/stop-competitor"
  wait "$competitor"
}
failed_closed() { [ "$(status_json | jq -r '.counters.failedClosed // empty')" != "" ]; }
# check_block_all TAG: the tunnel's table is the block-all one: three chains, policy drop, loopback only, no sets.
check_block_all() {
  local closed_json
  closed_json=$(nftc -j list table inet tunnelgate-tg0 2>/dev/null)
  check_eq "[$1] the table has three chains, output, input and forward, each with policy drop" \
    'forward:drop input:drop output:drop' \
    "$(jq -r '[.nftables[] | .chain? | select(.) | "\(.name):\(.policy)"] | sort | join(" ")' <<<"$closed_json")"
  check_eq "[$1] ... no sets, and only loopback accepted" '0 iifname:lo oifname:lo' \
    "$(jq -r '[[.nftables[] | .set? | select(.)] | length] + ([.nftables[] | .rule? | select(.) | .expr[0].match | "\(.left.meta.key):\(.right)"] | sort) | join(" ")' <<<"$closed_json")"
}
# check_nothing_leaves TAG: pings (carriers included, forced onto eth0 and eth1) and DNS from C; R counts none.
check_nothing_leaves() {
  local any_base
  any_base=$(counter any)
  ip netns exec "$NS_C" ping -n -c 1 -W 0.3 "$CARRIER4" >/dev/null 2>&1
  ip netns exec "$NS_C" ping -n -c 1 -W 0.3 "$CARRIER6" >/dev/null 2>&1
  ip netns exec "$NS_C" ping -n -c 1 -W 0.3 -I eth0 "$INCLUDED4" >/dev/null 2>&1
  ip netns exec "$NS_C" ping -n -c 1 -W 0.3 -I eth0 "$LAN4" >/dev/null 2>&1
  ip netns exec "$NS_C" ping -n -c 1 -W 0.3 -I eth1 "$INCLUDED6" >/dev/null 2>&1
  ip netns exec "$NS_C" bash -c "exec 3<>/dev/udp/$LAN4/53; echo x >&3" 2>/dev/null
  check_eq "[$1] nothing leaves C: R counts no packet from it, carriers included" "$any_base" "$(counter any)"
}

compete
wait_for "[closed] the tunnel fails closed within 10 s of the competitor starting" 10 failed_closed
stop_competing
check_block_all closed
text=$(status_text)
check_match "[closed] status says it failed closed and why" "failed closed: .*undone before the next check: .*dns4 has element $(tg_re "$INCLUDED4")" "$text"
check_match "[closed] status: disconnected" '^tg0: disconnected' "$text"
check_match "[closed] status: the block-all table is on" 'kill switch: on, failed closed' "$text"
check_match "[closed] the log says it" 'failed closed: .*nothing leaves but loopback' "$(cat "$log")"
check_nothing_leaves closed
check_ping "[closed] loopback still works" "$NS_C" 127.0.0.1
nftc chain inet tunnelgate-tg0 output '{ policy accept; }'
wait_for "[closed] the block-all table is itself kept: its policy is drop again within a second" 1 \
  bash -c "ip netns exec $NS_C nft list chain inet tunnelgate-tg0 output | grep -q 'policy drop;'"

tg_run ip netns exec "$NS_C" "$TG" down tg0
check_rc "down" 0
wait_for "the detached tunnelgate process has exited" 10 tg_no_tunnel_process "$NS_C"
check_match "after down: status keeps why the last run ended" 'last run ended with: failed closed: ' "$(status_text)"
tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "after down C's kernel state equals the state before up" "$TG_TMP/before" "$TG_TMP/after"
check_ping "after down: $INCLUDED4 is reachable directly again" "$NS_C" "$INCLUDED4"

# --- a NetworkExtension provider host fails closed the same way -----------------------------------------------------
PROVIDER=${TG_PROVIDER_EXAMPLE:-$TG_ROOT/.build/debug/tunnelgate-provider-example}
if [ -x "$PROVIDER" ]; then
  mkdir -p "/etc/netns/$NS_C"
  tg_defer rm -rf "/etc/netns/$NS_C"
  printf 'nameserver %s\n' "$R_C0_4" >"/etc/netns/$NS_C/resolv.conf"
  # The state before the host, with the namespace's own resolv.conf (the snapshot compares it too).
  tg_snapshot "$NS_C" "$TG_TMP/before-provider"
  ip netns exec "$NS_C" env TG_NE_REMOTE="$CARRIER4" TG_NE_DNS=10.8.0.1 \
    "$PROVIDER" --provider counting --include-all-networks >"$TG_TMP/provider.log" 2>&1 &
  provider_pid=$!
  status_is() { status_json | jq -e "$1" >/dev/null; }
  wait_for "[provider] startTunnel completed: connected" 15 status_is '.status == "connected"'
  check "[provider] status: the kill switch as planned" status_is '.killSwitch and .firewall == "as planned"'
  compete
  wait_for "[provider] the provider's tunnel fails closed within 10 s of the competitor starting" 10 failed_closed
  stop_competing
  check_block_all provider
  wait_for "[provider] status: disconnected, the block-all table as recorded" 2 \
    status_is '.status == "disconnected" and .killSwitch and .firewall == "as planned"'
  check_match "[provider] the host's log says it failed closed" 'failed closed: .*nothing leaves but loopback' "$(cat "$TG_TMP/provider.log")"
  check_nothing_leaves provider
  kill -TERM "$provider_pid"
  wait_for "[provider] the host exits on SIGTERM" 20 tg_exited "$provider_pid"
  wait "$provider_pid"
  check_eq "[provider] ... cleanly (exit 0)" 0 "$?"
  tg_snapshot "$NS_C" "$TG_TMP/after-provider"
  check_same_snapshot "[provider] after the host stopped C's kernel state (and resolv.conf) equals the state before it started" \
    "$TG_TMP/before-provider" "$TG_TMP/after-provider"
else
  tg_fail "the example provider host is built at $PROVIDER" "build it with: swift build"
fi

tg_summary
