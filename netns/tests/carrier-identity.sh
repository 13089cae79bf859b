#!/usr/bin/env bash
# The carrier exemption is the tunnel's identity, not the carrier's address (TunnelCrack's ServerIP,
# CVE-2023-36671): a full WireGuard tunnel from C to a wireguard-go server in I at the carrier
# 198.18.0.10:51820 (and [2001:db8:18::10]:51820).
#
#   C (tunnelgate, wg-quick file, ListenPort 51821, AllowedIPs 0.0.0.0/0, ::/0) ── R ── I (wireguard-go)
#
# Asserted: the tunnel works with a strict reverse-path filter in C (rp_filter=1: the carrier's replies
# get the tunnel's mark back from conntrack); `plan` and `status` name the exemption; I sees, in clear
# from C, only the tunnel's own 5-tuple (C:51821 -> carrier:51820/udp): a UDP datagram to the carrier's
# WireGuard port from another socket, TCP to carrier:8080 and an echo request, from root and from uid
# 65534, over IPv4 and IPv6, all go into the tunnel instead (they arrive at I through it, from C's tunnel
# address); `wg set fwmark` cannot take the identity away; a carrier given by host name is resolved
# once and pinned (plan says to what).
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
TGW=tgc$((RANDOM % 100000))
WGI=wgc$((RANDOM % 100000))
tg_defer rm -f "/var/run/wireguard/$TGW.sock" "/var/run/wireguard/$WGI.sock"
tg_begin --needs wireguard-go,wg

umask 077
wg genkey >"$TG_TMP/c.key"; wg pubkey <"$TG_TMP/c.key" >"$TG_TMP/c.pub"
wg genkey >"$TG_TMP/i.key"; wg pubkey <"$TG_TMP/i.key" >"$TG_TMP/i.pub"

# The server: wireguard-go in I with the tunnel addresses 10.72.0.2 and fd72::2.
in_i env LOG_LEVEL=error wireguard-go -f "$WGI" >>"$TG_TMP/wireguard-go.log" 2>&1 &
I_PID=$!
wait_for "wireguard-go's API socket in I" 10 test -S "/var/run/wireguard/$WGI.sock"
in_i wg set "$WGI" private-key "$TG_TMP/i.key" listen-port 51820 \
  peer "$(cat "$TG_TMP/c.pub")" allowed-ips 10.72.0.1/32,fd72::1/128
in_i ip addr add 10.72.0.2/24 dev "$WGI"
in_i ip addr add fd72::2/64 dev "$WGI" nodad
in_i ip link set "$WGI" up

# I counts what arrives on its physical link from C's addresses, and what arrives through the tunnel.
in_i nft -f - <<NFT || tg_bail "nft: counters in I"
table inet tgid {
  chain input {
    type filter hook input priority -10; policy accept;
    iifname "eth0" ip saddr $C_ETH0_4 udp sport 51821 udp dport 51820 counter comment "own4"
    iifname "eth0" ip6 saddr $C_ETH0_6 udp sport 51821 udp dport 51820 counter comment "own6"
    iifname "eth0" ip saddr $C_ETH0_4 counter comment "clear4"
    iifname "eth0" ip6 saddr $C_ETH0_6 meta l4proto != ipv6-icmp counter comment "clear6"
    iifname "eth0" ip6 saddr $C_ETH0_6 icmpv6 type echo-request counter comment "clear6"
    iifname "$WGI" ip saddr 10.72.0.1 ip daddr $CARRIER4 counter comment "tunnel4"
    iifname "$WGI" ip6 saddr fd72::1 ip6 daddr $CARRIER6 counter comment "tunnel6"
  }
}
NFT
count() { in_i nft list table inet tgid | awk -v c="\"$1\"" 'index($0, "comment " c) { for (i = 1; i < NF; i++) if ($i == "packets") s += $(i + 1) } END { print s + 0 }'; }

# C: the strictest reverse-path filter, then the full tunnel.
in_c sysctl -qw net.ipv4.conf.all.rp_filter=1 net.ipv4.conf.eth0.rp_filter=1
cat >"$TG_TMP/$TGW.conf" <<CONF
[Interface]
PrivateKey = $(cat "$TG_TMP/c.key")
Address = 10.72.0.1/24, fd72::1/64
ListenPort = 51821

