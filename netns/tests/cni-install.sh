#!/usr/bin/env bash
# The Kubernetes installer (Examples/kubernetes/install.sh, run by the DaemonSet of tunnelgate-cni.yaml)
# against a node's directories made here: /etc/cni/net.d with a primary plugin's conflist (flannel's
# shape) and another, /opt/cni/bin, /opt/tunnelgate/bin, /etc/tunnelgate/cni, and the mounted Secret.
# No namespace and no network: the installer only copies files and edits the conflist.
#
# Asserted: the binaries and the tunnel files land with their modes; tunnelgate-cni is chained last
# into the first conflist only, with the pod-annotations capability, once however often it runs; the
# entry, as containerd derives a plugin's configuration from it, is accepted by tunnelgate-cni (a pod
# without the annotation is passed through: prevResult unchanged); when the primary plugin rewrites
# its conflist the running installer chains it again; SIGTERM leaves the chain; --remove gives back
# the primary plugin's conflist exactly.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
INSTALL=$TG_ROOT/Examples/kubernetes/install.sh
tg_begin --no-topology --tmp --cni
INSTALLER_PID=""
stop_installer() { [ -z "$INSTALLER_PID" ] || kill "$INSTALLER_PID" 2>/dev/null; return 0; }
tg_defer stop_installer

