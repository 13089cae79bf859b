#!/usr/bin/env bash
# The container scenarios' infrastructure, on its own (netns/containers.sh): Podman with its CNI backend
# and dockerd, each private to this run, run a busybox image built here (Scripts/container-image.sh)
# on a bridge in the run's "host" namespace C; no registry is asked, and removing the containers leaves
# C as it was.
#
#   container (podman's netns-UUID / dockerd's exec-root/netns/ID)
#      eth0 10.89.21.x fd00:89:21::x ── bridge tgbr21 (podman) / docker0 10.89.22.1 (dockerd) in C
#   C  the "host": podman and dockerd run here (nsenter --net); forwards, default via R
#   R  router (routes 10.89.21.0/24, 10.89.22.0/24, fd00:89:21::/64 back to C)
#   I  "internet" host 198.18.0.30 2001:db8:18::30
#
# Asserted: the image is local (no registry: a pull of its name is refused as blocked, at once); a
# container on the CNI bridge reaches I over IPv4 and IPv6; `podman rm` leaves C's kernel state and the
# host's named namespaces as before; the machine's own container storage and /dev/shm lock are not
# used; the same with dockerd (its namespace is a path under the run's exec root); no engine process is
# left afterwards.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../containers.sh"
[ -x /bin/busybox ] || tg_bail "busybox-static is installed" "install it with Scripts/setup.sh"
tg_begin --no-binary --needs podman,dockerd
tg_defer tg_containers_down

in_c sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
ip -n "$NS_R" route add 10.89.21.0/24 via "$C_ETH0_4"
ip -n "$NS_R" route add 10.89.22.0/24 via "$C_ETH0_4"
ip -n "$NS_R" -6 route add fd00:89:21::/64 via "$C_ETH0_6"
shm_before=$(ls /dev/shm 2>/dev/null | grep -c libpod_lock)
storage_before=$(ls -d /var/lib/containers/storage 2>/dev/null | wc -l)

# --- Podman -------------------------------------------------------------------------------------------
tg_podman_setup "$NS_C"
tg_podman_image
check_match "podman has the image built here" "$TG_IMAGE" "$(tg_podman images --format '{{.Repository}}:{{.Tag}}' 2>&1)"
started=$(_tg_now_ms)
tg_run tg_podman pull "$TG_IMAGE"
check_rc_nonzero "podman pull of the image's name fails: no registry is asked"
check_match "... refused as blocked by the run's registries.conf" 'blocked' "$TG_ERR"
check "... at once (within 5 s)" test $(( $(_tg_now_ms) - started )) -lt 5000

tg_podman_network engines tgbr21 10.89.21.0/24 10.89.21.1 fd00:89:21::/64 fd00:89:21::1
# The bridge is the network's, made by the first container and kept by the bridge plugin: the baseline
# is taken once it exists.
tg_run tg_podman run --rm --pull=never --network engines "$TG_IMAGE" true
check_rc "a first container on the CNI bridge runs and is removed" 0
wait_for "the bridge has no port left and C no tentative address" 10 tg_bridge_settled "$NS_C" tgbr21
tg_snapshot "$NS_C" "$TG_TMP/c-before"
tg_host_files_snapshot "$TG_TMP/files-before"

tg_run tg_podman run -d --name web --pull=never --network engines "$TG_IMAGE" sleep 300
check_rc "podman run -d on the CNI bridge" 0
netns=$(tg_podman inspect -f '{{.NetworkSettings.SandboxKey}}' web 2>/dev/null)
check_match "the container's namespace is a name under /run/netns" '^/run/netns/netns-' "$netns"
check_match "the container has an address of the bridge's network" 'inet 10\.89\.21\.' \
  "$(tg_podman exec web ip -4 addr show dev eth0 2>&1)"
