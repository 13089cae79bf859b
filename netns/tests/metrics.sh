#!/usr/bin/env bash
# `tunnelgate metrics` scraped by a real Prometheus (Debian's package), with a real tunnel: the built-in
# WireGuard in C against wireguard-go in L, across the router R.
#
#   C  tunnelgate "tgmNNN"   10.70.0.1   UDP 10.231.0.2:51821 (timers scaled 0.05: rekey after 6 s)
#      tunnelgate metrics    127.0.0.1:9587 (C's loopback; the default address)
#      prometheus            127.0.0.1:9090, scraping 127.0.0.1:9587 every second; config, data and
#                            log in $TG_TMP/prometheus
#   │ eth0 10.231.0.2
#   R  router                (reaches 10.231.0.2:9588 only when the collector is told --allow-non-loopback)
#   │ lan0
#   L  wireguard-go "wgmNNN" 10.70.0.2   UDP 192.168.231.2:51820
#      tunnelgate metrics --netns C / --all-namespaces, on L's loopback
#
# Asserted, through Prometheus's HTTP API (/api/v1/query) unless said otherwise: the target is up; the
# status is five series, connected 1; with traffic (ping) the TUN's bytes and packets rise both ways and
# so does the peer's transfer; the handshake age grows and resets at a rekey (the last-handshake time
# changes); a repair after deleting the tunnel's policy rule is counted; with C's default route gone the
# tunnel is reasserting for the carrier path (the runtime still says ready), with its last-reassert time
# recorded, and connected again once the route is back; hostile clients (20 silent connections, more
# than the collector keeps; one sending its request a byte at a time; one pipelining requests and never
# reading) do not stop the scrapes and are closed by the collector within its timeouts; after `down`
# the tunnel's series are gone. Directly: the exposition passes `promtool check metrics` (HELP, TYPE,
# names, label escaping); a non-loopback --listen is refused (exit 64, nothing listening) and served
# only with --allow-non-loopback; --netns and --all-namespaces name the tunnel's namespace; SIGTERM
# stops the collector.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"

TGM=tgm$((RANDOM % 100000))   # Tunnelgate's interface in C
WGM=wgm$((RANDOM % 100000))   # wireguard-go's in L
tg_defer rm -f "/var/run/wireguard/$TGM.sock" "/var/run/wireguard/$WGM.sock"
tg_begin --needs wireguard-go,wg,prometheus,promtool,curl,python3

PORT=9587        # the collector's default
PROM_PORT=9090
T="tunnel=\"$TGM\""   # the tunnel's label matcher, for PromQL

# --- The tunnel -------------------------------------------------------------------------------------------
umask 077
wg genkey >"$TG_TMP/c.key"; wg pubkey <"$TG_TMP/c.key" >"$TG_TMP/c.pub"
wg genkey >"$TG_TMP/l.key"; wg pubkey <"$TG_TMP/l.key" >"$TG_TMP/l.pub"
cat >"$TG_TMP/$TGM.conf" <<CONF
[Interface]
PrivateKey = $(cat "$TG_TMP/c.key")
Address = 10.70.0.1/24
ListenPort = 51821

[Peer]
PublicKey = $(cat "$TG_TMP/l.pub")
Endpoint = $LAN4:51820
AllowedIPs = 10.70.0.0/24
CONF
ip netns exec "$NS_L" env LOG_LEVEL=error wireguard-go -f "$WGM" >>"$TG_TMP/wireguard-go.log" 2>&1 &
wait_for "wireguard-go's API socket in L" 10 test -S "/var/run/wireguard/$WGM.sock"
in_l ip addr add 10.70.0.2/24 dev "$WGM"
in_l ip link set "$WGM" up
in_l wg set "$WGM" private-key "$TG_TMP/l.key" listen-port 51820 peer "$(cat "$TG_TMP/c.pub")" allowed-ips 10.70.0.1/32
tg_run in_c env TUNNELGATE_WIREGUARD_TEST_TIME_SCALE=0.05 "$TG" up "$TG_TMP/$TGM.conf" --detach
check_rc "tunnelgate up $TGM.conf (WireGuard, timers scaled 0.05)" 0
check_ping "ping 10.70.0.2 crosses the tunnel (C makes the first handshake)" "$NS_C" 10.70.0.2

