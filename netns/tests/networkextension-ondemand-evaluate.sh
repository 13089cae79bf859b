#!/usr/bin/env bash
# networkextension-ondemand-evaluate: NEOnDemandRuleEvaluateConnection acted on. A container app saves one
# rule, evaluateConnection on Ethernet, with two connection rules in order: never.corp.example →
# neverConnect, corp.example → connectIfNeeded. `tunnelgate on-demand` in C then watches C's DNS queries
# (its nftables table inet tunnelgate-on-demand copies them to nfnetlink_log; no packet altered) and real
# lookups (getent, against a real dnsmasq in R that knows public.corp.example and www.other.example and
# answers NXDOMAIN for the rest of corp.example) decide: www.other.example (no rule) → nothing;
# never.corp.example (neverConnect) → not started; public.corp.example (resolves on the network) → not
# needed; intranet.corp.example (does not resolve) → the tunnel starts. The table is there while a rule
# evaluates connections, gone after SIGTERM; after a SIGKILL it stays, and `tunnelgate on-demand --clean`
# removes it by its journal. C's kernel state (the nftables ruleset with it) at the end equals the
# state before.
#
#   C ── tunnelgate on-demand ─spawn─▶ tunnelgate-provider-example ── tge (10.8.0.2/24)
#   │ eth0 (wired); resolv.conf: nameserver 10.231.0.1      getent hosts NAME ─▶ udp 53
#   R ── 10.231.0.1:53 dnsmasq (--local=/corp.example/, public.corp.example, www.other.example)
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
PROVIDER=${TG_PROVIDER_EXAMPLE:-$TG_ROOT/.build/debug/tunnelgate-provider-example}
MANAGER=${TG_MANAGER_EXAMPLE:-$TG_ROOT/.build/debug/tunnelgate-manager-example}
[ -x "$PROVIDER" ] && [ -x "$MANAGER" ] || tg_bail "the examples are built in $TG_ROOT/.build/debug" "build them with: swift build"
tg_begin --needs jq,dnsmasq,nft,getent
tg_plane_test_hooks TG_NE_REMOTE TG_NE_DNS TG_NE_STOP_FILE
mkdir -p "/etc/netns/$NS_C"
tg_defer rm -rf "/etc/netns/$NS_C"
printf 'nameserver %s\n' "$R_C0_4" >"/etc/netns/$NS_C/resolv.conf"
printf '127.0.0.1 localhost\n' >"/etc/netns/$NS_C/hosts"
tg_snapshot "$NS_C" "$TG_TMP/before"
in_c() { ip netns exec "$NS_C" "$@"; }
end_if_running() { kill "$1" 2>/dev/null; }

ip netns exec "$NS_R" dnsmasq --keep-in-foreground --no-resolv --no-hosts --bind-interfaces --listen-address="$R_C0_4" \
  --except-interface=lo --pid-file= --local=/corp.example/ --address=/public.corp.example/198.18.0.30 \
  --address=/www.other.example/198.18.0.31 --log-queries --log-facility="$TG_TMP/dnsmasq.log" >/dev/null 2>&1 &
tg_defer end_if_running $!
resolves() { in_c getent hosts public.corp.example; }
wait_for "dnsmasq in R answers" 10 resolves
check_fails "... and says NXDOMAIN for the rest of corp.example" in_c getent hosts nothing.corp.example

tg_run in_c "$MANAGER" save --provider "$PROVIDER" --name tge \
  --on-demand 'evaluate:ethernet:never=never.corp.example:if-needed=corp.example' -- --provider counting --name tge
check_eq "the app saves the evaluate rule" 0 "$TG_RC"
preferences=$(tg_state_dir "$NS_C")/preferences.json
check_eq "... with its connection rules in order" "neverConnect:never.corp.example connectIfNeeded:corp.example" \
  "$(jq -r '[.managers[0].onDemandRules[0].connectionRules[] | "\(.action):\(.matchDomains | join(","))"] | join(" ")' "$preferences" 2>&1 |
    sed 's/^2:/neverConnect:/; s/ 2:/ neverConnect:/; s/^1:/connectIfNeeded:/; s/ 1:/ connectIfNeeded:/')"

