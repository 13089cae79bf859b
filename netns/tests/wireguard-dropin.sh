#!/usr/bin/env bash
# `tunnelgate wireguard IFACE` as a drop-in for wireguard-go: Debian's wg-quick, unchanged, brings a full
# tunnel up and down through it (WG_QUICK_USERSPACE_IMPLEMENTATION), against a wireguard-go server.
#
#   C: wg-quick up (→ tunnelgate wireguard tgq…) ── R ── I: wireguard-go at the carrier 198.18.0.10:51820
#
# Asserted: the command returns once the TUN and /var/run/wireguard/IFACE.sock exist and the device runs
# detached; wg-quick configures it through wg(8) (setconf, fwmark, the interface's addresses, MTU and
# routes, its policy rules); traffic to an address only the default route covers crosses the tunnel and a
# handshake is seen on both sides; `wg show` reads the device's state; `wg-quick down` (which removes the
# UAPI socket file, as for wireguard-go) ends the device and takes the interface away; an interface moved
# into another namespace keeps working with its carrier socket where it was made, and the device exits
# when the interface is deleted there; bad names are refused with nothing made.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
tg_begin --needs wireguard-go,wg,wg-quick
# wg-quick runs "$WG_QUICK_USERSPACE_IMPLEMENTATION" IFACE as one word: the binary under the name
# tunnelgate-wireguard (the package installs that link).
DROPIN=$TG_TMP/tunnelgate-wireguard
ln -s "$TG" "$DROPIN"
TGQ=tgq$((RANDOM % 10000))
WGI=wgq$((RANDOM % 10000))
MOVED="tgqmv-$$"
dropin_pids() { pgrep -f "tunnelgate wireguard --ready-fd 3 $1\$" || true; }
cleanup_dropin() {
  for pid in $(dropin_pids "$TGQ"); do kill "$pid" 2>/dev/null || true; done
  rm -f "/var/run/wireguard/$TGQ.sock" "/var/run/wireguard/$WGI.sock"
  ip netns del "$MOVED" 2>/dev/null || true
}
tg_defer cleanup_dropin

umask 077
wg genkey >"$TG_TMP/c.key"; wg pubkey <"$TG_TMP/c.key" >"$TG_TMP/c.pub"
wg genkey >"$TG_TMP/i.key"; wg pubkey <"$TG_TMP/i.key" >"$TG_TMP/i.pub"
in_i env LOG_LEVEL=error wireguard-go "$WGI" >>"$TG_TMP/wireguard-go.log" 2>&1
wait_for "wireguard-go's API socket in I" 10 test -S "/var/run/wireguard/$WGI.sock"
in_i wg set "$WGI" private-key "$TG_TMP/i.key" listen-port 51820 peer "$(cat "$TG_TMP/c.pub")" allowed-ips 10.73.0.1/32
in_i ip addr add 10.73.0.2/24 dev "$WGI"
in_i ip link set "$WGI" up
# What I received through the tunnel from C's tunnel address, to an address only C's default route covers.
in_i ip addr add "$ELSEWHERE4/32" dev lo
in_i nft -f - <<NFT || tg_bail "nft: counters in I"
table inet tgq {
  chain input {
    type filter hook input priority -10; policy accept;
    iifname "$WGI" ip saddr 10.73.0.1 ip daddr $ELSEWHERE4 counter comment "tunnel"
  }
}
NFT
through() { in_i nft list table inet tgq | awk '/comment "tunnel"/ { for (i = 1; i < NF; i++) if ($i == "packets") print $(i + 1) }'; }

# Bad input: nothing made.
tg_run "$TG" wireguard
check_rc "no interface name: a usage error" 64
tg_run "$TG" wireguard "bad/name"
check_rc "a name with '/' is refused" 64
check_match "... saying why" "not an interface name" "$TG_ERR"
tg_run "$TG" wireguard "waytoolonginterfacename"
check_rc "a name over 15 characters is refused" 64

cat >"$TG_TMP/$TGQ.conf" <<CONF
[Interface]
PrivateKey = $(cat "$TG_TMP/c.key")
Address = 10.73.0.1/24
MTU = 1380