# --- A non-loopback address is refused without the flag ------------------------------------------------------
listening() { grep -q . <<<"$(in_c ss -Hltn "( sport = :$1 )")"; }   # listening PORT: something listens in C
for addr in "$C_ETH0_4:9588" "0.0.0.0:9588" "[::]:9588" "[$C_ETH0_6]:9588"; do
  tg_run in_c "$TG" metrics --listen "$addr"
  check_rc "metrics --listen $addr is a usage error (exit 64)" 64
  check_match "... which says the address is not loopback and names the flag" \
    "not a loopback address.*--allow-non-loopback" "$TG_ERR"
done
check_fails "... and nothing listens on port 9588" listening 9588
# Started with ip netns exec itself (which execs), so that $! is the collector's own pid.
ip netns exec "$NS_C" "$TG" metrics --listen "$C_ETH0_4:9588" --allow-non-loopback 2>"$TG_TMP/open.log" &
open_pid=$!
wait_for "with --allow-non-loopback it listens on $C_ETH0_4:9588" 10 listening 9588
check_match "... and R, another host, reads the metrics there" "^tunnelgate_tunnel_status\{tunnel=\"$TGM\"" \
  "$(ip netns exec "$NS_R" curl -s --max-time 3 "http://$C_ETH0_4:9588/metrics")"
kill "$open_pid"; wait "$open_pid" 2>/dev/null

# --- The collector, read directly ------------------------------------------------------------------------------
ip netns exec "$NS_C" "$TG" metrics 2>"$TG_TMP/metrics.log" &
METRICS_PID=$!
scrape() { in_c curl -sf --max-time 3 "http://127.0.0.1:$PORT/metrics"; }
wait_for "tunnelgate metrics serves http://127.0.0.1:$PORT/metrics in C (the default address)" 10 scrape
tg_run in_c curl -s -D "$TG_TMP/headers" --max-time 3 "http://127.0.0.1:$PORT/metrics"
check_match "the answer is Prometheus's text format 0.0.4" "^Content-Type: text/plain; version=0.0.4" "$(tr -d '\r' <"$TG_TMP/headers")"
body=$TG_OUT
tg_run promtool check metrics <<<"$body"
check_eq "promtool check metrics finds nothing to complain about (HELP, TYPE, names, escaping)" "0:" "$TG_RC:$TG_OUT$TG_ERR"
check_eq "one status series per NEVPNStatus, connected 1" \
  "connected 1|connecting 0|disconnected 0|disconnecting 0|reasserting 0" \
  "$(sed -n "s/^tunnelgate_tunnel_status{tunnel=\"$TGM\",namespace=\"$NS_C\",status=\"\([a-z]*\)\"} \([01]\)$/\1 \2/p" <<<"$body" | LC_ALL=C sort | paste -sd '|')"
# The peer's line, found as a fixed string (a key is base64: +, / and =), with a handshake time: the
# owner publishes the runtime's status once a second, so the first handshake shows within about that.
handshake_served() {
  local lines
  lines=$(grep -F "peer=\"$(cat "$TG_TMP/l.pub")\"}" <<<"$(scrape)")
  grep -Eq "^tunnelgate_wireguard_peer_last_handshake_timestamp_seconds\{tunnel=\"$TGM\",namespace=\"$NS_C\",peer=\"[^\"]*\"\} [1-9][0-9]{9}$" <<<"$lines"
}
wait_for "the peer's last handshake is served under its public key (as a label value)" 5 handshake_served
check "the private key is not in the exposition" bash -c "! grep -qF -f '$TG_TMP/c.key' <<<\"\$1\"" _ "$body"

