# Examples/lab/scenarios/split-tunnel.sh: does split tunnelling route what it says? With the client
# connected, every address of LAB_INCLUDED is routed through LAB_TUNNEL_DEV and reached, every
# address of LAB_EXCLUDED leaves by the physical eth0 and is reached, and nothing but the carrier
# and the excluded addresses leaves the client's links. (LAB_* variables: common.sh.)
#
#   client ──uplink── router ──wan── internet ─┬─ carrier   (VPN server)
#                                              ├─ included  198.18.30.30  2001:db8:30::30
#                                              └─ excluded  198.18.20.20  2001:db8:20::20
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
: "${LAB_TUNNEL_DEV:?set LAB_TUNNEL_DEV: the client's tunnel interface}"
LAB_INCLUDED=${LAB_INCLUDED:-198.18.30.30 2001:db8:30::30}
LAB_EXCLUDED=${LAB_EXCLUDED:-198.18.20.20 2001:db8:20::20}

server_up
phase up
client "$LAB_CLIENT_UP"
lab_wait 20 tunnel_works
expect reach client "$LAB_TUNNEL_CHECK" --name "the tunnel carries traffic"

phase steady
allow=()
for a in $LAB_INCLUDED; do
  expect route client "$a" "$LAB_TUNNEL_DEV"
  expect reach client "$a"
done
for a in $LAB_EXCLUDED; do
  expect route client "$a" eth0
  expect reach client "$a"
  case $a in *:*) allow+=(--allow "$a/128") ;; *) allow+=(--allow "$a/32") ;; esac
done
expect-no-leaks "${carriers[@]}" "${allow[@]}" --name "only the carrier and the excluded hosts leave the client's links"

phase down
client "$LAB_CLIENT_DOWN" || note "the down command failed"
