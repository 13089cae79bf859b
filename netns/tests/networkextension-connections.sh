#!/usr/bin/env bash
# networkextension-connections: a provider's own connections (Examples/connections-provider-example,
# written as iOS code is) while its tunnel is up with includeAllNetworks (the kill switch) in C:
# createTCPConnection with TLS to a server in I with its own CA (by name, and by IPv6 address) (made here, per run, and C's trust
# store: /etc/netns/C/ssl, which `ip netns exec` binds over /etc/ssl), the server's name verified; a
# wrong name and a server of another CA fail with the verification's error; createUDPSession to a UDP
# echo server; `state` and `isViable` watched with addObserver/observeValue (.initial, .new, .old) and
# observe(\.state). Host names are resolved with C's resolv.conf as it was when the provider started
# (dnsmasq at $EXCLUDED4, a carrier for port 53/udp), not the tunnel's DNS (10.8.0.53, which the engine
# writes into that resolv.conf). Bypass, as on iOS: the provider's connections to $INCLUDED4, which is no
# carrier endpoint (TLS :8443, UDP echo :5300), leave outside the tunnel too, from C's physical address
# (the servers see $C_ETH0_4), past the kill switch; the engine's rules for it are `uidrange U-U goto`
# and nftables `meta skuid U accept`. Leaks: while up, what left C's eth0 was only the plane's uid; a
# process of another uid in C cannot reach the same servers (its SYNs go into the TUN, none arrives);
# after SIGTERM, and after SIGKILL of host and plane then `tunnelgate down`, ip rule and the nft ruleset
# are as before.
#
#   C ── connections-provider-example ── tgc (10.8.0.2/24, default route, kill switch, DNS 10.8.0.53)
#   │ eth0: only the plane's uid: to $CARRIER4 (TLS 8443, 8444; UDP echo 5300), [$CARRIER6]:8443,
#   │       $EXCLUDED4:53/udp, and $INCLUDED4 (TLS 8443, UDP echo 5300: no carrier)
#   R
#   │
#   I  $CARRIER4: openssl s_server -rev :8443 (vpn.test, CA A), :8444 (vpn.test, CA B); UDP echo :5300
#      $CARRIER6: openssl s_server -rev :8443 (the same certificate: IP:$CARRIER6 too)
#      $INCLUDED4: openssl s_server -rev :8443 (the same certificate: IP:$INCLUDED4 too); UDP echo :5300
#      $EXCLUDED4: dnsmasq (vpn.test, wrong.test, echo.test → $CARRIER4)
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
PROVIDER=${TG_CONNECTIONS_PROVIDER_EXAMPLE:-$TG_ROOT/.build/debug/connections-provider-example}
[ -x "$PROVIDER" ] || tg_bail "the example provider is built at $PROVIDER" "build it with: swift build"
tg_begin --needs openssl,dnsmasq,setpriv

# --- Two CAs, a server certificate for vpn.test from each --------------------------------------------
pki=$TG_TMP/pki
mkdir -p "$pki"
for ca in a b; do
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=Tunnelgate test CA $ca $RANDOM" \
    -keyout "$pki/ca-$ca.key" -out "$pki/ca-$ca.pem" >/dev/null 2>&1 || tg_bail "openssl: CA $ca"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=vpn.test" \
    -keyout "$pki/server-$ca.key" -out "$pki/server-$ca.csr" >/dev/null 2>&1 || tg_bail "openssl: server key $ca"
  printf 'subjectAltName=DNS:vpn.test,IP:%s,IP:%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' "$CARRIER6" "$INCLUDED4" >"$pki/ext"
  openssl x509 -req -in "$pki/server-$ca.csr" -CA "$pki/ca-$ca.pem" -CAkey "$pki/ca-$ca.key" -CAcreateserial -days 1 \
    -extfile "$pki/ext" -out "$pki/server-$ca.pem" >/dev/null 2>&1 || tg_bail "openssl: server certificate $ca"
