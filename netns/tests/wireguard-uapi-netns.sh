#!/usr/bin/env bash
# The built-in WireGuard's API socket when one tunnel name is used in two network namespaces: wg(8)
# looks in the one directory /var/run/wireguard for every namespace, so the first tunnel of a name
# takes NAME.sock and a second one, in another namespace, NAME@INODE.sock (docs/wireguard.md).
#
# Asserted: both tunnels come up under one name, in C and in L, and carry traffic to each other; wg(8)
# reaches each (its public key, a `wg set` that lands on that one only); `wg show interfaces` lists
# both; `down` of either removes its own socket only; after the second is SIGKILLed, `down` removes its
# socket; a second tunnel of the name in the same namespace is refused and changes nothing.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"

NAME=tgs$((RANDOM % 100000))
tg_begin --needs wg
L_INODE=$(stat -L -c %i "/run/netns/$NS_L")
# The alias: NAME@ and L's inode in base 36, NAME cut so that the whole is 15 characters at most.
L_ID=$(python3 -c 'import sys; n = int(sys.argv[1]); d = ""
while n: n, r = divmod(n, 36); d = "0123456789abcdefghijklmnopqrstuvwxyz"[r] + d
print(d)' "$L_INODE")
ALIAS=${NAME:0:$((15 - 1 - ${#L_ID}))}@$L_ID
tg_defer rm -f "/var/run/wireguard/$NAME.sock" "/var/run/wireguard/$ALIAS.sock"

umask 077
wg genkey >"$TG_TMP/c.key"; wg pubkey <"$TG_TMP/c.key" >"$TG_TMP/c.pub"
wg genkey >"$TG_TMP/l.key"; wg pubkey <"$TG_TMP/l.key" >"$TG_TMP/l.pub"
wg genkey | wg pubkey >"$TG_TMP/x.pub"
mkdir -p "$TG_TMP/c" "$TG_TMP/l"
cat >"$TG_TMP/c/$NAME.conf" <<CONF
[Interface]
PrivateKey = $(cat "$TG_TMP/c.key")
Address = 10.70.0.1/24
ListenPort = 51821

[Peer]
PublicKey = $(cat "$TG_TMP/l.pub")
Endpoint = $LAN4:51820
AllowedIPs = 10.70.0.2/32
CONF
cat >"$TG_TMP/l/$NAME.conf" <<CONF
[Interface]
PrivateKey = $(cat "$TG_TMP/l.key")
Address = 10.70.0.2/24
ListenPort = 51820

[Peer]
PublicKey = $(cat "$TG_TMP/c.pub")
AllowedIPs = 10.70.0.1/32
CONF

tg_run in_c "$TG" up "$TG_TMP/c/$NAME.conf" --detach
check_rc "tunnelgate up $NAME in C" 0
check "C's tunnel took /var/run/wireguard/$NAME.sock" test -S "/var/run/wireguard/$NAME.sock"
tg_run in_l "$TG" up "$TG_TMP/l/$NAME.conf" --detach
check_rc "tunnelgate up $NAME in L too (same name, another namespace)" 0
check "L's tunnel took /var/run/wireguard/$ALIAS.sock" test -S "/var/run/wireguard/$ALIAS.sock"
check_match "... and its log says how wg(8) reaches it" "wg\\(8\\) reaches this one as $ALIAS" \
  "$(cat "/run/tunnelgate/net-$L_INODE/$NAME.log" 2>&1)"
check_ping "C pings L through the tunnel" "$NS_C" 10.70.0.2
check_eq "wg show $NAME is C's tunnel" "$(cat "$TG_TMP/c.pub")" "$(wg show "$NAME" public-key)"
check_eq "wg show $ALIAS is L's" "$(cat "$TG_TMP/l.pub")" "$(wg show "$ALIAS" public-key)"
check_match "wg show interfaces lists both" "(^| )$NAME( .*)? $ALIAS( |$)|(^| )$ALIAS( .*)? $NAME( |$)" \
  "$(wg show interfaces)"
tg_run wg set "$ALIAS" peer "$(cat "$TG_TMP/x.pub")" allowed-ips 10.71.0.0/24
check_rc "wg set on $ALIAS" 0
check_match "... lands on L's tunnel" "10.71.0.0/24" "$(wg show "$ALIAS" allowed-ips)"
check_no_match "... and not on C's" "10.71.0.0/24" "$(wg show "$NAME" allowed-ips)"

# A second tunnel of the name in C's own namespace is refused, and C's tunnel and socket stay.
cp "$TG_TMP/c/$NAME.conf" "$TG_TMP/c2.conf"
sed -i 's/^ListenPort = 51821/ListenPort = 51829/' "$TG_TMP/c2.conf"
mkdir -p "$TG_TMP/c2"; mv "$TG_TMP/c2.conf" "$TG_TMP/c2/$NAME.conf"
tg_run in_c "$TG" up "$TG_TMP/c2/$NAME.conf" --detach
check_rc_nonzero "a second $NAME in C is refused"
check_match "... naming the tunnel that runs" "$NAME" "$TG_ERR"
check_eq "... C's tunnel still answers wg(8)" "$(cat "$TG_TMP/c.pub")" "$(wg show "$NAME" public-key)"
check_eq "... and no other socket of the name was left" "$NAME.sock $ALIAS.sock" \
  "$(cd /var/run/wireguard && ls -1 -- "$NAME".sock "${ALIAS%@*}"@*.sock 2>/dev/null | paste -sd ' ')"

# down of L's removes L's socket only.
tg_run in_l "$TG" down "$NAME"
check_rc "tunnelgate down $NAME in L" 0
check_fails "L's socket is gone" test -e "/var/run/wireguard/$ALIAS.sock"
check_eq "C's still answers" "$(cat "$TG_TMP/c.pub")" "$(wg show "$NAME" public-key)"

# L's tunnel killed (engine and plane): `down` removes what it left, its socket included.
tg_run in_l "$TG" up "$TG_TMP/l/$NAME.conf" --detach
check_rc "L's tunnel up again (C's still holds the name)" 0
check "... on $ALIAS.sock again" test -S "/var/run/wireguard/$ALIAS.sock"
pids=$(in_l "$TG" status "$NAME" --json | jq -r '[.pid, .planePID] | map(select(. != null)) | join(" ")')
kill -9 $pids
wait_for "L's engine and plane are gone" 5 bash -c "! kill -0 ${pids// / 2>/dev/null \&\& ! kill -0 } 2>/dev/null"
tg_run in_l "$TG" down "$NAME"
check_rc "down $NAME in L after the kill" 0
check_fails "... removed L's socket" test -e "/var/run/wireguard/$ALIAS.sock"

tg_run in_c "$TG" down "$NAME"
check_rc "tunnelgate down $NAME in C" 0
check_fails "C's socket is gone" test -e "/var/run/wireguard/$NAME.sock"
tg_summary