# --- Prometheus --------------------------------------------------------------------------------------------
mkdir -p "$TG_TMP/prometheus/data"
cat >"$TG_TMP/prometheus/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
scrape_configs:
  - job_name: tunnelgate
    static_configs:
      - targets: ["127.0.0.1:$PORT"]
YML
in_c prometheus --config.file="$TG_TMP/prometheus/prometheus.yml" --storage.tsdb.path="$TG_TMP/prometheus/data" \
  --web.listen-address="127.0.0.1:$PROM_PORT" >"$TG_TMP/prometheus/log" 2>&1 &
# prom EXPR: the result of an instant query; prom_value EXPR: its first sample's value (nothing when
# empty); prom_true EXPR: the query has a result (for a comparison: it held).
prom() { in_c curl -sf --max-time 3 --get --data-urlencode "query=$1" "http://127.0.0.1:$PROM_PORT/api/v1/query"; }
prom_value() { prom "$1" | jq -r '.data.result[0].value[1] // empty'; }
prom_true() { [ -n "$(prom_value "$1")" ]; }
wait_for "Prometheus is ready in C" 30 in_c curl -sf --max-time 2 "http://127.0.0.1:$PROM_PORT/-/ready"
wait_for "Prometheus scrapes the collector (up == 1)" 20 prom_true 'up{job="tunnelgate"} == 1'
wait_for "... and has the tunnel's status: five series, connected 1" 10 \
  prom_true "count(tunnelgate_tunnel_status{$T}) == 5 and sum(tunnelgate_tunnel_status{$T}) == 1 and on() tunnelgate_tunnel_status{$T,status=\"connected\"} == 1"
check_eq "the tunnel is in namespace $NS_C (label)" "$NS_C" "$(prom "tunnelgate_tunnel_status{$T}" | jq -r '.data.result[0].metric.namespace')"

# --- Traffic moves the counters --------------------------------------------------------------------------------
for m in interface_transmit_bytes interface_receive_bytes interface_transmit_packets interface_receive_packets \
         wireguard_peer_transmit_bytes wireguard_peer_receive_bytes; do
  declare "before_$m=$(prom_value "tunnelgate_${m}_total{$T}")"
done
check "Prometheus has the TUN's counters and the peer's transfer before the traffic" \
  test -n "$before_interface_transmit_bytes" -a -n "$before_wireguard_peer_receive_bytes"
check "200 pings of 1000 bytes cross the tunnel" in_c ping -q -n -c 200 -i 0.01 -s 1000 -W 1 10.70.0.2
wait_for "the TUN's transmit packets rise by at least 200 (host into the tunnel)" 10 \
  prom_true "tunnelgate_interface_transmit_packets_total{$T} >= $((before_interface_transmit_packets + 200))"
wait_for "... its transmit bytes by at least 200 × 1028" 10 \
  prom_true "tunnelgate_interface_transmit_bytes_total{$T} >= $((before_interface_transmit_bytes + 200 * 1028))"
wait_for "... its receive packets by at least 200 (the replies, tunnel to host)" 10 \
  prom_true "tunnelgate_interface_receive_packets_total{$T} >= $((before_interface_receive_packets + 200))"
wait_for "... its receive bytes by at least 200 × 1028" 10 \
  prom_true "tunnelgate_interface_receive_bytes_total{$T} >= $((before_interface_receive_bytes + 200 * 1028))"
wait_for "the peer's transmit bytes rise by at least 200 × 1028 (sealed datagrams are larger)" 10 \
  prom_true "tunnelgate_wireguard_peer_transmit_bytes_total{$T} >= $((before_wireguard_peer_transmit_bytes + 200 * 1028))"
wait_for "... and its receive bytes" 10 \
  prom_true "tunnelgate_wireguard_peer_receive_bytes_total{$T} >= $((before_wireguard_peer_receive_bytes + 200 * 1028))"
check "rate() over them is positive, as a dashboard would draw it" \
  prom_true "rate(tunnelgate_interface_transmit_bytes_total{$T}[15s]) > 0"