done

# C's view of /etc: its resolver (dnsmasq in I) and its trust store (CA A only).
mkdir -p "/etc/netns/$NS_C/ssl/certs"
tg_defer rm -rf "/etc/netns/$NS_C"
printf 'nameserver %s\n' "$EXCLUDED4" >"/etc/netns/$NS_C/resolv.conf"
cp "$pki/ca-a.pem" "/etc/netns/$NS_C/ssl/certs/ca-certificates.crt"
tg_snapshot "$NS_C" "$TG_TMP/before"
check_eq "C's trust store is CA A (ip netns exec binds /etc/netns/C/ssl over /etc/ssl)" \
  "$(cat "$pki/ca-a.pem")" "$(ip netns exec "$NS_C" cat /etc/ssl/certs/ca-certificates.crt 2>&1)"

# --- The servers in I ------------------------------------------------------------------------------------
tg_dnsmasq "$NS_I" "$EXCLUDED4" --address=/vpn.test/"$CARRIER4" --address=/wrong.test/"$CARRIER4" \
  --address=/echo.test/"$CARRIER4" --log-queries --log-facility="$TG_TMP/dns.log"
for server in "a $CARRIER4:8443" "b $CARRIER4:8444" "a [$CARRIER6]:8443" "a $INCLUDED4:8443"; do
  read -r ca accept <<<"$server"
  ip netns exec "$NS_I" openssl s_server -accept "$accept" -cert "$pki/server-$ca.pem" -key "$pki/server-$ca.key" \
    -rev -quiet >>"$TG_TMP/tls-$ca.log" 2>&1 </dev/null &
  tg_defer kill $!
done
for echo in "$CARRIER4 udp" "$INCLUDED4 udp-included"; do
  read -r address name <<<"$echo"
  ip netns exec "$NS_I" python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 5300))
while True:
    data, peer = s.recvfrom(65535)
    print(peer[0], data.decode(errors="replace"), flush=True)
    s.sendto(data, peer)
' "$address" >"$TG_TMP/$name.log" 2>&1 &
  tg_defer kill $!
done
listening() { grep -q "$(tg_re "$1") " <<<"$(ip netns exec "$NS_I" ss -lntuH)"; }
wait_for "the TLS servers and the UDP echo server listen in I" 10 \
  bash -c "$(declare -f tg_re listening); NS_I=$NS_I; listening $CARRIER4:8443 && listening $CARRIER4:8444 && listening [$CARRIER6]:8443 && listening $CARRIER4:5300 && listening $INCLUDED4:8443 && listening $INCLUDED4:5300"

# Connection attempts that arrive at the TLS servers' ports (SYNs, in I's input hook), and those of them
# from C's physical address.
ip netns exec "$NS_I" nft -f - <<EOT || tg_bail "nft: SYN counters in I"
table inet tgconn {
  chain input {
    type filter hook input priority 0; policy accept;
    ip daddr $CARRIER4 tcp dport 8443 tcp flags & (syn | ack) == syn counter comment "carrier"
    ip daddr $INCLUDED4 tcp dport 8443 tcp flags & (syn | ack) == syn counter comment "included"
    ip saddr $C_ETH0_4 ip daddr $INCLUDED4 tcp dport 8443 tcp flags & (syn | ack) == syn counter comment "included-physical"
  }
}
EOT
syns() { ip netns exec "$NS_I" nft list chain inet tgconn input | sed -n "s/.*counter packets \([0-9]*\).*comment \"${1:-carrier}\".*/\1/p"; }

