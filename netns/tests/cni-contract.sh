#!/usr/bin/env bash
# tunnelgate-cni's contract with its caller: the exact environment and standard input a CRI runtime
# (containerd for kubelet) passes, from the CNI specification's examples, for VERSION, ADD, CHECK, DEL
# and failing ADDs, against a real pod namespace and real tunnels.
#
#   C  the node (the runtime's namespace): tunnelgate-cni runs here (nsenter --net, so its namespace
#   │  names are everyone's), and so do the tunnels' owners (tunnelgate up --detach)
#   P  the pod sandbox: /run/netns/cni-UUID as containerd names it, made by the test, with the main
#      plugin's eth0 (a veth to C, 10.1.0.5/16 as in the spec's example)
#      after ADD: the tunnel tgcXXXXXXXXXXXX (10.8.0.2/24 fd00:8::2/64), every route of P into it,
#      P's kill switch; the plugin's name for P: /run/netns/tgcni-tgcXXXXXXXXXXXX
#
# Asserted: VERSION's answer; ADD's result is the spec's bridge prevResult with the tunnel's interface,
# addresses and DNS added (0.4.0 and 1.0.0 shapes); the tunnel is real (in P, routes into it, kill
# switch, owner in C) and was chosen by the pod annotation; CHECK passes, then fails with code 101
# once the owner is killed; DEL removes everything (P and C as before, no owner, no name, no record,
# no tunnelgate state) and again succeeds; DEL after the runtime already removed P's own name (the
# namespace is kept by the plugin's name until DEL); DEL after someone removed the plugin's name (the
# owner is stopped by pid); the network's own tunnel as inline settings and as a wg-quick file by
# path (linked, its key copied nowhere); DEL of an attachment never added; failing ADDs
# (no such configured tunnel, a runtime library that does not exist, a configuration tunnelgate
# refuses, a namespace that is no namespace, a bad environment, an unknown field) each answer a CNI
# error JSON with the right code and leave P, C and the state directory as they were.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../containers.sh"
tg_begin --cni

STATE=$TG_TMP/cni-state
TUNNELS=$TG_TMP/tunnels
mkdir -p "$TUNNELS" && chmod 700 "$TUNNELS"
# The pod sandbox, named as containerd names them (a new name each run).
POD=cni-$(cat /proc/sys/kernel/random/uuid)
ip netns add "$POD" && TG_NAMESPACES+=("$POD")
ip -n "$POD" link set lo up
ip -n "$POD" link add eth0 type veth peer name veth3243 netns "$NS_C"
ip -n "$POD" addr add 10.1.0.5/16 dev eth0
ip -n "$POD" link set eth0 up
ip -n "$NS_C" link set veth3243 up
ip -n "$POD" route add default via 10.1.0.1 dev eth0 onlink
wait_for "P's links have settled" 10 _tg_settled "$POD"
CONTAINER_ID=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')