# --- The handshake age grows and resets at a rekey (6 s with the scaled timers, while traffic flows) ---------
in_c ping -q -n -c 100 -i 0.25 -W 1 10.70.0.2 >"$TG_TMP/rekey-ping.out" 2>&1 &
pinger=$!
wait_for "the handshake age resets (a rekey while traffic flows)" 30 \
  prom_true "resets(tunnelgate_wireguard_peer_handshake_age_seconds{$T}[1m]) > 0"
check "... after it had grown past 3 s" prom_true "max_over_time(tunnelgate_wireguard_peer_handshake_age_seconds{$T}[1m]) > 3"
check "... and the last-handshake time changed" \
  prom_true "changes(tunnelgate_wireguard_peer_last_handshake_timestamp_seconds{$T}[1m]) > 0"
wait "$pinger"
check_match "no ping was lost across the rekey" " 0% packet loss" "$(cat "$TG_TMP/rekey-ping.out")"

# --- A repair is counted ----------------------------------------------------------------------------------
check_eq "no repair so far" 0 "$(prom_value "tunnelgate_repairs_total{$T}")"
table=$(tg_tunnel_table "$NS_C" 4)
in_c ip -4 rule del not fwmark "$table" table "$table"
wait_for "deleting the tunnel's policy rule makes tunnelgate_repairs_total 1" 10 prom_true "tunnelgate_repairs_total{$T} == 1"

# --- The carrier path: reasserting for it, the time recorded, connected again -----------------------------------
check "the tunnel has not been reasserting yet: no last-reassert time" \
  prom_true "absent(tunnelgate_last_reassert_timestamp_seconds{$T})"
# Right after a handshake, so the runtime's session outlives the cut (it says ready meanwhile).
fresh_handshake() {
  in_c ping -n -c 1 -W 1 10.70.0.2 >/dev/null 2>&1
  in_c "$TG" message "$TGM" status | jq -e '.peers[0].latestHandshake > (now - 2)' >/dev/null
}
wait_for "a fresh handshake (under 2 s old) before the cut" 15 fresh_handshake
cut=$(date +%s)
in_c ip -4 route del default
wait_for "with C's default route gone, Prometheus sees the tunnel reasserting" 10 \
  prom_true "tunnelgate_tunnel_status{$T,status=\"reasserting\"} == 1"
check "... for the carrier path (the runtime still said ready)" \
  prom_true "max_over_time(tunnelgate_reasserting{$T,cause=\"carrier_path\"}[10s]) == 1"
check "... and the last-reassert time is the cut's (within 2 s)" \
  prom_true "tunnelgate_last_reassert_timestamp_seconds{$T} >= $((cut - 1)) and tunnelgate_last_reassert_timestamp_seconds{$T} <= $((cut + 3))"
tg_c_default_route 4
reconnected() { in_c ping -n -c 1 -W 1 10.70.0.2 >/dev/null 2>&1; prom_true "tunnelgate_tunnel_status{$T,status=\"connected\"} == 1"; }
wait_for "with the route back, connected again" 20 reconnected
check "... and no longer reasserting for any cause" prom_true "sum(tunnelgate_reasserting{$T}) == 0"

# --- Hostile clients do not stop the scrapes ------------------------------------------------------------------
server_connections() { in_c ss -Htn state established "( sport = :$PORT )" | wc -l; }
in_c python3 "$(dirname "$0")/metrics_clients.py" 127.0.0.1 "$PORT" 20 0.5 2000 16 >"$TG_TMP/clients.out" 2>&1 &
clients=$!
wait_for "20 silent connections, a trickling one and a non-reading one are open" 10 grep -q '^ready' "$TG_TMP/clients.out"
requests=$(prom_value "tunnelgate_metrics_requests_total")
wait_for "Prometheus's scrapes go on meanwhile (3 more answered)" 8 \
  prom_true "tunnelgate_metrics_requests_total >= $((requests + 3))"