# The control: without the tunnel, uid 65534 in C reaches the servers (so its failure below is the tunnel's).
other_connects() {
  ip netns exec "$NS_C" setpriv --reuid 65534 --regid 65534 --clear-groups -- /usr/bin/python3 -c "
import socket
socket.create_connection(('${1:-$CARRIER4}', 8443), timeout=2).close()"
}
check "before the tunnel, a process of uid 65534 in C connects to $CARRIER4:8443" other_connects
check "before the tunnel, a process of uid 65534 in C connects to $INCLUDED4:8443" other_connects "$INCLUDED4"
syns_before=$(syns) included_before=$(syns included) physical_before=$(syns included-physical)
ip -n "$NS_C" rule show >"$TG_TMP/rules-before"
ip netns exec "$NS_C" nft list tables >"$TG_TMP/nft-before"

# --- The provider --------------------------------------------------------------------------------------------
tg_plane_test_hooks TG_CONN_TLS TG_CONN_UDP TG_CONN_SERVER TG_CONN_LOG
export TG_CONN_TLS="vpn.test:8443,wrong.test:8443,vpn.test:8444,[$CARRIER6]:8443,$INCLUDED4:8443" TG_CONN_UDP="echo.test:5300,$INCLUDED4:5300" \
  TG_CONN_SERVER=$CARRIER4 TG_CONN_LOG=$TG_HOOKS/connections.log
events=$TG_CONN_LOG
tg_lab_leaks_reset
ip netns exec "$NS_C" "$PROVIDER" --name tgc --include-all-networks --carrier "$EXCLUDED4:53/udp" --carrier "[$CARRIER6]:8443/tcp" >"$TG_TMP/provider.log" 2>&1 &
provider_pid=$!
stop_provider() { kill "$provider_pid" 2>/dev/null || true; }
tg_defer stop_provider
tgc_connected() { grep -q '"status" *: *"connected"' "$(tg_state_dir "$NS_C")/tgc.state" 2>/dev/null; }
wait_for "the provider's tunnel tgc is connected" 20 tgc_connected
have() { grep -qxF -- "$1" "$events"; }
wait_for "TLS to vpn.test:8443 (CA A): the reply to 'hello tunnelgate' (the server reverses the line)" 20 \
  have "tcp vpn.test:8443 reply etaglennut olleh"
wait_for "TLS to the address literal [$CARRIER6]:8443 (a carrier; checked against the certificate's IP address entry) answers" 20 \
  have "tcp [$CARRIER6]:8443 reply etaglennut olleh"
wait_for "a wrong name (wrong.test, the certificate says vpn.test) fails with the verification's error" 20 \
  grep -qE '^tcp wrong\.test:8443 error NSOSStatusErrorDomain -9807: .*certificate verification failed: [Hh]ostname mismatch' "$events"
wait_for "a server of another CA (vpn.test:8444, CA B) fails with the verification's error" 20 \
  grep -qE '^tcp vpn\.test:8444 error NSOSStatusErrorDomain -9807: .*certificate verification failed: unable to get local issuer certificate' "$events"
wait_for "TLS to $INCLUDED4:8443, no carrier endpoint, answers: the provider's connections bypass the tunnel, as on iOS" 20 \
  have "tcp $INCLUDED4:8443 reply etaglennut olleh"
wait_for "UDP: the three datagrams come back from the echo server" 20 \
  bash -c "grep -qxF 'udp echo.test:5300 echo one' '$events' && grep -qxF 'udp echo.test:5300 echo two' '$events' && grep -qxF 'udp echo.test:5300 echo three' '$events'"
wait_for "UDP to $INCLUDED4:5300, no carrier endpoint: the three datagrams come back too" 20 \
  bash -c "grep -qxF 'udp $INCLUDED4:5300 echo one' '$events' && grep -qxF 'udp $INCLUDED4:5300 echo two' '$events' && grep -qxF 'udp $INCLUDED4:5300 echo three' '$events'"