node=$TG_TMP/node
mkdir -p "$node/etc/cni/net.d" "$TG_TMP/source/bin" "$TG_TMP/secret"
cp "$TG" "$TG_PLANE" "$CNI" "$TG_TMP/source/bin/"
printf '[Interface]\nPrivateKey = x\n' >"$TG_TMP/secret/corp.conf"
echo '{"name": "eu"}' >"$TG_TMP/secret/eu.json"
echo 'not a tunnel' >"$TG_TMP/secret/README"
cat >"$node/etc/cni/net.d/10-flannel.conflist" <<'EOF'
{
  "name": "cbr0",
  "cniVersion": "0.3.1",
  "plugins": [
    {"type": "flannel", "delegate": {"hairpinMode": true, "isDefaultGateway": true}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
cp "$node/etc/cni/net.d/10-flannel.conflist" "$TG_TMP/flannel.original"
echo '{"name": "other", "cniVersion": "1.0.0", "plugins": [{"type": "bridge"}]}' >"$node/etc/cni/net.d/99-other.conflist"
cp "$node/etc/cni/net.d/99-other.conflist" "$TG_TMP/other.original"
export CNI_NET_DIR=$node/etc/cni/net.d CNI_BIN_DIR=$node/opt/cni/bin SOURCE_DIR=$TG_TMP/source \
  NODE_TUNNEL_DIR=$node/etc/tunnelgate/cni NODE_TUNNELGATE_DIR=$node/opt/tunnelgate/bin SECRET_DIR=$TG_TMP/secret \
  TUNNELGATE_PATH=/opt/tunnelgate/bin/tunnelgate INTERVAL=1
primary=$node/etc/cni/net.d/10-flannel.conflist
entries() { jq '[.plugins[] | select(.type == "tunnelgate-cni")] | length' "$primary"; }
chained_once() { [ "$(entries)" -eq 1 ]; }

tg_run sh "$INSTALL" --once
check_rc "install.sh --once" 0
check_eq "tunnelgate-cni is in the node's CNI plugin directory, 0755" 755 "$(stat -c %a "$CNI_BIN_DIR/tunnelgate-cni" 2>&1)"
check "... the same file as built" cmp -s "$CNI" "$CNI_BIN_DIR/tunnelgate-cni"
check_eq "tunnelgate is in /opt/tunnelgate/bin, 0755" 755 "$(stat -c %a "$NODE_TUNNELGATE_DIR/tunnelgate" 2>&1)"
check_eq "... and its packet plane beside it, 0755, the same file as built" "755 same" \
  "$(stat -c %a "$NODE_TUNNELGATE_DIR/tunnelgate-plane" 2>&1) $(cmp -s "$TG_PLANE" "$NODE_TUNNELGATE_DIR/tunnelgate-plane" && echo same)"
check_eq "the tunnel directory is 0700" 700 "$(stat -c %a "$NODE_TUNNEL_DIR" 2>&1)"
check_eq "the tunnel files are there, 0600, and nothing else" "corp.conf 600
eu.json 600" "$(cd "$NODE_TUNNEL_DIR" && stat -c '%n %a' * 2>&1)"
check_eq "tunnelgate-cni is chained last into the first conflist" "flannel portmap tunnelgate-cni" \
  "$(jq -r '[.plugins[].type] | join(" ")' "$primary" 2>&1)"
check_eq "... asking for the pod annotations, with the node's paths" \
  '{"capabilities":{"io.kubernetes.cri.pod-annotations":true},"stateDirectory":"/run/tunnelgate-cni","tunnelDirectory":"/etc/tunnelgate/cni","tunnelgate":"/opt/tunnelgate/bin/tunnelgate","type":"tunnelgate-cni"}' \
  "$(jq -cS '.plugins[-1]' "$primary" 2>&1)"
check "the other conflist is untouched" cmp -s "$TG_TMP/other.original" "$node/etc/cni/net.d/99-other.conflist"
tg_run sh "$INSTALL" --once
check_eq "a second run chains nothing more: one entry" 1 "$(entries)"

# The entry as containerd hands it to the plugin: cniVersion and name inserted, capabilities removed,
# runtimeConfig with the pod's annotations (none that name a tunnel here), and the previous result.
prev='{"cniVersion": "0.3.1", "interfaces": [{"name": "eth0", "mac": "99:88:77:66:55:44", "sandbox": "/var/run/netns/cni-1"}],
       "ips": [{"version": "4", "address": "10.244.1.5/24", "gateway": "10.244.1.1", "interface": 0}], "dns": {}}'
jq --argjson p "$prev" '.plugins[-1] | del(.capabilities)
  + {cniVersion: "0.3.1", name: "cbr0", runtimeConfig: {"io.kubernetes.cri.pod-annotations": {"app": "web"}}, prevResult: $p}' \
  "$primary" >"$TG_TMP/request.json"
tg_run env -i CNI_COMMAND=ADD CNI_CONTAINERID=abc CNI_NETNS=/var/run/netns/cni-1 CNI_IFNAME=eth0 CNI_PATH=/opt/cni/bin \
  CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0" "$CNI" <"$TG_TMP/request.json"
check_rc "tunnelgate-cni accepts the installed entry (ADD of a pod without the annotation)" 0
check_eq "... and passes the pod through: prevResult unchanged" "$(jq -S . <<<"$prev")" "$(jq -S . <<<"$TG_OUT" 2>&1)"

# The running installer, and the primary plugin rewriting its file (twice: at the start, and while it runs).
cp "$TG_TMP/flannel.original" "$primary"
sh "$INSTALL" >"$TG_TMP/installer.log" 2>&1 &
INSTALLER_PID=$!
wait_for "the running installer chains the rewritten conflist" 5 chained_once
cp "$TG_TMP/flannel.original" "$primary"
wait_for "the primary plugin rewrote it again: the installer chains it again (within 5 s)" 5 \
  bash -c "[ \"\$(grep -c 'chained tunnelgate-cni into' '$TG_TMP/installer.log')\" -eq 2 ]"
check_eq "... once" 1 "$(entries)"
kill -TERM "$INSTALLER_PID"
wait_for "SIGTERM: the installer exits" 5 tg_exited "$INSTALLER_PID"
INSTALLER_PID=""
check_eq "... leaving the chain in place" 1 "$(entries)"

tg_run sh "$INSTALL" --remove
check_rc "install.sh --remove" 0
check_eq "the primary conflist is the primary plugin's again" "$(jq -S . "$TG_TMP/flannel.original")" "$(jq -S . "$primary" 2>&1)"
check "the other conflist is still untouched" cmp -s "$TG_TMP/other.original" "$node/etc/cni/net.d/99-other.conflist"
check "the binaries stay (DEL of pods with tunnels needs them)" test -x "$CNI_BIN_DIR/tunnelgate-cni"

tg_summary