log=$TG_TMP/on-demand.log
watch() {
  ip netns exec "$NS_C" env TG_NE_REMOTE="$CARRIER4" TG_NE_DNS=none TG_NE_STOP_FILE="$TG_HOOKS/tge.stops" "$TG" on-demand >>"$log" 2>&1 &
  watcher=$!
  tg_defer end_if_running "$watcher"
}
watch
said() { grep -qE -- "$1" "$log"; }
status_is() { [ "$(in_c "$MANAGER" status --name tge 2>/dev/null)" == "$1" ]; }
table() { ip netns exec "$NS_C" nft list table inet tunnelgate-on-demand 2>&1; }
wait_for "the watcher evaluates connections and watches DNS queries" 10 said 'watching this namespace.s DNS queries'
check_match "the table copies unmarked UDP and TCP queries to port 53 to nflog group 7460" \
  'meta mark 0x00000000 udp dport 53 .*log group 7460 snaplen 512 .*meta mark 0x00000000 tcp dport 53 .*log group 7460 snaplen 512' "$(table | tr '\n' ' ')"
check_no_match "... with no verdict and no drop" 'drop|reject|queue' "$(table)"

# A name no connection rule holds.
tg_run in_c getent hosts www.other.example
check_match "getent resolves www.other.example" '^198\.18\.0\.31 ' "$TG_OUT"
wait_for "the watcher saw the lookup: no connection rule matches" 10 said 'tge: lookup of www\.other\.example: no connection rule matches'
check "the tunnel is not started" status_is disconnected
# neverConnect.
in_c getent hosts never.corp.example >/dev/null
wait_for "never.corp.example: neverConnect" 10 said 'lookup of never\.corp\.example: connection rule 0 \(neverConnect\): the tunnel is not started'
check "the tunnel is not started" status_is disconnected
# connectIfNeeded, resolvable on the network: not needed.
in_c getent hosts public.corp.example >/dev/null
wait_for "public.corp.example resolves on the network: not needed" 10 said 'lookup of public\.corp\.example: connection rule 1 \(connectIfNeeded\): reachable on eth0 without the tunnel, not started'
check "the tunnel is not started" status_is disconnected
check_eq "nothing was started at all" "" "$(grep 'starting the tunnel' "$log")"
# connectIfNeeded, not resolvable: the tunnel starts.
in_c getent hosts intranet.corp.example >/dev/null
wait_for "intranet.corp.example does not resolve: the tunnel connects" 20 status_is connected
check "the watcher says why" said "lookup of intranet\.corp\.example: connection rule 1 \(connectIfNeeded\): cannot resolve 'intranet\.corp\.example': .* on eth0: starting the tunnel"
check_match "tge has the provider's address" 'inet 10\.8\.0\.2/24 ' "$(ip -n "$NS_C" addr show dev tge 2>&1)"
check_eq "dnsmasq saw intranet.corp.example 4 times: the app's AAAA and A, then the watcher's own A and AAAA (on eth0)" 4 \
  "$(grep -c 'query\[A*\] intranet\.corp\.example from' "$TG_TMP/dnsmasq.log")"

# A SIGKILL leaves the table; --clean removes it by its journal.
kill -KILL "$watcher"; wait "$watcher" 2>/dev/null
check_match "after a SIGKILL the table is still there" 'chain dns-queries' "$(table)"
check "... and its journal" test -e "$(tg_state_dir "$NS_C")/on-demand.dns-watch"
tg_run in_c "$TG" on-demand --clean
check_eq "on-demand --clean exits 0" 0 "$TG_RC"
check_match "... saying what it removed" '^removed the DNS watch.s table inet tunnelgate-on-demand' "$TG_OUT"
check_fails "the table is gone" ip netns exec "$NS_C" nft list table inet tunnelgate-on-demand
check_fails "... and the journal" test -e "$(tg_state_dir "$NS_C")/on-demand.dns-watch"
tg_run in_c "$TG" on-demand --clean
check_eq "--clean again: nothing to clean" "nothing to clean" "$TG_OUT"

# A new watcher arms again; --clean is refused while it runs; SIGTERM removes the table.
watch
wait_for "a new watcher watches DNS queries again" 10 table
tg_run in_c "$TG" on-demand --clean
check_eq "--clean is refused while a watcher runs" 1 "$TG_RC"
check_match "... and the table stays" 'chain dns-queries' "$(table)"
kill -TERM "$watcher"; wait "$watcher"
check_eq "the watcher exits 0 at SIGTERM" 0 "$?"
check_fails "the table is gone after SIGTERM" ip netns exec "$NS_C" nft list table inet tunnelgate-on-demand
tg_run in_c "$TG" down tge
check_rc "the tunnel comes down" 0
tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "C's kernel state at the end equals the state before" "$TG_TMP/before" "$TG_TMP/after"
tg_summary