[Peer]
PublicKey = $(cat "$TG_TMP/i.pub")
Endpoint = $CARRIER4:51820
AllowedIPs = 0.0.0.0/0
CONF
# wg-quick as Debian ships it; only which userspace implementation it runs is set, as its man page says.
# (This kernel has no WireGuard module: wg-quick's own `ip link add type wireguard` fails first.)
tg_run in_c env WG_QUICK_USERSPACE_IMPLEMENTATION="$DROPIN" wg-quick up "$TG_TMP/$TGQ.conf"
check_rc "wg-quick up through 'tunnelgate wireguard' ($TG_ERR)" 0
check_match "... which ran it as its userspace implementation" "$(tg_re "$DROPIN") $TGQ" "$TG_ERR"
check "the device runs detached: one 'tunnelgate wireguard' process for $TGQ" test "$(dropin_pids "$TGQ" | grep -c .)" -eq 1
check "its UAPI socket is /var/run/wireguard/$TGQ.sock" test -S "/var/run/wireguard/$TGQ.sock"
check_match "the interface has wg-quick's address and MTU" "mtu 1380" "$(in_c ip link show dev "$TGQ")"
check_match "... and the fwmark rule of a full tunnel" "not from all fwmark 0xca6c lookup 51820" "$(in_c ip rule show)"
check_match "wg show reads the device: the listen port and fwmark wg-quick set" "fwmark: 0xca6c" "$(in_c wg show "$TGQ")"
before=$(through)
check "C reaches $ELSEWHERE4 (only the default route covers it)" in_c ping -c 2 -W 3 "$ELSEWHERE4"
check "... through the tunnel: I counted it from the tunnel's address (${before:-0} -> $(through))" test "$(through)" -gt "${before:-0}"
check_match "wg show in C: a handshake" "latest handshake" "$(in_c wg show "$TGQ")"
check_match "wg show in I: a handshake with C's tunnel" "latest handshake" "$(in_i wg show "$WGI")"
tg_run in_c env WG_QUICK_USERSPACE_IMPLEMENTATION="$DROPIN" wg-quick down "$TG_TMP/$TGQ.conf"
check_rc "wg-quick down ($TG_ERR)" 0
wait_for "the device process has exited" 10 bash -c "[ -z \"\$(pgrep -f 'tunnelgate wireguard --ready-fd 3 $TGQ\$')\" ]"
check_fails "the interface is gone" in_c ip link show dev "$TGQ"
check_no_match "... and wg-quick's rules with it" "lookup 51820" "$(in_c ip rule show)"

# The WireGuard project's namespace technique: made in C, moved into another namespace, the carrier
# socket stays in C; deleting the interface there ends the device.
ip netns add "$MOVED"
tg_run in_c "$TG" wireguard "$TGQ"
check_rc "tunnelgate wireguard $TGQ (detached)" 0
in_c wg set "$TGQ" private-key "$TG_TMP/c.key" peer "$(cat "$TG_TMP/i.pub")" endpoint "$CARRIER4:51820" allowed-ips 0.0.0.0/0
port=$(in_c wg show "$TGQ" listen-port)
in_c ip link set "$TGQ" netns "$MOVED"
ip -n "$MOVED" addr add 10.73.0.1/24 dev "$TGQ"
ip -n "$MOVED" link set "$TGQ" up
ip -n "$MOVED" route add default dev "$TGQ"
before=$(through)
check "from the namespace it was moved into, $ELSEWHERE4 is reached" ip netns exec "$MOVED" ping -c 2 -W 3 "$ELSEWHERE4"
check "... through the tunnel (${before:-0} -> $(through))" test "$(through)" -gt "${before:-0}"
check_match "the carrier socket stayed in C (UDP port ${port:-?} is bound there)" ":${port:-none}\b" "$(in_c ss -uan)"
check_no_match "... and not in the namespace the interface went to" ":${port:-none}\b" "$(ip netns exec "$MOVED" ss -uan)"
ip -n "$MOVED" link del "$TGQ"
wait_for "the interface deleted there: the device exits" 10 bash -c "[ -z \"\$(pgrep -f 'tunnelgate wireguard --ready-fd 3 $TGQ\$')\" ]"
check "... and its UAPI socket is removed" test ! -e "/var/run/wireguard/$TGQ.sock"
tg_summary