# KVO: the order of what the observers heard.
# A connection that is connected before the provider's addObserver calls return is reported so by
# .initial (iOS's connections race their observers the same way); each form is whole and ordered.
heard=$(grep -E '^tcp vpn\.test:8443 (state|isViable)' "$events")
full="tcp vpn.test:8443 state initial->1
tcp vpn.test:8443 isViable true
tcp vpn.test:8443 state 1->3
tcp vpn.test:8443 isViable false
tcp vpn.test:8443 state 3->4"
late="tcp vpn.test:8443 isViable true
tcp vpn.test:8443 state initial->3
tcp vpn.test:8443 isViable false
tcp vpn.test:8443 state 3->4"
later="tcp vpn.test:8443 state initial->3
tcp vpn.test:8443 isViable false
tcp vpn.test:8443 state 3->4"
check "state observed with .initial/.new/.old: initial connecting, then connected (1→3) with isViable true before it, then disconnected (3→4) with isViable false before it (or connected already at .initial)" \
  bash -c "[ \"\$1\" = \"\$2\" ] || [ \"\$1\" = \"\$3\" ] || [ \"\$1\" = \"\$4\" ] || { printf 'heard:\n%s\n' \"\$1\"; false; }" _ "$heard" "$full" "$late" "$later"
check_eq "a failed connection goes connecting→disconnected (1→4) and never connected" \
  "tcp wrong.test:8443 state initial->1
tcp wrong.test:8443 state 1->4" "$(grep -E '^tcp wrong\.test:8443 (state|isViable)' "$events")"
check_match "remoteAddress is the server's address; isViable true while connected" \
  "^tcp vpn\.test:8443 remote $(tg_re "$CARRIER4"):8443 viable true$" "$(cat "$events")"
check_eq "observe(\\.state, [.initial, .new]) on the UDP session: preparing (2), then ready (3)" \
  "udp echo.test:5300 state 2
udp echo.test:5300 state 3" "$(grep -E '^udp echo\.test:5300 state' "$events")"
check "writeMultipleDatagrams completed without an error" have "udp echo.test:5300 written ok"

# Where the names were resolved: the namespace's resolver as it was, not the tunnel's DNS.
check_match "the engine applied the tunnel's DNS: C's resolv.conf names 10.8.0.53 now" \
  '^nameserver 10\.8\.0\.53$' "$(cat "/etc/netns/$NS_C/resolv.conf")"
check_match "vpn.test, wrong.test and echo.test were asked of dnsmasq at $EXCLUDED4 (the resolver before the tunnel), from C" \
  "query\[A\] echo\.test from $(tg_re "$C_ETH0_4")" "$(cat "$TG_TMP/dns.log")"
check_match "… vpn.test too" "query\[A\] vpn\.test from $(tg_re "$C_ETH0_4")" "$(cat "$TG_TMP/dns.log")"
check_match "the UDP echo server saw the datagrams from C's address" "^$(tg_re "$C_ETH0_4") three$" "$(cat "$TG_TMP/udp.log")"
check_eq "the UDP echo server at $INCLUDED4 saw the three datagrams from C's physical address $C_ETH0_4 (not the tunnel's 10.8.0.2)" \
  "$C_ETH0_4 one|$C_ETH0_4 two|$C_ETH0_4 three" "$(paste -sd'|' "$TG_TMP/udp-included.log")"
check_eq "the TLS server at $INCLUDED4 saw one connection, from C's physical address $C_ETH0_4" \
  "1 1" "$(($(syns included) - included_before)) $(($(syns included-physical) - physical_before))"

# --- Only the carrier identity got out ----------------------------------------------------------------------
uid=$(tg_plane_uid "$NS_C" tgc)
check_match "the provider's plane has a uid of its own (the carrier identity)" '^[0-9]+$' "$uid"
plane_pid=$(pgrep -u "$uid" -f connections-provider-example | head -n 1)
status_of() { awk -v k="$1:" '$1 == k { $1 = ""; print substr($0, 2) }' "/proc/$plane_pid/status" 2>&1; }
check_eq "the connections were made in the provider's sandboxed plane (pid ${plane_pid:-none}): uid $uid, no capability, no_new_privs, a seccomp filter" \
  "$uid $uid $uid $uid|0000000000000000|1|2" "$(status_of Uid)|$(status_of CapEff)|$(status_of NoNewPrivs)|$(status_of Seccomp)"
