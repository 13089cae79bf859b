# shellcheck shell=bash
# netns/containers.sh: real container engines for the container scenarios, private to one run. Sourced
# after lib.sh (and after tg_topology_up, which makes $TG_TMP), never run.
#
#   host namespace H (a namespace of the run, e.g. $NS_C): the engines run "on the host" here
#   ├─ podman (Debian's 4.3, CNI backend), entered with `nsenter --net` only: it stays in the caller's
#   │  mount namespace, so the namespaces it makes (/run/netns/netns-UUID) are the ones everyone sees.
#   │  Configuration, storage, locks, events and CNI files under $TG_TMP/podman (below).
#   └─ dockerd (Debian's 20.10), the same way, with its own data root, exec root (its namespaces are
#      $TG_TMP/docker/exec/netns/ID), socket and configuration file under $TG_TMP/docker.
#
# What this machine needs, found by running them here (docs/cni.md, Test infrastructure):
#   - default_ulimits nofile and nproc lowered: the VM gives root no CAP_SYS_RESOURCE, and podman's
#     defaults (1048576) are above the hard limits, so runc's setrlimit fails ("error setting rlimits
#     for ready process: ... operation not permitted");
#   - runtime runc: crun cannot set a container's rlimits in this VM (and is not installed);
#   - cgroup_manager cgroupfs and events_logger file: no systemd and no journald here;
#   - lock_type file: the default shm lock is /dev/shm/libpod_lock, shared by every podman of the machine;
#   - a private registries.conf that blocks "localhost" (the test image's prefix) and no short-name
#     search, and --pull=never on every run: nothing ever asks a registry;
#   - the bridge's host-local IPAM with a dataDir of the run's (its default is /var/lib/cni/networks).
#   - dockerd: --iptables=false --ip6tables=false --ip-forward=false --ip-masq=false (it leaves the
#     machine's netfilter and sysctls alone), --config-file of the run's (never /etc/docker/daemon.json).
# Traces outside the run's directory that the engines leave and no option moves (the cleanup removes
# those this run created, when they are still empty or were made by it): dockerd's /etc/docker/key.json
# and /run/docker/plugins; libcni's /var/lib/cni/results (podman's cached CNI results, removed again at
# DEL); containers/image's /var/lib/containers/cache/blob-info-cache-v1.boltdb (left: a cache the
# machine's own podman would share).

TG_ENGINE_NS=""
TG_PODMAN_DIR=""
TG_DOCKER_DIR=""
TG_DOCKER_PID=""
TG_IMAGE=localhost/tunnelgate-busybox:test
# Global paths the engines may create, and whether each existed before this run (see above).
TG_ENGINE_TRACES=(/etc/docker/key.json /etc/docker /run/docker/plugins /run/docker /var/lib/cni/results
  /var/lib/cni/networks /var/lib/cni)
declare -A TG_ENGINE_TRACE_EXISTED=()
TG_ENGINE_TRACES_TAKEN=0

# _tg_engine_traces_before: notes which of them exist, once per run (before the first engine starts).
_tg_engine_traces_before() {
  local p
  [ "$TG_ENGINE_TRACES_TAKEN" = 1 ] && return 0
  TG_ENGINE_TRACES_TAKEN=1
  for p in "${TG_ENGINE_TRACES[@]}"; do
    [ -e "$p" ] && TG_ENGINE_TRACE_EXISTED[$p]=1
  done
  return 0
}

# _tg_engine_traces_after: removes what this run's engines created outside $TG_TMP: key.json when it
# did not exist before, and the directories above when they did not exist before and are empty now.
_tg_engine_traces_after() {
  local p
  for p in "${TG_ENGINE_TRACES[@]}"; do
    [ -n "${TG_ENGINE_TRACE_EXISTED[$p]:-}" ] && continue
    if [ -f "$p" ]; then rm -f "$p"; elif [ -d "$p" ]; then rmdir "$p" 2>/dev/null; fi
  done
  return 0
}

# --- Podman ---------------------------------------------------------------------------------------------