check "the container reaches $INCLUDED4 through the bridge and C" tg_podman exec web ping -c 1 -W 2 "$INCLUDED4"
wait_for "the container's IPv6 address is usable" 10 tg_podman exec web sh -c '! ip -6 addr show dev eth0 | grep -q tentative'
check "the container reaches $INCLUDED6 over IPv6" tg_podman exec web ping -6 -c 1 -W 2 "$INCLUDED6"
check_match "the container's processes are busybox's" 'BusyBox' "$(tg_podman exec web sh -c 'busybox 2>&1 | head -n 1')"

tg_run tg_podman rm --force --time 2 web
check_rc "podman rm web" 0
wait_for "the container's namespace is gone" 10 test ! -e "$netns"
wait_for "the bridge has no port left again" 10 tg_bridge_settled "$NS_C" tgbr21
tg_snapshot "$NS_C" "$TG_TMP/c-after"
tg_host_files_snapshot "$TG_TMP/files-after"
check_same_snapshot "podman rm: C is as before the container" "$TG_TMP/c-before" "$TG_TMP/c-after"
check_same_snapshot "podman rm: the host's named namespaces are as before" "$TG_TMP/files-before" "$TG_TMP/files-after"
check_eq "the machine's /dev/shm/libpod_lock is not used (lock_type file)" "$shm_before" \
  "$(ls /dev/shm 2>/dev/null | grep -c libpod_lock)"
check_eq "the machine's /var/lib/containers/storage is not used" "$storage_before" \
  "$(ls -d /var/lib/containers/storage 2>/dev/null | wc -l)"
check "the run's storage holds the image" test -d "$TG_PODMAN_DIR/root/overlay-images"

# --- dockerd ------------------------------------------------------------------------------------------
tg_dockerd_start "$NS_C" 10.89.22.1/24
tg_docker_image
check_match "dockerd has the image built here" "$TG_IMAGE" "$(tg_docker images --format '{{.Repository}}:{{.Tag}}' 2>&1)"
tg_run tg_docker run --rm --pull=never "$TG_IMAGE" true
check_rc "a first container on docker0 runs and is removed" 0
wait_for "docker0 has no port left and C no tentative address" 10 tg_bridge_settled "$NS_C" docker0
tg_snapshot "$NS_C" "$TG_TMP/c-before"

tg_run tg_docker run -d --name web --pull=never "$TG_IMAGE" sleep 300
check_rc "docker run -d on docker0" 0
key=$(tg_docker inspect -f '{{.NetworkSettings.SandboxKey}}' web 2>/dev/null)
check_match "the container's namespace is a path under the run's exec root" "^$TG_DOCKER_DIR/exec/netns/" "$key"
pid=$(tg_docker inspect -f '{{.State.Pid}}' web 2>/dev/null)
check_eq "... the same namespace as /proc/PID/ns/net of its process" "$(stat -L -c %i "/proc/$pid/ns/net" 2>&1)" \
  "$(stat -L -c %i "$key" 2>&1)"
check "the container reaches $INCLUDED4 through docker0 and C" tg_docker exec web ping -c 1 -W 2 "$INCLUDED4"
tg_run tg_docker rm -f web
check_rc "docker rm -f web" 0
# (dockerd unmounts and removes the namespace's file later: libnetwork collects unused ones once a minute.)
wait_for "the container's process has exited" 10 tg_exited "$pid"
wait_for "docker0 has no port left again" 10 tg_bridge_settled "$NS_C" docker0
tg_snapshot "$NS_C" "$TG_TMP/c-after"
check_same_snapshot "docker rm: C is as before the container" "$TG_TMP/c-before" "$TG_TMP/c-after"

dockerd_pid=$TG_DOCKER_PID
tg_containers_down
check "dockerd has exited" tg_exited "$dockerd_pid"
check_eq "no engine process is left in C" "" "$(ip netns pids "$NS_C" 2>/dev/null | xargs -r ps -o comm= -p)"
check "dockerd's key.json is gone again (it was not there before, or it stays)" \
  test -n "${TG_ENGINE_TRACE_EXISTED[/etc/docker/key.json]:-}" -o ! -e /etc/docker/key.json

tg_summary
