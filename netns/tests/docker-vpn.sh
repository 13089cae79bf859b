#!/usr/bin/env bash
# The VPN container under dockerd (issue 17 point 6; container-vpn.sh is the Podman one): the image of
# Scripts/vpn-image.sh docker (docker import, HEALTHCHECK by --change, no registry) runs `tunnelgate up
# wg0` with --cap-add NET_ADMIN and --device /dev/net/tun only; a busybox container joins it with
# --network container:vpn.
#
#   C  dockerd (private to this run, --iptables=false), docker0 10.89.45.1/24: vpn (eth0 10.89.45.x, TUN
#      wg0 10.8.0.3, includeAllNetworks) and app (--network container:vpn: the same namespace)
#   R  router: routes 10.89.45.0/24 back to C; counts every packet from C that is not vpn's carrier
#   I  wireguard-go on 198.18.0.10:51820 (netns/containers.sh); $INCLUDED4 behind it
#
# Asserted: the image's entry point, health check and environment; vpn connects and dockerd's own health
# timer says healthy; app reaches $INCLUDED4 through the tunnel with R's leak counter at 0; the plane
# killed, app is cut off (leak counter still 0) and dockerd turns vpn unhealthy; `docker rm -f` leaves C
# as it was. Docker disables IPv6 in a container without --ipv6: the run enables it with --sysctl for
# the tunnel's IPv6 address, as docs/operations.md says.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../containers.sh"
started=$(_tg_now_ms)
budget=${TG_VPN_BUDGET:-280}
WGI=wgi$((RANDOM % 100000))
VPN_IMAGE=localhost/tunnelgate-vpn:test
tg_defer rm -f "/var/run/wireguard/$WGI.sock"
[ -x /usr/bin/docker ] && [ -x /bin/busybox ] || tg_bail "docker.io and busybox-static are installed" "Scripts/setup.sh"
[ -c /dev/net/tun ] || tg_bail "/dev/net/tun exists"
tg_begin --needs dockerd,wireguard-go,wg,mmdebstrap,dpkg-deb,python3
tg_defer tg_containers_down

tg_vpn_package

ip netns exec "$NS_C" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
ip -n "$NS_R" route add 10.89.45.0/24 via "$C_ETH0_4"
tg_vpn_container_config "$WGI"

tg_dockerd_start "$NS_C" 10.89.45.1/24
tg_docker_image
t0=$(_tg_now_ms)
tg_run bash "$TG_ROOT/Scripts/vpn-image.sh" docker "$VPN_IMAGE" --deb "$deb"
check_rc "Scripts/vpn-image.sh docker builds and imports the image ($(( ($(_tg_now_ms) - t0) / 1000 )) s)" 0 ||
  tg_bail "no VPN image" "$(printf '%s\n' "$TG_ERR" | tail -n 20)"
check_eq "its entry point, health check and environment" \
  '["/usr/lib/tunnelgate/container/entrypoint"] ["CMD","/usr/lib/tunnelgate/container/healthcheck"] ["TUNNELGATE_PLANE_MOUNT_NAMESPACE=off"]' \
  "$(tg_docker image inspect --format '{{json .Config.Entrypoint}} {{json .Config.Healthcheck.Test}} {{json .Config.Env}}' "$VPN_IMAGE" 2>&1)"

tg_docker run --rm --pull=never "$TG_IMAGE" true >/dev/null 2>&1
wait_for "docker0 has no port left" 10 tg_bridge_settled "$NS_C" docker0
tg_snapshot "$NS_C" "$TG_TMP/c-before"

tg_run tg_docker run -d --name vpn --pull=never --cap-add NET_ADMIN --device /dev/net/tun \
  --sysctl net.ipv4.conf.all.src_valid_mark=1 --sysctl net.ipv6.conf.all.disable_ipv6=0 \
  --sysctl net.ipv6.conf.default.disable_ipv6=0 -v "$ETC:/etc/tunnelgate:ro" "$VPN_IMAGE"