# tg_podman_setup HOST_NS: private configuration for podman run in HOST_NS; exports CONTAINERS_CONF,
# CONTAINERS_STORAGE_CONF and CONTAINERS_REGISTRIES_CONF. CNI networks are conflists in
# $TG_PODMAN_DIR/cni-conf (tg_podman_network); plugins are looked up in $TG_PODMAN_DIR/cni-bin, which
# holds links to Debian's plugins in /usr/lib/cni (and whatever a scenario adds).
tg_podman_setup() {
  TG_ENGINE_NS=$1
  TG_PODMAN_DIR=$TG_TMP/podman
  local d=$TG_PODMAN_DIR p
  mkdir -p "$d"/{root,runroot,tmp,cni-conf,cni-bin,cni-ipam} || tg_bail "podman: directories under $d"
  for p in /usr/lib/cni/*; do ln -sf "$p" "$d/cni-bin/"; done
  _tg_engine_traces_before
  cat >"$d/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$d/events.log"
lock_type = "file"
tmp_dir = "$d/tmp"
[network]
network_backend = "cni"
cni_plugin_dirs = ["$d/cni-bin"]
network_config_dir = "$d/cni-conf"
EOF
  cat >"$d/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$d/root"
runroot = "$d/runroot"
EOF
  cat >"$d/registries.conf" <<EOF
unqualified-search-registries = []
short-name-mode = "enforcing"
[[registry]]
location = "localhost"
blocked = true
EOF
  export CONTAINERS_CONF=$d/containers.conf CONTAINERS_STORAGE_CONF=$d/storage.conf \
    CONTAINERS_REGISTRIES_CONF=$d/registries.conf
}

# tg_podman ARGS...: podman in the host namespace, bounded (60 s, then SIGKILL 10 s later).
tg_podman() {
  timeout --kill-after=10 60 nsenter --net="/run/netns/$TG_ENGINE_NS" podman "$@"
}

# tg_podman_image: imports the test image (Scripts/container-image.sh) into the run's storage.
tg_podman_image() {
  local out
  out=$(bash "$TG_ROOT/Scripts/container-image.sh" podman "$TG_IMAGE" 2>&1) ||
    tg_bail "the test image is imported with podman (Scripts/container-image.sh)" "$out"
}

# tg_podman_network NAME BRIDGE SUBNET4 GATEWAY4 SUBNET6 GATEWAY6 [PLUGIN_JSON...]: a CNI network (a
# conflist, cniVersion 0.4.0 as podman 4.3 writes its own) whose first plugin is a bridge with
# host-local addresses in both families and default routes, followed by each PLUGIN_JSON.
tg_podman_network() {
  local name=$1 bridge=$2 s4=$3 g4=$4 s6=$5 g6=$6 extra=""
  shift 6
  local p
  for p in "$@"; do extra+=", $p"; done
  cat >"$TG_PODMAN_DIR/cni-conf/$name.conflist" <<EOF
{
  "cniVersion": "${TG_CNI_VERSION:-0.4.0}",
  "name": "$name",
  "plugins": [
    {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "$TG_PODMAN_DIR/cni-ipam",
              "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}],
              "ranges": [[{"subnet": "$s4", "gateway": "$g4"}], [{"subnet": "$s6", "gateway": "$g6"}]]}}$extra
  ]
}
EOF
}

# tg_podman_down: every container removed (which runs the CNI DELs), the storage unmounted, the global
# traces of this run removed. Idempotent.
tg_podman_down() {
  [ -n "$TG_PODMAN_DIR" ] && [ -d "$TG_PODMAN_DIR" ] || return 0
  tg_podman rm --all --force --time 2 >/dev/null 2>&1
  _tg_unmount_under "$TG_PODMAN_DIR"
  _tg_engine_traces_after
}

# _tg_unmount_under DIR: every mount below DIR (overlay layers a failed run left), deepest first, lazily.
_tg_unmount_under() {
  local m
  for m in $(awk -v d="$1/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
    umount -l "$m" 2>/dev/null
  done
  return 0
}

# --- dockerd ------------------------------------------------------------------------------------------------

# tg_dockerd_start HOST_NS BRIDGE_CIDR [DOCKERD_ARGS...]: dockerd in HOST_NS with everything of its own
# under $TG_TMP/docker; docker0 gets BRIDGE_CIDR (and whatever DOCKERD_ARGS say: --ipv6
# --fixed-cidr-v6 P). Exports DOCKER_HOST. Returns once it answers (30 s at most).
tg_dockerd_start() {
  TG_ENGINE_NS=$1
  TG_DOCKER_DIR=$TG_TMP/docker
  local d=$TG_DOCKER_DIR bip=$2
  shift 2
  mkdir -p "$d"/{data,exec} || tg_bail "dockerd: directories under $d"
  echo '{}' >"$d/daemon.json"
  _tg_engine_traces_before
  export DOCKER_HOST=unix://$d/docker.sock
  nsenter --net="/run/netns/$TG_ENGINE_NS" dockerd --config-file "$d/daemon.json" --data-root "$d/data" \
    --exec-root "$d/exec" -H "$DOCKER_HOST" --pidfile "$d/docker.pid" --bip "$bip" \
    --iptables=false --ip6tables=false --ip-forward=false --ip-masq=false --userland-proxy=false "$@" \
    >"$d/dockerd.log" 2>&1 &
  TG_DOCKER_PID=$!
  _tg_poll 30 tg_docker info || tg_bail "dockerd answers on $DOCKER_HOST within 30 s" "$(tail -n 20 "$d/dockerd.log")"
}

# tg_docker ARGS...: the Debian package's docker client (another may be earlier on PATH), bounded.
tg_docker() {
  timeout --kill-after=10 60 /usr/bin/docker "$@"
}

# tg_docker_image: imports the test image into the run's dockerd.
tg_docker_image() {
  local out
  out=$(bash "$TG_ROOT/Scripts/container-image.sh" docker "$TG_IMAGE" 2>&1) ||
    tg_bail "the test image is imported with docker (Scripts/container-image.sh)" "$out"
}

# tg_dockerd_down: every container removed, dockerd stopped (SIGTERM, SIGKILL after 20 s), its mounts
# and this run's global traces removed. Idempotent.
tg_dockerd_down() {
  [ -n "$TG_DOCKER_PID" ] || return 0
  tg_docker ps -aq 2>/dev/null | xargs -r /usr/bin/docker rm -f >/dev/null 2>&1
  kill -TERM "$TG_DOCKER_PID" 2>/dev/null
  _tg_poll 20 tg_exited "$TG_DOCKER_PID" || kill -KILL "$TG_DOCKER_PID" 2>/dev/null
  wait "$TG_DOCKER_PID" 2>/dev/null
  TG_DOCKER_PID=""
  _tg_unmount_under "$TG_DOCKER_DIR"
  _tg_engine_traces_after
}

# tg_containers_down: both engines down (before tg_topology_down, which ends what runs in the namespaces).
tg_containers_down() {
  tg_podman_down
  tg_dockerd_down
}

# --- The tunnels' peer (the container scenarios' "VPN provider") -----------------------------------------
#
#   I  wireguard-go WGI on 198.18.0.10:51820, 10.8.0.1/24 fd00:8::1/64, a peer per tunnel; dnsmasq on
#      10.8.0.1, the tunnels' DNS server: probe.tunnel.example -> $INCLUDED4, each query logged
#      ($TG_TMP/dnsmasq.log: "query[A] probe.tunnel.example from 10.8.0.N")

TG_VPN_WG=""
TG_VPN_DIR=""
TG_VPN_PUB=""
# The carrier 5-tuples of the tunnels made so far, for the lab's leak counters
# (tg_lab_leak_declare "${TG_VPN_CARRIERS[@]}").
TG_VPN_CARRIERS=()

# tg_vpn_peer_start WGI DIR: the peer in I (its interface named WGI) and its DNS server; the tunnels'
# configurations will be written to DIR (made 0700). The caller removes /var/run/wireguard/WGI.sock.
tg_vpn_peer_start() {
  TG_VPN_WG=$1 TG_VPN_DIR=$2
  (umask 077 && mkdir -p "$TG_VPN_DIR" && wg genkey >"$TG_TMP/vpn-peer.key")
  TG_VPN_PUB=$(wg pubkey <"$TG_TMP/vpn-peer.key")
  ip netns exec "$NS_I" env LOG_LEVEL=error wireguard-go -f "$TG_VPN_WG" >>"$TG_TMP/wireguard-go.log" 2>&1 &
  wait_for "wireguard-go's API socket in I" 10 test -S "/var/run/wireguard/$TG_VPN_WG.sock" || tg_bail "wireguard-go in I"
  ip netns exec "$NS_I" wg set "$TG_VPN_WG" private-key "$TG_TMP/vpn-peer.key" listen-port 51820
  ip -n "$NS_I" addr add 10.8.0.1/24 dev "$TG_VPN_WG"
  ip -n "$NS_I" addr add fd00:8::1/64 dev "$TG_VPN_WG" nodad
  ip -n "$NS_I" link set "$TG_VPN_WG" up
  tg_dnsmasq "$NS_I" 10.8.0.1 --address=/probe.tunnel.example/"$INCLUDED4" --log-queries \
    --log-facility="$TG_TMP/dnsmasq.log"
}

# tg_vpn_tunnel NAME N: DIR/NAME.conf, the wg-quick file of a tunnel with address 10.8.0.N fd00:8::N,
# ListenPort 52000+N (fixed, so that the leak watch knows its carrier 5-tuple), DNS 10.8.0.1, everything
# routed into it; its key becomes a peer of the peer in I.
tg_vpn_tunnel() {
  local name=$1 n=$2 key
  key=$(wg genkey)
  (umask 077 && printf '%s\n' "[Interface]" "PrivateKey = $key" "Address = 10.8.0.$n/24, fd00:8::$n/64" "DNS = 10.8.0.1" \
    "ListenPort = $((52000 + n))" "MTU = 1380" "" "[Peer]" "PublicKey = $TG_VPN_PUB" "Endpoint = $CARRIER4:51820" \
    "AllowedIPs = 0.0.0.0/0, ::/0" >"$TG_VPN_DIR/$name.conf")
  ip netns exec "$NS_I" wg set "$TG_VPN_WG" peer "$(wg pubkey <<<"$key")" allowed-ips "10.8.0.$n/32,fd00:8::$n/128"
  TG_VPN_CARRIERS+=(--carrier "$CARRIER4:51820/udp@$C_ETH0_4:$((52000 + n))")
}

# tg_vpn_peer_rx: the packets the peer's interface in I has received (through the tunnels).
tg_vpn_peer_rx() {
  ip -n "$NS_I" -s link show dev "$TG_VPN_WG" | awk '/RX:/ { getline; print $2 }'
}

# tg_vpn_public_key NAME: the public key of tunnel NAME's configuration.
tg_vpn_public_key() {
  sed -n 's/^PrivateKey = //p' "$TG_VPN_DIR/$1.conf" | wg pubkey
}

# --- The VPN container image's scenarios (container-vpn.sh, docker-vpn.sh) --------------------------------

# tg_vpn_package: $deb, the Debian package the VPN image is made from: $TG_VPN_DEB when set, else one
# Scripts/package-deb.sh builds into $TG_TMP/package; ends the scenario when it cannot be built.
tg_vpn_package() {
  deb=${TG_VPN_DEB:-}
  [ -z "$deb" ] || return 0
  tg_run bash "$TG_ROOT/Scripts/package-deb.sh" --output "$TG_TMP/package"
  [ "$TG_RC" -eq 0 ] || tg_bail "Scripts/package-deb.sh builds the package" "$TG_ERR"
  deb=$(printf '%s\n' "$TG_OUT" | tail -n 1)
}

# tg_vpn_container_config WGI: the peer in I (tg_vpn_peer_start, its interface WGI) and $ETC
# ($TG_TMP/vpn-etc, owner-only), what the VPN container mounts at /etc/tunnelgate: wg0.key, a key the
# peer knows as 10.8.0.3 and fd00:8::3, and wg0.json, a full tunnel over WireGuard from ListenPort 52003
# (the carrier 5-tuple the leak counters are told) to the peer, with includeAllNetworks.
tg_vpn_container_config() {
  tg_vpn_peer_start "$1" "$TG_TMP/tunnels"
  ETC=$TG_TMP/vpn-etc
  (umask 077 && mkdir -p "$ETC" && wg genkey >"$ETC/wg0.key") || tg_bail "a WireGuard key in $ETC"
  ip netns exec "$NS_I" wg set "$TG_VPN_WG" peer "$(wg pubkey <"$ETC/wg0.key")" allowed-ips 10.8.0.3/32,fd00:8::3/128
  (umask 077 && cat >"$ETC/wg0.json" <<EOF
{
  "name": "wg0",
  "tunnelRemoteAddress": "$CARRIER4",
  "mtu": 1380,
  "ipv4Settings": {"addresses": ["10.8.0.3"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["0.0.0.0/0"]},
  "ipv6Settings": {"addresses": ["fd00:8::3"], "networkPrefixLengths": [64], "includedRoutes": ["::/0"]},
  "includeAllNetworks": true,
  "runtime": {
    "kind": "wireguard",
    "privateKeyFile": "/etc/tunnelgate/wg0.key",
    "listenPort": 52003,
    "peers": [{"publicKey": "$TG_VPN_PUB", "endpoint": "$CARRIER4:51820", "allowedIPs": ["0.0.0.0/0", "::/0"]}]
  }
}
EOF
  ) || tg_bail "writing $ETC/wg0.json"
}

# tg_leak_generate_in NETNS_PATH: the leak generator (netns/lib.sh) in a container's namespace, entered
# by its path (nsenter: no mount namespace of its own), from root and uid 65534, routed, forced onto
# eth0 and bound to eth0's addresses, to $TG_LEAK_TARGETS and R's link-local address. True when it made
# at least one round; its summary is in $TG_TMP/leak-gen.json.
tg_leak_generate_in() {
  local ns=$1 a4 a6
  a4=$(nsenter --net="$ns" ip -4 -o addr show dev eth0 | awk '{ sub(/\/.*/, "", $4); print $4; exit }')
  a6=$(nsenter --net="$ns" ip -6 -o addr show dev eth0 scope global | awk '{ sub(/\/.*/, "", $4); print $4; exit }')
  nsenter --net="$ns" sysctl -qw net.ipv4.ping_group_range="0 2147483647"
  # shellcheck disable=SC2086 # the optional IPv6 source is two words or none
  nsenter --net="$ns" python3 "$TG_LEAK_TOOL" probe --uid 0 --uid 65534 --device eth0 --source "$a4" ${a6:+--source $a6} \
    "${TG_LEAK_TARGETS[@]}" "$(_tg_leak_router_link_local)" >"$TG_TMP/leak-gen.json" 2>"$TG_TMP/leak-gen.err"
  [ "$(jq -r '.rounds // 0' "$TG_TMP/leak-gen.json" 2>/dev/null)" -ge 1 ]
}

