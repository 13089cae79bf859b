#!/usr/bin/env bash
# DNS from dnsSettings, over a real tunnel, with real resolvers:
#
#   C (tunnelgate "tgc", 10.50.0.1)  ══ example runtime over UDP ══  I (tunnelgate "tgi", 10.50.0.2)
#      resolv.conf → LAN resolver                                       dnsmasq on 10.50.0.2: the tunnel's resolver
#   L: dnsmasq on 192.168.231.2, the "LAN" resolver                      (answers 198.18.44.44 for every name)
#      (answers 198.18.33.33 for every name)
#
# C's namespace has its own /etc/netns/C/resolv.conf (the LAN resolver). Asserted: with matchDomains
# only names in corp.example reach the tunnel's resolver (split DNS), the rest the LAN resolver; without
# them every name goes to the tunnel's; with includeAllNetworks DNS to the LAN resolver is blocked; status
# names the backend; after down the namespace's resolv.conf is byte-identical to before.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
tg_begin --runtime

tg_secret_file "dns scenario $$"

tg_dnsmasq "$NS_L" "$LAN4" --address=/#/198.18.33.33

# C's own resolv.conf, as a container would have.
mkdir -p "/etc/netns/$NS_C"
printf 'nameserver %s\n' "$LAN4" >"/etc/netns/$NS_C/resolv.conf"
tg_defer rm -rf "/etc/netns/$NS_C"
cp -p "/etc/netns/$NS_C/resolv.conf" "$TG_TMP/resolv.before"

resolve() { ip netns exec "$NS_C" getent ahostsv4 "$1" 2>/dev/null | awk 'NR == 1 { print $1 }'; }

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
query_lan_directly() {
  ip netns exec "$NS_C" bash -c "exec 3<>/dev/udp/$LAN4/53 && printf 'query' >&3" 2>/dev/null
  ip netns exec "$NS_C" timeout 1 bash -c "exec 3<>/dev/tcp/$LAN4/53" 2>/dev/null
  return 0
}
base=$(lan_queries)
query_lan_directly
check "control: without a kill switch, queries sent straight to the LAN resolver arrive" test "$(lan_queries)" -gt "$base"
wait_for "the LAN resolver answers" 5 bash -c "ip netns exec $NS_C getent ahostsv4 probe.example >/dev/null"
check_eq "before: names resolve through the LAN resolver" 198.18.33.33 "$(resolve www.example)"

tunnel_config() { # FILE NAME ADDRESS BIND PEER EXTRA (lib.sh tg_runtime_config; EXTRA: top-level keys)
  tg_runtime_config "$1" "$2" "$3" "$4" "$5" --routes '["10.50.0.0/24"]' --tail "$6"
}
# The far side: I, with the tunnel's resolver on its tunnel address.
tunnel_config "$TG_TMP/tgi.json" tgi 10.50.0.2 "$CARRIER4:5300" "$C_ETH0_4:5300" ""
tg_run ip netns exec "$NS_I" "$TG" up "$TG_TMP/tgi.json" --detach
check_rc "the far side's tunnel is up" 0
tg_dnsmasq "$NS_I" 10.50.0.2 --address=/#/198.18.44.44

up_c() { # EXTRA JSON
  tunnel_config "$TG_TMP/tgc.json" tgc 10.50.0.1 "$C_ETH0_4:5300" "$CARRIER4:5300" "$1"
  tg_run ip netns exec "$NS_C" "$TG" up "$TG_TMP/tgc.json" --detach
}

# --- split DNS -----------------------------------------------------------------------------------------
up_c ', "dnsSettings": {"servers": ["10.50.0.2"], "matchDomains": ["corp.example"]}'
check_rc "up with split DNS" 0
check_match "status names the backend" "dns: netns resolv.conf \\(/etc/netns/$NS_C/resolv.conf\\)" \
  "$(ip netns exec "$NS_C" "$TG" status tgc)"
check_match "the namespace's resolv.conf points at the forwarder" 'nameserver 127\.0\.0\.153' "$(cat "/etc/netns/$NS_C/resolv.conf")"
wait_for "the tunnel's resolver answers through the tunnel" 5 bash -c "ip netns exec $NS_C getent ahostsv4 host.corp.example >/dev/null"
check_eq "a name in corp.example goes to the tunnel's resolver" 198.18.44.44 "$(resolve host.corp.example)"
check_eq "a name outside it goes to the LAN resolver" 198.18.33.33 "$(resolve www.example)"
check_eq "notcorp.example is not in corp.example" 198.18.33.33 "$(resolve host.notcorp.example)"
tg_run ip netns exec "$NS_C" "$TG" down tgc
check_rc "down" 0
check "after down the namespace's resolv.conf is byte-identical to before" cmp "$TG_TMP/resolv.before" "/etc/netns/$NS_C/resolv.conf"
check_eq "after down names resolve through the LAN resolver again" 198.18.33.33 "$(resolve host.corp.example)"

# --- the tunnel as the default resolver --------------------------------------------------------------------
up_c ', "dnsSettings": {"servers": ["10.50.0.2"], "searchDomains": ["corp.example"]}'
check_rc "up with the tunnel as the default resolver" 0
check_match "resolv.conf names the tunnel's server and search domain" 'nameserver 10\.50\.0\.2' "$(cat "/etc/netns/$NS_C/resolv.conf")"
wait_for "every name resolves through the tunnel" 5 bash -c "[ \"\$(ip netns exec $NS_C getent ahostsv4 www.example | awk 'NR==1{print \$1}')\" = 198.18.44.44 ]"
check_eq "a short name is searched in corp.example, through the tunnel" 198.18.44.44 "$(resolve intranet)"
tg_run ip netns exec "$NS_C" "$TG" down tgc
check "after down resolv.conf is byte-identical again" cmp "$TG_TMP/resolv.before" "/etc/netns/$NS_C/resolv.conf"

# --- with the kill switch, DNS reaches only the tunnel's server, only through the tunnel ---------------
up_c ', "dnsSettings": {"servers": ["10.50.0.2"]}, "includeAllNetworks": true'
check_rc "up with the kill switch" 0
wait_for "names resolve through the tunnel" 5 bash -c "[ \"\$(ip netns exec $NS_C getent ahostsv4 www.example | awk 'NR==1{print \$1}')\" = 198.18.44.44 ]"
base=$(lan_queries)
query_lan_directly
check_eq "queries sent straight to the LAN resolver (UDP and TCP) never arrive" "$base" "$(lan_queries)"
tg_run ip netns exec "$NS_C" "$TG" down tgc
check "after down resolv.conf is byte-identical again" cmp "$TG_TMP/resolv.before" "/etc/netns/$NS_C/resolv.conf"

tg_run ip netns exec "$NS_I" "$TG" down tgi
tg_summary
