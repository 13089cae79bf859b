# Examples/lab/scenarios/common.sh: what the shipped scenarios share. Sourced by them; they run
# under `tunnelgate-lab run` (docs/lab.md), on Examples/lab/vpn-client.json or a topology with the
# same node names (client, router, carrier, included, excluded) and links (uplink).
#
# The client under test is described by environment variables, so the scenarios test any client:
#   LAB_SERVER_UP       command run in node carrier before the client connects (start the VPN server)
#   LAB_CLIENT_UP       command run in node client that connects and returns (wg-quick up …, tunnelgate up … --detach)
#   LAB_CLIENT_DOWN     command run in node client that disconnects
#   LAB_CLIENT_RESTART  command run in node client that restarts the client (default: DOWN then UP)
#   LAB_CLIENT_PROCESS  the process name that SIGKILL hits in the crash phase (wireguard-go, tunnelgate)
#   LAB_CARRIERS        the carrier 5-tuples, space-separated: 198.18.10.10:51820/udp
#   LAB_TUNNEL_CHECK    an address reachable only through the tunnel (the server's tunnel address)
#   LAB_PROBE           an address the probe traffic goes to (default: the included host, 198.18.30.30)
: "${LAB_CLIENT_UP:?set LAB_CLIENT_UP: the command that connects the client}"
: "${LAB_CLIENT_DOWN:?set LAB_CLIENT_DOWN: the command that disconnects it}"
: "${LAB_CARRIERS:?set LAB_CARRIERS: the carrier 5-tuples (IP:PORT/udp)}"
: "${LAB_TUNNEL_CHECK:?set LAB_TUNNEL_CHECK: an address only the tunnel reaches}"
LAB_CLIENT_RESTART=${LAB_CLIENT_RESTART:-$LAB_CLIENT_DOWN; $LAB_CLIENT_UP}
LAB_PROBE=${LAB_PROBE:-198.18.30.30}
LAB_PROBE6=${LAB_PROBE6:-2001:db8:30::30}

carriers=()
for c in $LAB_CARRIERS; do carriers+=(--carrier "$c"); done

client() { in_node client sh -c "$1"; }
tunnel_works() { in_node client ping -n -c 1 -W 1 "$LAB_TUNNEL_CHECK"; }
# probe_burst: 20 echo requests to each probe address, 50 ms apart: traffic that must not leak.
probe_burst() {
  in_node client ping -n -q -c 20 -i 0.05 -W 1 "$LAB_PROBE" >/dev/null 2>&1
  in_node client ping -n -q -c 20 -i 0.05 -W 1 "$LAB_PROBE6" >/dev/null 2>&1
  return 0
}
# probe_background: echo requests every 20 ms (bounded: 60 s) while a transition happens; probe_stop ends it.
probe_background() {
  in_node_background client "$TUNNELGATE_LAB_WORK/probe4.log" ping -n -q -i 0.02 -w 60 "$LAB_PROBE"
  PROBE4=$!
  in_node_background client "$TUNNELGATE_LAB_WORK/probe6.log" ping -n -q -i 0.02 -w 60 "$LAB_PROBE6"
  PROBE6=$!
}
probe_stop() { kill "$PROBE4" "$PROBE6" 2>/dev/null; wait "$PROBE4" "$PROBE6" 2>/dev/null; return 0; }

server_up() {
  [ -n "${LAB_SERVER_UP:-}" ] || return 0
  in_node carrier sh -c "$LAB_SERVER_UP"
}