# --- Looking at containers ------------------------------------------------------------------------------

# tg_bridge_settled NS BRIDGE: BRIDGE in NS has no port left, has lost its carrier (which the kernel
# notes a moment after the last port goes: routes then say "linkdown"), and no address of NS is
# tentative: a snapshot of NS taken now is the one a later one must equal (a predicate for wait_for).
tg_bridge_settled() {
  [ -z "$(ip -n "$1" -o link show master "$2" 2>/dev/null)" ] &&
    grep -q 'NO-CARRIER' <<<"$(ip -n "$1" -o link show dev "$2")" && ! grep -q tentative <<<"$(ip -n "$1" -o addr show)"
}

# tg_netns_names: the names in /run/netns that container engines and tunnelgate-cni make (podman's
# netns-UUID, the plugin's tgcni-NAME), one a line; other runs' namespaces are not listed.
tg_netns_names() {
  ls -1 /run/netns 2>/dev/null | grep -E '^(netns-|tgcni-)' | sort
}

# tg_host_files_snapshot FILE [DIR...]: what a container's life may leave on the host's file system:
# those named namespaces, their /etc/netns directories, and everything under each DIR.
tg_host_files_snapshot() {
  local file=$1 dir
  shift
  {
    echo '### /run/netns'; tg_netns_names
    echo '### /etc/netns'; ls -1 /etc/netns 2>/dev/null | grep -E '^(netns-|tgcni-)' | sort
    for dir in "$@"; do
      echo "### $dir"; (cd "$dir" 2>/dev/null && find . | sort)
    done
  } >"$file" 2>&1
}
