# Examples/lab/scenarios/leaks.sh: does anything leak from a VPN client at connect, while it is up,
# while its carrier flaps, while it restarts, when it is SIGKILLed; is the client left as it was
# after down? Run with: tunnelgate-lab run Examples/lab/scenarios/leaks.sh (LAB_* variables: common.sh).
#
#   client ──uplink── router ──wan── internet ── carrier (the VPN server)
#                                            └── included (the probe's target)
# Every phase resets the router's counters; expect-no-leaks lists every 5-tuple that left the
# client's links and was not a carrier.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

lab snapshot client --out "$TUNNELGATE_LAB_WORK/before.snapshot" >/dev/null
server_up

phase up
client "$LAB_CLIENT_UP"
lab_wait 20 tunnel_works
expect reach client "$LAB_TUNNEL_CHECK" --name "the tunnel carries traffic after connect"
expect-no-leaks "${carriers[@]}" --name "nothing but the carrier leaves while connecting"

phase steady
probe_burst
expect-no-leaks "${carriers[@]}" --name "nothing but the carrier leaves while connected"

phase flap
probe_background
lab impair uplink down >/dev/null
lab_wait 5 in_node client grep -qx 0 /sys/class/net/eth0/carrier
expect carrier client eth0 off
lab impair uplink up >/dev/null
lab_wait 5 in_node client grep -qx 1 /sys/class/net/eth0/carrier
expect carrier client eth0 on
lab_wait 30 tunnel_works
probe_stop
expect reach client "$LAB_TUNNEL_CHECK" --name "the tunnel carries traffic again after the flap"
expect-no-leaks "${carriers[@]}" --name "nothing but the carrier leaves while the carrier flaps"

phase restart
probe_background
client "$LAB_CLIENT_RESTART"
lab_wait 30 tunnel_works
probe_stop
expect reach client "$LAB_TUNNEL_CHECK" --name "the tunnel carries traffic after the restart"
expect-no-leaks "${carriers[@]}" --name "nothing but the carrier leaves while the client restarts"

phase crash
if [ -n "${LAB_CLIENT_PROCESS:-}" ]; then
  lab kill client "$LAB_CLIENT_PROCESS" --signal KILL >/dev/null
  probe_burst
  expect-no-leaks "${carriers[@]}" --name "nothing leaves after $LAB_CLIENT_PROCESS is SIGKILLed"
fi

phase down
client "$LAB_CLIENT_DOWN" || note "the down command failed"
lab snapshot client --out "$TUNNELGATE_LAB_WORK/after.snapshot" >/dev/null
expect same-snapshot "$TUNNELGATE_LAB_WORK/before.snapshot" "$TUNNELGATE_LAB_WORK/after.snapshot" \
  --name "the client is left as it was before connect"