check_rc "docker run -d --name vpn --cap-add NET_ADMIN --device /dev/net/tun (no --privileged)" 0
vpn_pid=$(tg_docker inspect -f '{{.State.Pid}}' vpn 2>/dev/null)
vpn4=$(tg_docker inspect -f '{{.NetworkSettings.IPAddress}}' vpn 2>/dev/null)
[ -n "$vpn4" ] && [ "${vpn_pid:-0}" -gt 0 ] || tg_bail "the VPN container runs" "$(tg_docker logs vpn 2>&1 | tail -n 20)"
cap_eff=$(awk '/^CapEff/ { print $2 }' "/proc/$vpn_pid/status" 2>/dev/null)
check_eq "its engine has NET_ADMIN and no SYS_ADMIN (CapEff $cap_eff)" "1 0" \
  "$(( 0x${cap_eff:-200000} >> 12 & 1 )) $(( 0x${cap_eff:-200000} >> 21 & 1 ))"
in_vpn() { tg_docker exec vpn "$@"; }
connected() { [[ $(in_vpn /usr/sbin/tunnelgate status wg0 2>/dev/null) == "wg0: connected"* ]]; }
wait_for "the tunnel in the container connects" 20 connected || _tg_detail "$(tg_docker logs vpn 2>&1 | tail -n 20)"
health() { tg_docker inspect -f '{{.State.Health.Status}}' vpn 2>/dev/null; }
is_health() { [ "$(health)" = "$1" ]; }
wait_for "dockerd's health check says healthy (it runs every 10 s)" 25 is_health healthy

tg_lab_leak_declare --carrier "$CARRIER4:51820/udp@$vpn4:52003"
tg_run tg_docker run -d --name app --pull=never --network container:vpn "$TG_IMAGE" sleep 280
check_rc "docker run -d --name app --network container:vpn" 0
app_pid=$(tg_docker inspect -f '{{.State.Pid}}' app 2>/dev/null)
check_eq "app is in vpn's network namespace" "$(stat -L -c %i "/proc/$vpn_pid/ns/net" 2>&1)" \
  "$(stat -L -c %i "/proc/${app_pid:-0}/ns/net" 2>&1)"
tg_lab_leaks_reset
rx=$(tg_vpn_peer_rx)
check "app reaches $INCLUDED4" tg_docker exec app ping -c 1 -W 3 "$INCLUDED4"
check "... through the tunnel (the peer's RX $rx -> $(tg_vpn_peer_rx))" test "$(tg_vpn_peer_rx)" -gt "$rx"
check "the generator made its attempts in app's namespace" tg_leak_generate_in "/proc/$app_pid/ns/net"
check_lab_no_leaks "[docker, joined, connected: every way out of app] nothing left C's physical interfaces but the carrier 5-tuples"

plane=$(in_vpn /usr/sbin/tunnelgate status wg0 --json 2>/dev/null | jq -r '.planePID // empty')
tg_run in_vpn sh -c "kill -KILL ${plane:-none}"
check_rc "the packet plane (pid ${plane:-?} in the container) is killed" 0
not_connected() { ! connected; }
wait_for "status is no longer connected" 15 not_connected
tg_lab_leaks_reset
check_fails "app reaches $INCLUDED4 no more" tg_docker exec app ping -c 1 -W 2 "$INCLUDED4"
check "the generator made its attempts in app's namespace" tg_leak_generate_in "/proc/$app_pid/ns/net"
check_lab_no_leaks "[docker, the runtime dead: every way out of app (cut off, not leaked)] nothing left C's physical interfaces but the carrier 5-tuples"
wait_for "dockerd's health check says unhealthy" 25 is_health unhealthy

tg_run tg_docker rm -f app vpn
check_rc "docker rm -f app vpn" 0
check_fails "vpn's engine is gone" test -d "/proc/$vpn_pid"
wait_for "docker0 has no port left" 10 tg_bridge_settled "$NS_C" docker0
tg_snapshot "$NS_C" "$TG_TMP/c-after"
check_same_snapshot "C is as before the containers" "$TG_TMP/c-before" "$TG_TMP/c-after"

elapsed=$(( ($(_tg_now_ms) - started) / 1000 ))
if [ "$elapsed" -le "$budget" ]; then
  tg_pass "the scenario took ${elapsed} s (budget ${budget} s)"
else
  tg_fail "the scenario took ${elapsed} s, over its budget of ${budget} s"
fi
tg_summary