[Peer]
PublicKey = $(cat "$TG_TMP/i.pub")
Endpoint = $CARRIER4:51820
AllowedIPs = 0.0.0.0/0, ::/0
PersistentKeepalive = 1
CONF
chmod 600 "$TG_TMP/$TGW.conf"
plan=$(in_c "$TG" plan "$TG_TMP/$TGW.conf" 2>&1)
check_match "plan names the identity-bound exemption" \
  "carrier exemption: only packets with fwmark 0x[0-9a-f]+ to $(tg_re "$CARRIER4"):51820/udp; everyone else" "$plan"
check_no_match "plan has no throw route for the carrier" "throw $(tg_re "$CARRIER4")/32" "$plan"
tg_run in_c "$TG" up "$TG_TMP/$TGW.conf" --detach
check_rc "tunnelgate up (full tunnel, rp_filter=1)" 0
wait_for "a handshake with the server, through a strict reverse-path filter" 15 \
  bash -c "[ \"\$(ip netns exec $NS_I wg show $WGI latest-handshakes | awk '{print \$2}')\" -gt 0 ]"
check_ping "ping through the tunnel" "$NS_C" 10.72.0.2
check_match "status names the exemption" "carrier exemption: only packets with fwmark" "$(in_c "$TG" status "$TGW")"
own=$(count own4)
check "the tunnel's own carrier 5-tuple reached I ($own datagrams)" test "$own" -gt 0

# Everyone else's packets to the carrier: into the tunnel.
clear0=$(count clear4) clear60=$(count clear6) tun0=$(count tunnel4) tun60=$(count tunnel6)
attack() { # as who: "" (root) or "setpriv --reuid 65534 --regid 65534 --clear-groups"
  local as=$1 a
  for a in "$CARRIER4" "$CARRIER6"; do
    in_c $as bash -c "exec 3<>/dev/udp/$a/51820; echo not-wireguard >&3" 2>/dev/null
    in_c $as timeout 1 bash -c "exec 3<>/dev/tcp/$a/8080" 2>/dev/null
    in_c $as ping -n -c 1 -W 0.5 "$a" >/dev/null 2>&1
  done
}
attack ""
attack "setpriv --reuid 65534 --regid 65534 --clear-groups"
check_eq "nothing but the tunnel's 5-tuple reached the carrier from C in clear, IPv4 (root and uid 65534)" \
  "$((clear0 + $(count own4) - own))" "$(count clear4)"
check_eq "... nor over IPv6" "$clear60" "$(count clear6)"
check "they went into the tunnel instead: I got them through it from C's tunnel address (IPv4: $(( $(count tunnel4) - tun0 )))" \
  test "$(( $(count tunnel4) - tun0 ))" -ge 6
check "... and IPv6 ($(( $(count tunnel6) - tun60 )))" test "$(( $(count tunnel6) - tun60 ))" -ge 6

# The identity cannot be taken away through the UAPI.
check_fails "wg set fwmark 0 is refused (the mark is the tunnel's carrier identity)" in_c wg set "$TGW" fwmark 0
check_match "the sockets keep the tunnel's mark" "fwmark: 0x" "$(in_c wg show "$TGW")"
check_ping "and the tunnel still works" "$NS_C" 10.72.0.2

tg_run in_c "$TG" down "$TGW"
check_rc "down" 0

# A carrier named by host name is resolved once and pinned: plan says to what.
echo "$CARRIER4 vpn-carrier.test" >"$TG_TMP/hosts"
sed "s/^Endpoint = .*/Endpoint = vpn-carrier.test:51820/" "$TG_TMP/$TGW.conf" >"$TG_TMP/named.conf"
chmod 600 "$TG_TMP/named.conf"
plan=$(in_c unshare -m bash -c "mount --bind $TG_TMP/hosts /etc/hosts && $TG plan $TG_TMP/named.conf" 2>&1)
check_match "plan: the host name resolved to the carrier, pinned" \
  "vpn-carrier.test resolved to $(tg_re "$CARRIER4"), pinned for the tunnel's life" "$plan"
check_match "plan: the exemption names the pinned address" "to $(tg_re "$CARRIER4"):51820/udp \\(vpn-carrier.test\\)" "$plan"

kill "$I_PID" 2>/dev/null
tg_summary