# The engine's exemption for the provider's plane: any destination, by its uid.
check_match "ip rule: the plane's uid jumps past the tunnel's lookup to any destination (uidrange, no 'to')" \
  "^7403:[[:space:]]+from all uidrange $uid-$uid goto 7406" "$(ip -n "$NS_C" rule show)"
check_match "nft: the kill switch accepts the plane's uid, to any address" \
  "meta skuid $uid (counter packets [0-9]+ bytes [0-9]+ )?accept comment \"tunnelgate:tgc carrier\"" "$(ip netns exec "$NS_C" nft list chain inet tunnelgate-tgc output 2>&1)"
check_match "nft: the plane's connections keep the tunnel's mark for their replies (carrier-save)" \
  "meta skuid $uid (counter packets [0-9]+ bytes [0-9]+ )?ct mark set 0x00001d24" "$(ip netns exec "$NS_C" nft list chain inet tunnelgate-tgc carrier-save 2>&1)"
tg_run ip netns exec "$NS_C" "$TG" status tgc
check_match "status prints the exemption: the plane's uid to any address" \
  "carrier exemption: packets of uid $uid \(the provider's packet plane\) to any address, outside the tunnel" "$TG_OUT"
check_match "the kernel routes the plane's uid to $INCLUDED4 by C's eth0 (the namespace's own route)" \
  "dev eth0 .*uid $uid" "$(ip -n "$NS_C" route get "$INCLUDED4" uid "$uid" 2>&1)"
check_match "… and uid 65534 to $INCLUDED4 into the tunnel (dev tgc, table 7460)" \
  "dev tgc table 7460 .*uid 65534" "$(ip -n "$NS_C" route get "$INCLUDED4" uid 65534 2>&1)"
check_fails "with the tunnel up, the same process cannot connect to $CARRIER4:8443 (its SYN goes into the tunnel)" other_connects
check_fails "… nor to $INCLUDED4:8443" other_connects "$INCLUDED4"
check_eq "… and no SYN of it reached the server: two connections arrived at $CARRIER4:8443 (vpn.test and wrong.test, the provider's)" \
  $((syns_before + 2)) "$(syns)"
check_eq "… nor at $INCLUDED4:8443: only the provider's one" $((included_before + 1)) "$(syns included)"
check_lab_no_leaks "while up: only the plane's uid ($uid) left C (to the carriers and to $INCLUDED4); nothing else did" \
  --carrier "$CARRIER4:8443/tcp" --carrier "$CARRIER4:8444/tcp" --carrier "$CARRIER4:5300/udp" \
  --carrier "$EXCLUDED4:53/udp" --carrier "[$CARRIER6]:8443/tcp" \
  --carrier "$INCLUDED4:8443/tcp" --carrier "$INCLUDED4:5300/udp" --uid "$uid"
tg_lab leaks show >"$TG_TMP/leaks" 2>&1
check_match "… and the plane's packets did leave C's eth0 to the TLS server, counted by uid $uid" \
  "^by-uid tcp $(tg_re "$C_ETH0_4"):[0-9]+ -> $(tg_re "$CARRIER4"):8443 packets [1-9][0-9]* uid $uid " "$(cat "$TG_TMP/leaks")"
check_match "… and to $INCLUDED4:8443 (no carrier), counted by uid $uid" \
  "^by-uid tcp $(tg_re "$C_ETH0_4"):[0-9]+ -> $(tg_re "$INCLUDED4"):8443 packets [1-9][0-9]* uid $uid " "$(cat "$TG_TMP/leaks")"