check "... its target stays up" prom_true 'up{job="tunnelgate"} == 1'
check "... each scrape takes under half a second" prom_true 'max_over_time(scrape_duration_seconds{job="tunnelgate"}[5s]) < 0.5'
check "a curl of /metrics is answered within 2 s" in_c curl -sf --max-time 2 -o /dev/null "http://127.0.0.1:$PORT/metrics"
few_connections() { [ "$(server_connections)" -le 2 ]; }
wait_for "the collector closes them all within its 10 s timeouts (of its connections at most 2 are left)" 15 few_connections
wait "$clients"
result=$(grep '^{' "$TG_TMP/clients.out")
check_eq "all 20 silent connections were closed by the collector" 20 "$(jq -r .silent_closed <<<"$result")"
check "... the last within 12 s" jq -e '.silent_max_seconds <= 12' <<<"$result"
check "the trickling client was closed after 9–12 s although its bytes kept coming" \
  jq -e '.trickle_closed_seconds >= 9 and .trickle_closed_seconds <= 12' <<<"$result"
check "... before its request head was complete" jq -e '.trickle_bytes < .trickle_head_bytes' <<<"$result"
wait_for "the collector counts 22 closed by it (timeout or limit)" 5 \
  prom_true 'sum(tunnelgate_metrics_connections_closed_total{reason=~"timeout|limit"}) >= 22'
check "... among them connections dropped for the limit of 16" \
  prom_true 'tunnelgate_metrics_connections_closed_total{reason="limit"} >= 5'
check "Prometheus still scrapes it" prom_true 'up{job="tunnelgate"} == 1'

# --- Other namespaces -----------------------------------------------------------------------------------------
ip netns exec "$NS_L" "$TG" metrics --netns "$NS_C" 2>"$TG_TMP/metrics-l.log" &
l_pid=$!
scrape_l() { in_l curl -sf --max-time 3 "http://127.0.0.1:$PORT/metrics"; }
wait_for "in L, metrics --netns $NS_C serves" 10 scrape_l
check_match "... the tunnel of C, labelled with C's namespace" \
  "^tunnelgate_tunnel_status\{tunnel=\"$TGM\",namespace=\"$NS_C\",status=\"connected\"\} 1$" "$(scrape_l)"
check_no_match "... and nothing of L's own namespace" "namespace=\"$NS_L\"" "$(scrape_l)"
kill "$l_pid"
wait_for "... and stops on SIGTERM, freeing its port" 5 tg_exited "$l_pid"
ip netns exec "$NS_L" "$TG" metrics --all-namespaces 2>>"$TG_TMP/metrics-l.log" &
l_pid=$!
wait_for "in L, metrics --all-namespaces serves" 10 scrape_l
all=$(scrape_l)
check_match "... L's own namespace (up, no tunnels)" "^tunnelgate_tunnels\{namespace=\"$NS_L\"\} 0$" "$all"
check_match "... and C's tunnel" "^tunnelgate_tunnel_status\{tunnel=\"$TGM\",namespace=\"$NS_C\",status=\"connected\"\} 1$" "$all"
kill "$l_pid"; wait "$l_pid" 2>/dev/null
tg_run in_l "$TG" metrics --netns "no-such-ns-$$"
check_rc "metrics --netns of a namespace that does not exist fails (exit 1)" 1
check_match "... saying so" "no network namespace named no-such-ns-$$" "$TG_ERR"

# --- down: the tunnel's series go ---------------------------------------------------------------------------
tg_run in_c "$TG" down "$TGM"
check_rc "tunnelgate down $TGM" 0
wait_for "Prometheus sees no tunnel in C any more" 10 prom_true "tunnelgate_tunnels{namespace=\"$NS_C\"} == 0"
check "... and no status series of it" prom_true "absent(tunnelgate_tunnel_status{$T})"

kill -TERM "$METRICS_PID"
wait "$METRICS_PID"
check_eq "SIGTERM stops the collector (exit 0)" 0 "$?"
check_match "... which says so" "metrics: stopping \(signal 15\)" "$(cat "$TG_TMP/metrics.log")"
tg_summary
