#!/bin/sh
# The DaemonSet's installer (Examples/kubernetes/tunnelgate-cni.yaml, docs/kubernetes.md): runs in a
# privileged container with the node's CNI directories mounted, and
#   1. copies tunnelgate, its packet plane (tunnelgate-plane, beside it) and tunnelgate-cni onto the
#      node (binaries first: a conflist that names a plugin the node does not have fails every pod's
#      sandbox);
#   2. copies the tunnel configurations (the mounted Secret) into the node's tunnel directory, 0600;
#   3. chains tunnelgate-cni after the cluster's primary plugin: appends it to the `plugins` of the
#      conflist the runtime uses (the first *.conflist in lexical order), once, and again whenever the
#      primary plugin rewrites its file (it is checked every INTERVAL seconds);
#   4. with --remove only (the uninstall Job, docs/kubernetes.md), takes the entry out again. SIGTERM
#      (a rolling update, the pod evicted) leaves it in: the node would otherwise start annotated pods
#      without their tunnel until the next installer chains it again. The binaries always stay, so
#      that DEL of pods that still have tunnels finds them.
# Nothing here contacts anything: it reads and writes the mounted directories only.
#
#   install.sh            run until SIGTERM
#   install.sh --once     steps 1-3 once, then exit (the tests use it)
#   install.sh --remove   step 4 once, then exit
#
# Environment (defaults are the usual kubeadm/containerd paths, as mounted by the manifest):
#   CNI_NET_DIR=/host/etc/cni/net.d   CNI_BIN_DIR=/host/opt/cni/bin   SOURCE_DIR=/opt/tunnelgate
#   NODE_TUNNEL_DIR=/host/etc/tunnelgate/cni (seen by the plugin as /etc/tunnelgate/cni)
#   SECRET_DIR=/tunnels   TUNNELGATE_PATH=/opt/tunnelgate/bin/tunnelgate (the path on the node)
#   NODE_TUNNELGATE_DIR=/host/opt/tunnelgate/bin (where TUNNELGATE_PATH is, seen from here)   INTERVAL=5
set -eu

CNI_NET_DIR=${CNI_NET_DIR:-/host/etc/cni/net.d}
CNI_BIN_DIR=${CNI_BIN_DIR:-/host/opt/cni/bin}
SOURCE_DIR=${SOURCE_DIR:-/opt/tunnelgate}
NODE_TUNNEL_DIR=${NODE_TUNNEL_DIR:-/host/etc/tunnelgate/cni}
NODE_TUNNELGATE_DIR=${NODE_TUNNELGATE_DIR:-/host/opt/tunnelgate/bin}
SECRET_DIR=${SECRET_DIR:-/tunnels}
TUNNELGATE_PATH=${TUNNELGATE_PATH:-/opt/tunnelgate/bin/tunnelgate}
INTERVAL=${INTERVAL:-5}

log() { echo "tunnelgate-cni installer: $*" >&2; }

# copy SRC DIR NAME MODE: SRC into DIR/NAME atomically (a temporary name, then rename).
copy() {
  cp "$1" "$2/.$3.tmp" && chmod "$4" "$2/.$3.tmp" && mv -f "$2/.$3.tmp" "$2/$3"
}

install_files() {
  mkdir -p "$CNI_BIN_DIR" "$NODE_TUNNELGATE_DIR"
  # The plane first: a tunnelgate without its plane beside it cannot start a tunnel.
  copy "$SOURCE_DIR/bin/tunnelgate-plane" "$NODE_TUNNELGATE_DIR" tunnelgate-plane 755
  copy "$SOURCE_DIR/bin/tunnelgate" "$NODE_TUNNELGATE_DIR" tunnelgate 755
  copy "$SOURCE_DIR/bin/tunnelgate-cni" "$CNI_BIN_DIR" tunnelgate-cni 755
  mkdir -p "$NODE_TUNNEL_DIR"
  chmod 700 "$NODE_TUNNEL_DIR"
  if [ -d "$SECRET_DIR" ]; then
    for f in "$SECRET_DIR"/*.json "$SECRET_DIR"/*.conf; do
      [ -f "$f" ] || continue
      copy "$f" "$NODE_TUNNEL_DIR" "$(basename "$f")" 600
    done
  fi
}

# primary: the conflist the runtime loads (containerd and CRI-O take the first in lexical order).
primary() {
  for f in "$CNI_NET_DIR"/*.conflist; do
    [ -f "$f" ] && { echo "$f"; return 0; }
  done
  return 1
}

# The plugin's entry: the capability that makes containerd pass pod annotations, the node's paths.
entry() {
  jq -n --arg t "$TUNNELGATE_PATH" '{type: "tunnelgate-cni", tunnelgate: $t,
    tunnelDirectory: "/etc/tunnelgate/cni", stateDirectory: "/run/tunnelgate-cni",
    capabilities: {"io.kubernetes.cri.pod-annotations": true}}'
}

# chain: appends the entry to the primary conflist's plugins when it has none; true when it is there.
chain() {
  f=$(primary) || { log "no *.conflist in $CNI_NET_DIR yet (the primary plugin has not installed its own)"; return 1; }
  if jq -e '.plugins | any(.type == "tunnelgate-cni")' "$f" >/dev/null; then return 0; fi
  jq --argjson e "$(entry)" '.plugins += [$e]' "$f" >"$f.tunnelgate.tmp" && mv -f "$f.tunnelgate.tmp" "$f"
  log "chained tunnelgate-cni into $f"
}

unchain() {
  for f in "$CNI_NET_DIR"/*.conflist; do
    [ -f "$f" ] || continue
    jq -e '.plugins | any(.type == "tunnelgate-cni")' "$f" >/dev/null || continue
    jq '.plugins |= map(select(.type != "tunnelgate-cni"))' "$f" >"$f.tunnelgate.tmp" && mv -f "$f.tunnelgate.tmp" "$f"
    log "took tunnelgate-cni out of $f"
  done
}

case ${1:-} in
--once) install_files; chain; exit $? ;;
--remove) unchain; exit 0 ;;
"") ;;
*) log "usage: $0 [--once | --remove]"; exit 64 ;;
esac

install_files
trap 'exit 0' TERM INT
while :; do
  chain || true
  sleep "$INTERVAL" &
  wait $! || true
done