check_match "… and to $INCLUDED4:5300/udp (no carrier), counted by uid $uid" \
  "^by-uid udp $(tg_re "$C_ETH0_4"):[0-9]+ -> $(tg_re "$INCLUDED4"):5300 packets [1-9][0-9]* uid $uid " "$(cat "$TG_TMP/leaks")"
check_match "… and its DNS queries to $EXCLUDED4:53" \
  "^by-uid udp $(tg_re "$C_ETH0_4"):[0-9]+ -> $(tg_re "$EXCLUDED4"):53 packets [1-9][0-9]* uid $uid " "$(cat "$TG_TMP/leaks")"
check_no_match "… and nothing of uid 65534 left C" "uid 65534 " "$(cat "$TG_TMP/leaks")"

kill -TERM "$provider_pid"
wait "$provider_pid"
check_eq "the host exits 0 after SIGTERM" 0 "$?"
check_eq "C's resolv.conf is the resolver before the tunnel again" "nameserver $EXCLUDED4" "$(cat "/etc/netns/$NS_C/resolv.conf")"
tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "C's kernel state after SIGTERM equals the state before start" "$TG_TMP/before" "$TG_TMP/after"
check_eq "ip rule after SIGTERM equals ip rule before" "$(cat "$TG_TMP/rules-before")" "$(ip -n "$NS_C" rule show)"
# (the snapshots compare the whole ruleset too, but for the lab's leak-set elements)
check_eq "nft list tables after SIGTERM equals the tables before" "$(cat "$TG_TMP/nft-before")" "$(ip netns exec "$NS_C" nft list tables)"

# --- SIGKILL of the host and its plane, then `tunnelgate down` ---------------------------------------------
rm -f "$events"  # the second plane may run as another uid (another scenario held the first): it makes the file anew
ip netns exec "$NS_C" "$PROVIDER" --name tgc --include-all-networks --carrier "$EXCLUDED4:53/udp" --carrier "[$CARRIER6]:8443/tcp" >"$TG_TMP/provider2.log" 2>&1 &
provider_pid=$!
wait_for "the provider's tunnel tgc is connected again" 20 tgc_connected
wait_for "… and its TLS to $INCLUDED4:8443 answers again" 20 have "tcp $INCLUDED4:8443 reply etaglennut olleh"
uid=$(tg_plane_uid "$NS_C" tgc)
provider_pids=$(for pid in $(ip netns pids "$NS_C"); do
  [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$(readlink -f "$PROVIDER")" ] && echo "$pid"; done)
# shellcheck disable=SC2086  # one pid a word
kill -KILL $provider_pids; wait "$provider_pid" 2>/dev/null
check_match "after SIGKILL the plane's exemption rule is still there (nobody removed it)" \
  "uidrange $uid-$uid goto" "$(ip -n "$NS_C" rule show)"
check "… and the kill switch table" ip netns exec "$NS_C" nft list table inet tunnelgate-tgc
tg_run ip netns exec "$NS_C" "$TG" down tgc
check_eq "tunnelgate down recovers the killed tunnel" 0 "$TG_RC"
check_eq "ip rule after SIGKILL + down equals ip rule before" "$(cat "$TG_TMP/rules-before")" "$(ip -n "$NS_C" rule show)"
check_eq "nft list tables after SIGKILL + down equals the tables before" "$(cat "$TG_TMP/nft-before")" "$(ip netns exec "$NS_C" nft list tables)"
tg_snapshot "$NS_C" "$TG_TMP/after-kill"
check_same_snapshot "C's kernel state after SIGKILL + down equals the state before start" "$TG_TMP/before" "$TG_TMP/after-kill"
if [ "$TG_FAILED" -ne 0 ]; then
  _tg_detail "provider log:" "$(cat "$TG_TMP/provider.log")"
  _tg_detail "events:" "$(cat "$events" 2>&1)"
  _tg_detail "dns log:" "$(cat "$TG_TMP/dns.log" 2>&1)"
fi
tg_summary