# Tunnel configurations the pods may name: corp (JSON, no runtime: the tunnel's own packets go nowhere,
# which is all the contract needs), broken (a runtime library that does not exist), invalid (tunnelgate
# refuses it).
cat >"$TUNNELS/corp.json" <<EOF
{"name": "corp", "tunnelRemoteAddress": "$CARRIER4", "mtu": 1400,
 "ipv4Settings": {"addresses": ["10.8.0.2"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["0.0.0.0/0"]},
 "ipv6Settings": {"addresses": ["fd00:8::2"], "networkPrefixLengths": [64], "includedRoutes": ["::/0"]},
 "dnsSettings": {"servers": ["10.8.0.1"], "searchDomains": ["corp.example"]},
 "carrierEndpoints": ["$CARRIER4"], "runtime": {"kind": "none"}}
EOF
jq '.runtime = {"kind": "callback", "library": "/nonexistent/libruntime.so", "packetPath": "callback"}' \
  "$TUNNELS/corp.json" >"$TUNNELS/broken.json"
jq '.mtu = 12' "$TUNNELS/corp.json" >"$TUNNELS/invalid.json"
chmod 600 "$TUNNELS"/*.json

# The bridge's result of the specification's ADD example (the sandbox is P), as prevResult.
prev_result() { # VERSION
  if [ "$1" = 1.0.0 ]; then
    cat <<EOF
{"cniVersion": "1.0.0", "ips": [{"address": "10.1.0.5/16", "gateway": "10.1.0.1", "interface": 2}],
 "routes": [{"dst": "0.0.0.0/0"}],
 "interfaces": [{"name": "cni0", "mac": "00:11:22:33:44:55"}, {"name": "veth3243", "mac": "55:44:33:22:11:11"},
                {"name": "eth0", "mac": "99:88:77:66:55:44", "sandbox": "/run/netns/$POD"}],
 "dns": {"nameservers": ["10.1.0.1"]}}
EOF
  else
    cat <<EOF
{"cniVersion": "$1", "ips": [{"version": "4", "address": "10.1.0.5/16", "gateway": "10.1.0.1", "interface": 2}],
 "routes": [{"dst": "0.0.0.0/0"}],
 "interfaces": [{"name": "cni0", "mac": "00:11:22:33:44:55"}, {"name": "veth3243", "mac": "55:44:33:22:11:11"},
                {"name": "eth0", "mac": "99:88:77:66:55:44", "sandbox": "/run/netns/$POD"}],
 "dns": {"nameservers": ["10.1.0.1"]}}
EOF
  fi
}
# request VERSION [TUNNEL-ANNOTATION] [PREV-RESULT-JSON] [EXTRA-JQ]: the plugin's standard input as
# containerd derives it from the conflist: cniVersion and name inserted, capabilities removed, the
# pod annotations in runtimeConfig (the io.kubernetes.cri.pod-annotations capability), prevResult.
request() {
  local version=$1 annotation=${2:-corp} prev=${3:-} extra=${4:-.}
  [ -n "$prev" ] || prev=$(prev_result "$version")
  jq -n --arg v "$version" --arg a "$annotation" --arg s "$STATE" --arg d "$TUNNELS" --arg t "$TG" --argjson p "$prev" '
    {cniVersion: $v, name: "dbnet", type: "tunnelgate-cni", tunnelDirectory: $d, stateDirectory: $s, tunnelgate: $t,
     runtimeConfig: {"io.kubernetes.cri.pod-annotations": {"tunnelgate.io/tunnel": $a,
                     "io.kubernetes.cri.sandbox-id": "x"}},
     prevResult: $p}' | jq "$extra"
}
# cni COMMAND [VAR=VALUE...] < stdin: the plugin as kubelet's containerd runs it, in C.
cni() {
  local command=$1
  shift
  nsenter --net="/run/netns/$NS_C" env -i CNI_COMMAND="$command" CNI_CONTAINERID="$CONTAINER_ID" \
    CNI_NETNS="/run/netns/$POD" CNI_IFNAME=eth0 CNI_PATH=/opt/cni/bin:/usr/lib/cni \
    CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=$CONTAINER_ID;K8S_POD_UID=8f2c4c2e-3d1b-4c7e-9f5a-2a1b3c4d5e6f" \
    "$@" timeout 120 "$CNI"
}
run_cni() { # COMMAND STDIN-FILE [VAR=VALUE...]
  local command=$1 input=$2
  shift 2
  tg_run cni "$command" "$@" <"$input"
}
tunnel_name() { jq -r '.interfaces[-1].name' "$TG_TMP/add.json"; }
snapshots() { # SUFFIX
  tg_snapshot "$POD" "$TG_TMP/p-$1"
  tg_snapshot "$NS_C" "$TG_TMP/c-$1"
  tg_host_files_snapshot "$TG_TMP/files-$1" "$STATE"
}
same_as_before() { # WHAT
  snapshots after
  check_same_snapshot "$1: P's kernel state is as before" "$TG_TMP/p-before" "$TG_TMP/p-after"
  check_same_snapshot "$1: C's kernel state is as before" "$TG_TMP/c-before" "$TG_TMP/c-after"
  check_same_snapshot "$1: no name, record or configuration left (/run/netns, /etc/netns, the state directory)" \
    "$TG_TMP/files-before" "$TG_TMP/files-after"
  check_eq "$1: no tunnelgate process in C" "" "$(tg_tunnel_pids "$NS_C")"
}
# is_cni_error CODE: the last run printed a CNI error JSON with CODE, msg and cniVersion, and exited non-zero.
is_cni_error() {
  local desc=$1 code=$2
  if [ "$TG_RC" -ne 0 ] && jq -e --argjson c "$code" '.code == $c and (.msg | length > 0) and (.cniVersion | length > 0)' \
    <<<"$TG_OUT" >/dev/null 2>&1; then
    tg_pass "$desc (code $code: $(jq -r .msg <<<"$TG_OUT"))"
  else
    tg_fail "$desc" "expected a CNI error with code $code and a non-zero exit" "exit: $TG_RC" "stdout: $TG_OUT" "stderr: $TG_ERR"
  fi
}

# pids_in_namespace INODE: the processes whose network namespace has INODE.
pids_in_namespace() {
  local p
  for p in /proc/[0-9]*; do
    [ "$(stat -L -c %i "$p/ns/net" 2>/dev/null)" = "$1" ] && echo "${p#/proc/}"
  done
  return 0
}

mkdir -p "$STATE" && chmod 700 "$STATE"
wait_for "C's links have settled" 10 _tg_settled "$NS_C"
snapshots before

# --- VERSION --------------------------------------------------------------------------------------------
echo '{"cniVersion": "1.0.0"}' >"$TG_TMP/version.json"
run_cni VERSION "$TG_TMP/version.json" CNI_CONTAINERID= CNI_NETNS= CNI_IFNAME= CNI_ARGS= CNI_PATH=dummy
check_rc "VERSION" 0
check_eq "VERSION answers the spec's version result" '{"cniVersion":"1.0.0","supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0"]}' \
  "$(jq -c . <<<"$TG_OUT" 2>&1)"

# --- ADD, CHECK, DEL in 1.0.0 and in 0.4.0 ----------------------------------------------------------------
for version in 1.0.0 0.4.0; do
  request "$version" >"$TG_TMP/add-in.json"
  run_cni ADD "$TG_TMP/add-in.json"
  check_rc "[$version] ADD" 0
  printf '%s\n' "$TG_OUT" >"$TG_TMP/add.json"
  tun=$(tunnel_name)
  check_match "[$version] the tunnel is named tgc and 12 hex digits" '^tgc[0-9a-f]{12}$' "$tun"
  expected=$(prev_result "$version" | jq --arg t "$tun" --arg p "/run/netns/$POD" --arg v "$version" '
    .interfaces += [{name: $t, mac: "00:00:00:00:00:00", sandbox: $p}]
    | .ips += [(if $v == "1.0.0" then {} else {version: "4"} end) + {interface: 3, address: "10.8.0.2/24"},
               (if $v == "1.0.0" then {} else {version: "6"} end) + {interface: 3, address: "fd00:8::2/64"}]
    | .dns = {nameservers: ["10.8.0.1"], search: ["corp.example"]}')
  check_eq "[$version] the result is prevResult with the tunnel's interface, addresses and DNS added" \
    "$(jq -S . <<<"$expected")" "$(jq -S . "$TG_TMP/add.json" 2>&1)"
  check "[$version] the tunnel's interface is in P" ip -n "$POD" link show dev "$tun"
  check_match "[$version] ... with its address" 'inet 10\.8\.0\.2/24' "$(ip -n "$POD" addr show dev "$tun" 2>&1)"
  check_fails "[$version] ... and not in C" ip -n "$NS_C" link show dev "$tun"
  check_route "[$version] in P, $INCLUDED4 goes into the tunnel" "$POD" "$INCLUDED4" "$tun"
  check_route "[$version] in P, $INCLUDED6 goes into the tunnel" "$POD" "$INCLUDED6" "$tun"
  check "[$version] P has the kill switch" ip netns exec "$POD" nft list table inet "tunnelgate-$tun"
  check "[$version] the tunnel's owner runs in C" test -n "$(tg_tunnel_pids "$NS_C")"
  check "[$version] the plugin named P /run/netns/tgcni-$tun" test "$(stat -L -c %i "/run/netns/tgcni-$tun")" = \
    "$(stat -L -c %i "/run/netns/$POD")"
  check_match "[$version] the record says the pod annotation chose corp" 'the configured tunnel corp, chosen by the pod annotation' \
    "$(jq -r .source "$STATE/$tun.record" 2>&1)"

  # CHECK with the result of ADD as prevResult, as the runtime does.
  request "$version" corp "$(cat "$TG_TMP/add.json")" >"$TG_TMP/check-in.json"
  run_cni CHECK "$TG_TMP/check-in.json"
  check_rc "[$version] CHECK of a connected tunnel" 0
  check_eq "[$version] ... prints nothing" "" "$TG_OUT"

  request "$version" corp "$(cat "$TG_TMP/add.json")" >"$TG_TMP/del-in.json"
  if [ "$version" = 0.4.0 ]; then
    # ADD again without DEL is refused, and changes nothing.
    run_cni ADD "$TG_TMP/add-in.json"
    is_cni_error "[$version] a second ADD for the same attachment is refused" 100
    check "[$version] ... the tunnel is still up" ip -n "$POD" link show dev "$tun"
    # CHECK fails once the owner is gone (the kill switch stays: the pod is cut off, not leaked).
    pid=$(tg_tunnel_pids "$NS_C")
    kill -KILL $pid
    wait_for "[$version] the owner is gone" 5 tg_exited "$pid"
    run_cni CHECK "$TG_TMP/check-in.json"
    is_cni_error "[$version] CHECK after the owner was killed" 101
    check_match "[$version] ... saying why" 'owner' "$TG_OUT"
    check "[$version] ... P's kill switch is still there" ip netns exec "$POD" nft list table inet "tunnelgate-$tun"
  fi
  run_cni DEL "$TG_TMP/del-in.json"
  check_rc "[$version] DEL" 0
  same_as_before "[$version] after DEL"
  run_cni DEL "$TG_TMP/del-in.json"
  check_rc "[$version] DEL again (idempotent)" 0
  run_cni CHECK "$TG_TMP/check-in.json"
  is_cni_error "[$version] CHECK after DEL says the container has no tunnel" 101
done

# --- DEL when the runtime has already removed the pod's namespace name ------------------------------------
request 1.0.0 >"$TG_TMP/add-in.json"
run_cni ADD "$TG_TMP/add-in.json"
check_rc "ADD (for DEL after the namespace's name is gone)" 0
printf '%s\n' "$TG_OUT" >"$TG_TMP/add.json"
tun=$(tunnel_name)
pod_inode=$(stat -L -c %i "/run/netns/$POD")
ip netns del "$POD"
check "the runtime removed /run/netns/$POD; the namespace lives on under the plugin's name" \
  test "$(stat -L -c %i "/run/netns/tgcni-$tun")" = "$pod_inode"
request 1.0.0 corp "$(cat "$TG_TMP/add.json")" >"$TG_TMP/del-in.json"
run_cni DEL "$TG_TMP/del-in.json"
check_rc "DEL with CNI_NETNS already gone" 0
check_fails "the plugin's name is gone" test -e "/run/netns/tgcni-$tun"
wait_for "no tunnelgate process is left in C" 10 tg_no_tunnel_process "$NS_C"
check_fails "tunnelgate's state for the namespace is gone" test -e "/run/tunnelgate/net-$pod_inode"
check_eq "no process is left in the pod's namespace" "" "$(pids_in_namespace "$pod_inode")"
check_fails "the namespace has ended (its veth to C went with it)" ip -n "$NS_C" link show dev veth3243
run_cni DEL "$TG_TMP/del-in.json" CNI_NETNS=
check_rc "DEL again, without CNI_NETNS" 0
# A new sandbox for the rest.
ip netns add "$POD"
ip -n "$POD" link set lo up
ip -n "$POD" link add eth0 type veth peer name veth3243 netns "$NS_C"
ip -n "$POD" addr add 10.1.0.5/16 dev eth0
ip -n "$POD" link set eth0 up
ip -n "$NS_C" link set veth3243 up
ip -n "$POD" route add default via 10.1.0.1 dev eth0 onlink
wait_for "the new P's links have settled" 10 _tg_settled "$POD"
wait_for "C's links have settled" 10 _tg_settled "$NS_C"
snapshots before

# --- DEL when someone removed the plugin's own name: the owner, found by pid and start time, is stopped --
request 1.0.0 >"$TG_TMP/add-in.json"
run_cni ADD "$TG_TMP/add-in.json"
check_rc "ADD (for DEL after the plugin's name is gone)" 0
printf '%s\n' "$TG_OUT" >"$TG_TMP/add.json"
tun=$(tunnel_name)
pod_inode=$(stat -L -c %i "/run/netns/$POD")
ip netns del "tgcni-$tun"
check_fails "someone removed /run/netns/tgcni-$tun" test -e "/run/netns/tgcni-$tun"
request 1.0.0 corp "$(cat "$TG_TMP/add.json")" >"$TG_TMP/del-in.json"
run_cni DEL "$TG_TMP/del-in.json"
check_rc "DEL without the plugin's name" 0
wait_for "the owner was stopped: no tunnelgate process in C" 10 tg_no_tunnel_process "$NS_C"
same_as_before "DEL without the plugin's name (the owner took the tunnel down in the namespace it held)"
check_fails "... and tunnelgate's state for the namespace is gone" test -e "/run/tunnelgate/net-$pod_inode"

# --- The network's own tunnel: inline settings, and a wg-quick file by path ---------------------------------
# (No annotation: the network names the tunnel.) The settings inline get the tunnel's name in a copy; the
# wg-quick file is linked under the tunnel's name, its key never copied.
(umask 077 && wg genkey >"$TG_TMP/k")
(umask 077 && printf '%s\n' "[Interface]" "PrivateKey = $(cat "$TG_TMP/k")" "Address = 10.8.0.9/24" \
  "[Peer]" "PublicKey = $(wg genkey | wg pubkey)" "Endpoint = $CARRIER4:51820" "AllowedIPs = 0.0.0.0/0" >"$TUNNELS/by-path.conf")
for how in settings path; do
  if [ "$how" = settings ]; then
    tunnel=$(jq '{settings: (. | .ipv4Settings.addresses = ["10.8.0.7"] | del(.ipv6Settings))}' "$TUNNELS/corp.json")
    address=10.8.0.7/24
  else
    tunnel=$(jq -n --arg p "$TUNNELS/by-path.conf" '{path: $p}')
    address=10.8.0.9/24
  fi
  request 1.0.0 corp "" "del(.runtimeConfig) | .tunnel = $tunnel" >"$TG_TMP/add-in.json"
  run_cni ADD "$TG_TMP/add-in.json"
  check_rc "[tunnel.$how] ADD" 0
  printf '%s\n' "$TG_OUT" >"$TG_TMP/add.json"
  tun=$(tunnel_name)
  check_eq "[tunnel.$how] the result has the tunnel's address" "$address" "$(jq -r '.ips[-1].address' "$TG_TMP/add.json")"
  check_match "[tunnel.$how] ... and so has the interface in P" "inet $(tg_re "$address")" "$(ip -n "$POD" addr show dev "$tun" 2>&1)"
  if [ "$how" = path ]; then
    check_eq "[tunnel.path] the file tunnelgate got is a link to the wg-quick file (the key is not copied)" \
      "$TUNNELS/by-path.conf" "$(readlink "$STATE/$tun.conf" 2>&1)"
    check_eq "[tunnel.path] ... and no file in the state directory holds the key" "" \
      "$(grep -rlF -f "$TG_TMP/k" "$STATE" --exclude="$tun.conf" 2>/dev/null)"
  else
    check_eq "[tunnel.settings] the copy tunnelgate got is named after the tunnel" "$tun" "$(jq -r .name "$STATE/$tun.json" 2>&1)"
  fi
  request 1.0.0 corp "$(cat "$TG_TMP/add.json")" "del(.runtimeConfig) | .tunnel = $tunnel" >"$TG_TMP/del-in.json"
  run_cni DEL "$TG_TMP/del-in.json"
  check_rc "[tunnel.$how] DEL" 0
  same_as_before "[tunnel.$how] after DEL"
done

# --- DEL of an attachment never added ------------------------------------------------------------------
request 1.0.0 >"$TG_TMP/del-in.json"
run_cni DEL "$TG_TMP/del-in.json" CNI_CONTAINERID=never-added
check_rc "DEL of a container that was never added" 0

# --- Failing ADDs: a CNI error, and nothing left behind ---------------------------------------------------
request 1.0.0 nosuch >"$TG_TMP/in.json"
run_cni ADD "$TG_TMP/in.json"
is_cni_error "ADD naming a tunnel that is not configured" 7
check_match "... naming the files looked for" "nosuch.json" "$TG_OUT"
same_as_before "failed ADD (not configured)"

request 1.0.0 broken >"$TG_TMP/in.json"
run_cni ADD "$TG_TMP/in.json"
is_cni_error "ADD of a tunnel whose runtime library does not exist" 100
check_match "... with tunnelgate's reason in the details" 'libruntime\.so' "$(jq -r .details <<<"$TG_OUT")"
same_as_before "failed ADD (tunnelgate up failed)"

request 1.0.0 invalid >"$TG_TMP/in.json"
run_cni ADD "$TG_TMP/in.json"
is_cni_error "ADD of a configuration tunnelgate refuses" 100
check_match "... naming the key" 'mtu' "$(jq -r .details <<<"$TG_OUT")"
same_as_before "failed ADD (invalid configuration)"

request 1.0.0 >"$TG_TMP/in.json"
run_cni ADD "$TG_TMP/in.json" CNI_NETNS="$TUNNELS/corp.json"
is_cni_error "ADD whose CNI_NETNS is a file, not a namespace" 3
run_cni ADD "$TG_TMP/in.json" CNI_NETNS=/run/netns/no-such-namespace
is_cni_error "ADD whose CNI_NETNS does not exist" 3
run_cni ADD "$TG_TMP/in.json" CNI_IFNAME=
is_cni_error "ADD without CNI_IFNAME" 4
check_match "... naming the variable" 'CNI_IFNAME' "$TG_OUT"
request 1.0.0 corp "" '. + {"tunnelDirectori": "/tmp"}' >"$TG_TMP/in.json"
run_cni ADD "$TG_TMP/in.json"
is_cni_error "ADD with an unknown field" 2
check_match "... naming the field and its value" 'tunnelDirectori: \\"/tmp\\"' "$TG_OUT"
echo '{"cniVersion": "1.0.0", "name": "dbnet",' >"$TG_TMP/in.json"
run_cni ADD "$TG_TMP/in.json"
is_cni_error "ADD of a configuration that is not JSON" 6
request 0.3.1 >"$TG_TMP/in.json"
run_cni CHECK "$TG_TMP/in.json"
is_cni_error "CHECK in 0.3.1 (CHECK came with 0.4.0)" 1
same_as_before "after the refused requests"

# --- A pod that names no tunnel on a network with none: passed through untouched -----------------------
request 1.0.0 corp "" 'del(.runtimeConfig)' >"$TG_TMP/in.json"
run_cni ADD "$TG_TMP/in.json"
check_rc "ADD for a pod that names no tunnel (no annotation, the network has none)" 0
check_eq "... returns prevResult unchanged" "$(prev_result 1.0.0 | jq -S .)" "$(jq -S . <<<"$TG_OUT" 2>&1)"
same_as_before "a pod without a tunnel"

tg_summary
