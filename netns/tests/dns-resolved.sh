#!/usr/bin/env bash
# DNS through a real systemd-resolved (the systemd-resolved backend), over a real tunnel, with real resolvers:
#
#   C ─────────────────────────────────────────────┐
#   │ private mount namespace (netns/resolved-env.sh): /run/dbus (a private system bus), /run/systemd
#   │   systemd-resolved (Debian's, unpacked; user nobody), stub on 127.0.0.53, global DNS = the LAN resolver
#   │   tunnelgate "tgc" (10.50.0.1) ══ example runtime over UDP ══ I: tunnelgate "tgi" (10.50.0.2)
#   │ /etc/netns/C/resolv.conf: "nameserver 127.0.0.53" (resolved's stub; what `ip netns exec C` shows)
#   └──────────────────────────────────────────────┘
#   L: dnsmasq on 192.168.231.2, the "LAN" resolver (answers 198.18.33.33 for every name)
#   I: dnsmasq on 10.50.0.2, the tunnel's resolver   (answers 198.18.44.44 for every name)
#
# Asserted: with resolv.conf saying resolved and resolved not answering, up fails clearly and changes
# nothing; with resolved running, status names the backend, resolvectl shows the tunnel link's servers,
# domains and default route, queries through the stub reach the tunnel's resolver for match-domain names
# (split DNS) or for every name (default resolver, also under the kill switch, where the LAN resolver
# sees nothing) and the LAN resolver otherwise; down reverts the link (RevertLink, seen in resolved's
# log) and resolved holds nothing of it; after a SIGKILL the link is gone with its settings and recovery
# sends nothing; recovery reverts a link of the tunnel's name and index and leaves another name alone;
# at the end C's kernel state and resolv.conf are as before.
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=netns/resolved-env.sh
. "$(dirname "$0")/../resolved-env.sh"
tg_begin --runtime

tg_secret_file "dns-resolved scenario $$"

tg_dnsmasq "$NS_L" "$LAN4" --address=/#/198.18.33.33

# Counts the DNS packets that reach the LAN resolver.
ip netns exec "$NS_L" nft -f - <<EOT || tg_bail "nft: DNS counter in L"
table inet dnswatch {
  chain input {
    type filter hook input priority 0; policy accept;
    udp dport 53 counter
    tcp dport 53 counter
  }
}
EOT
lan_queries() {
  ip netns exec "$NS_L" nft list chain inet dnswatch input |
    awk '/dport 53/ { for (i = 1; i < NF; i++) if ($i == "packets") s += $(i + 1) } END { print s + 0 }'
}

# C's resolv.conf is resolved's stub, as on a host where resolved manages DNS.
mkdir -p "/etc/netns/$NS_C"
printf '# resolved stub (tunnelgate test)\nnameserver 127.0.0.53\noptions edns0 trust-ad\nsearch .\n' \
  >"/etc/netns/$NS_C/resolv.conf"
tg_defer rm -rf "/etc/netns/$NS_C"
cp -p "/etc/netns/$NS_C/resolv.conf" "$TG_TMP/resolv.before"
tg_resolved_config "$LAN4"
tg_resolved_env "$NS_C"
state=$(tg_state_dir "$NS_C")

# Queries as any process of C makes them: glibc, /etc/resolv.conf (the namespace's), resolved's stub.
resolve() { ip netns exec "$NS_C" getent ahostsv4 "$1" 2>/dev/null | awk 'NR == 1 { print $1 }'; }
resolves_to() { [ "$(resolve "$1")" == "$2" ]; }
tgc() { tg_in_resolved_env "$TG" "$@"; }
# link_line CMD: resolvectl's answer for link tgc without its "Link N (tgc):" prefix.
link_line() { tg_resolvectl "$1" tgc 2>&1 | sed -n 's/^Link [0-9]* (tgc): *//p'; }
# resolved_holds TEXT: resolvectl status (every link and the global section) mentions TEXT.
resolved_holds() { grep -qF -- "$1" <<<"$(tg_resolvectl status 2>&1)"; }
resolved_forgot() { ! resolved_holds "$1"; }
reverts() { grep -c 'D-Bus revert request from client' "$TG_RESOLVED_DIR/resolved.log"; }
tgc_gone() { ! ip -n "$NS_C" link show tgc >/dev/null 2>&1; }

tunnel_config() { # FILE NAME ADDRESS BIND PEER EXTRA (lib.sh tg_runtime_config; EXTRA: top-level keys)
  tg_runtime_config "$1" "$2" "$3" "$4" "$5" --routes '["10.50.0.0/24"]' --tail "$6"
}
up_c() { # EXTRA JSON
  tunnel_config "$TG_TMP/tgc.json" tgc 10.50.0.1 "$C_ETH0_4:5300" "$CARRIER4:5300" "$1"
  tg_run tgc up "$TG_TMP/tgc.json" --detach
}
owner_pid() { tg_tunnel_pids "$NS_C" | head -n 1; }
split=', "dnsSettings": {"servers": ["10.50.0.2"], "matchDomains": ["corp.example"], "matchDomainsNoSearch": true}'

# --- resolv.conf says resolved, resolved does not answer: a clear error, nothing changed ------------------
tg_snapshot "$NS_C" "$TG_TMP/before"
up_c "$split"
check_rc "without resolved running, up fails" 1
check_match "it says resolv.conf names resolved, which does not answer on the system bus" \
  "/etc/netns/$NS_C/resolv.conf is a file whose only nameserver is 127\\.0\\.0\\.53.*does not answer on the system bus.*ServiceUnknown" "$TG_ERR"
check_eq "no journal of tgc is left" "" "$(ls "$state" 2>/dev/null | grep '^tgc\.' || true)"
check "the namespace's resolv.conf is untouched" cmp "$TG_TMP/resolv.before" "/etc/netns/$NS_C/resolv.conf"
tg_snapshot "$NS_C" "$TG_TMP/after-refused"
check_same_snapshot "C's kernel state is as before" "$TG_TMP/before" "$TG_TMP/after-refused"

# --- resolved runs -----------------------------------------------------------------------------------------
tg_resolved_start
wait_for "before any tunnel, names resolve through resolved to the LAN resolver" 10 resolves_to www.example 198.18.33.33

tunnel_config "$TG_TMP/tgi.json" tgi 10.50.0.2 "$CARRIER4:5300" "$C_ETH0_4:5300" ""
tg_run ip netns exec "$NS_I" "$TG" up "$TG_TMP/tgi.json" --detach
check_rc "the far side's tunnel is up" 0
tg_dnsmasq "$NS_I" 10.50.0.2 --address=/#/198.18.44.44

# --- split DNS: routing-only match domain --------------------------------------------------------------------
up_c "$split"
check_rc "up with split DNS (matchDomainsNoSearch)" 0
check_match "status names the backend" "dns: systemd-resolved$" "$(tgc status tgc)"
check_eq "the tunnel link's DNS server in resolved" 10.50.0.2 "$(link_line dns)"
check_eq "the match domain is a routing-only domain" "~corp.example" "$(link_line domain)"
check_eq "the link is not the default route (split DNS)" no "$(link_line default-route)"
index=$(tg_in_resolved_env cat /sys/class/net/tgc/ifindex)
check_eq "the journal names the link before resolved is changed" "backend systemd-resolved|link $index tgc" \
  "$(grep -E '^(backend|link) ' "$state/tgc.dns" 2>&1 | paste -sd '|')"
check "resolv.conf is not written" cmp "$TG_TMP/resolv.before" "/etc/netns/$NS_C/resolv.conf"
wait_for "a name in corp.example reaches the tunnel's resolver, through the stub" 10 resolves_to host.corp.example 198.18.44.44
check_eq "a name outside it goes to the LAN resolver" 198.18.33.33 "$(resolve www.example)"
check_eq "notcorp.example is not in corp.example" 198.18.33.33 "$(resolve host.notcorp.example)"
owner=$(owner_pid)
tg_run tgc down tgc
check_rc "down" 0
check_match "down sent RevertLink: resolved logged the owner's revert request" \
  "D-Bus revert request from client PID $owner " "$(grep 'revert request' "$TG_RESOLVED_DIR/resolved.log")"
check_fails "resolved holds nothing of 10.50.0.2 any more" resolved_holds 10.50.0.2
check_fails "nor of corp.example" resolved_holds corp.example
check_eq "corp.example resolves through the LAN again" 198.18.33.33 "$(resolve host.corp.example)"

# --- match domains that are search domains too (NEDNSSettings' default) ----------------------------------------
up_c ', "dnsSettings": {"servers": ["10.50.0.2"], "matchDomains": ["corp.example"]}'
check_rc "up with split DNS (match domains searched)" 0
check_eq "the match domain is a search domain, which in resolved also routes" "corp.example" "$(link_line domain)"
check_match "resolved's stub file lists it for glibc's search" '^search .*corp\.example' \
  "$(tg_in_resolved_env cat /run/systemd/resolve/stub-resolv.conf)"
check_match "a single-label name is qualified with it and answered through the tunnel" \
  'intranet(\.corp\.example)?: 198\.18\.44\.44' "$(tg_resolvectl query -4 intranet 2>&1)"
tg_run tgc down tgc
check_rc "down" 0

# --- the tunnel as the default resolver ------------------------------------------------------------------------
up_c ', "dnsSettings": {"servers": ["10.50.0.2"], "searchDomains": ["corp.example"]}'
check_rc "up with the tunnel as the default resolver" 0
check_eq "domains: the search domain and ~. (every name)" "corp.example ~." "$(link_line domain)"
check_eq "the link is a default route" yes "$(link_line default-route)"
wait_for "every name goes through the tunnel, not to the global (LAN) server" 10 resolves_to www.example 198.18.44.44

# SIGKILL: the TUN goes with its owner, and resolved drops the link's settings with the link.
owner=$(owner_pid)
before_reverts=$(reverts)
kill -KILL "$owner"
wait_for "the owner is gone" 5 tg_exited "$owner"
wait_for "resolved holds nothing of 10.50.0.2 once the link is gone" 5 resolved_forgot 10.50.0.2
check "the DNS journal stays until recovery" test -f "$state/tgc.dns"
wait_for "names resolve through the LAN again" 10 resolves_to www.example 198.18.33.33
tg_run tgc down tgc
check_rc "recovery: down after the SIGKILL" 0
check "recovery removed the DNS journal" test ! -e "$state/tgc.dns"
check_eq "recovery sent nothing to resolved: the link is gone" "$before_reverts" "$(reverts)"

# --- the kill switch: DNS only to the tunnel's server, through the tunnel -------------------------------------
up_c ', "dnsSettings": {"servers": ["10.50.0.2"]}, "includeAllNetworks": true'
check_rc "up with the kill switch" 0
wait_for "names resolve through the tunnel" 10 resolves_to www.example 198.18.44.44
base=$(lan_queries)
check_eq "resolved's queries for other names too" 198.18.44.44 "$(resolve other.example)"
check_eq "the LAN resolver received nothing meanwhile" "$base" "$(lan_queries)"
tg_run tgc down tgc
check_rc "down" 0

# --- recovery and an index that outlived the owner --------------------------------------------------------------
# A link of the tunnel's name and index after a crash (here a veth given them, with per-link settings as
# the tunnel had set them) is reverted; another interface that took the index is left alone.
crash_with_link() { # NAME: up, SIGKILL, then NAME at the tunnel's index, carrying settings in resolved
  up_c "$split"
  local idx pid
  idx=$(tg_in_resolved_env cat /sys/class/net/tgc/ifindex)
  pid=$(owner_pid)
  kill -KILL "$pid"
  _tg_poll 5 tg_exited "$pid"
  _tg_poll 5 tgc_gone
  ip -n "$NS_C" link add "$1" index "$idx" type veth peer name "$1-peer" || tg_bail "ip link add $1 index $idx"
  ip -n "$NS_C" link set "$1-peer" up
  ip -n "$NS_C" link set "$1" up
  ip -n "$NS_C" addr add 10.60.0.1/24 dev "$1"
  tg_resolvectl dns "$1" 10.50.0.2 && tg_resolvectl domain "$1" '~corp.example' ||
    tg_bail "resolvectl sets DNS on $1"
}
crash_with_link tgc
check_match "the survivor carries the tunnel's settings" "10\\.50\\.0\\.2" "$(tg_resolvectl dns tgc 2>&1)"
tg_run tgc down tgc
check_rc "recovery with the tunnel's link still there" 0
check_eq "recovery reverted it: no DNS server on tgc" "" "$(link_line dns)"
check_eq "and no domain" "" "$(link_line domain)"
ip -n "$NS_C" link del tgc

crash_with_link other0
tg_run tgc down tgc
check_rc "recovery with another interface at the tunnel's index" 0
check_match "that interface keeps its settings" "^Link [0-9]+ \\(other0\\): 10\\.50\\.0\\.2" "$(tg_resolvectl dns other0 2>&1)"
ip -n "$NS_C" link del other0

# --- the end ------------------------------------------------------------------------------------------------------
tg_run ip netns exec "$NS_I" "$TG" down tgi
check "the namespace's resolv.conf is byte-identical to before" cmp "$TG_TMP/resolv.before" "/etc/netns/$NS_C/resolv.conf"
check_eq "no DNS journal is left" "" "$(ls "$state" 2>/dev/null | grep '\.dns$' || true)"
tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "C's kernel state after everything equals the state before" "$TG_TMP/before" "$TG_TMP/after"
tg_summary
