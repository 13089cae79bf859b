#!/usr/bin/env bash
# The packet plane: the unprivileged, sandboxed process that runs a tunnel's runtime, checked from the
# outside and attacked from the inside.
#
#   C (tunnelgate: engine + packet plane) ── R ── L (tunnelgate, the example runtime's peer)
#
# Asserted: the plane is tunnelgate-plane, found beside tunnelgate and holding no Foundation or engine
# code (symbols, mapped files); a tunnelgate without it, or with one others could write, refuses `up`
# and makes nothing. For a tunnel without a runtime and for the example callback runtime: the plane runs as a uid
# of its own (not root), with no capability in any set, no_new_privs, a seccomp filter, an empty
# environment, a read-only root and the engine's state directory hidden, and no netlink socket; the
# engine keeps only the capabilities it needs. A hostile runtime (Tests/HostileRuntime) tries to add a
# route over netlink, open raw and packet sockets, write under / and /etc, read the engine's state file
# and a root-only key file (also one in a hidden directory) and /etc/shadow, ptrace the engine, read its
# memory, kill it, become root, mount, make a user namespace, fork, exec a shell, load BPF and a module,
# mark a socket, bind port 80, make itself dumpable: each is refused, the tunnel stays up and the kernel
# as the engine made it. The same runtime flooding its channel with garbage is ended by the engine, which
# stays up, holds the kill switch (nothing leaves C) and says why. A plane killed with SIGKILL, or hung
# (SIGSTOP), is started again under the restart policy with the same TUN (same interface index), and
# traffic resumes (the configuration's "restart"); with --restart never overriding it, under a kill switch,
# the engine stays, disconnected, holding it. A policy that is not one is refused before anything starts.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
tg_begin --runtime
bash "$TG_ROOT/Tests/HostileRuntime/build.sh" "$TG_TMP/hostile" >/dev/null || tg_bail "the hostile runtime fixture builds"
HOSTILE=$TG_TMP/hostile/libhostile-runtime.so
chmod 755 "$TG_TMP/hostile"

tg_secret_file "plane-sandbox-$RANDOM$RANDOM"
# A root-only key file outside any hidden directory (uid isolation alone must keep it), and one in /tmp
# (hidden from the plane by its private /tmp).
KEY=/var/tmp/tg-plane-key-$$
printf 'root-only-key\n' >"$KEY"
chmod 600 "$KEY"
tg_defer rm -f "$KEY"

config() { # FILE NAME ADDRESS BIND PEER LIBRARY EXTRA-ARGS EXTRA-TOP (lib.sh tg_runtime_config)
  tg_runtime_config "$1" "$2" "$3" "$4" "$5" --routes '["0.0.0.0/0"]' --library "$6" \
    --args ', "--keepalive-ms", "200"'"$7" --packet-path callback --top "$8"
}
status_json() { ip netns exec "$1" "$TG" status "$2" --json 2>/dev/null; }

# The plane's executable is tunnelgate-plane: no Foundation, none of the engine's modules; tunnelgate, the
# engine, has the engine's modules and no Foundation either (only tunnelgate-on-demand, which `on-demand`
# becomes, links NetworkExtension and so Foundation). Symbols (Swift's mangling: $s, the module name's
# length, the name) are counted in the three binaries, so each count can fail both ways.
foundation_modules='^\$s(20FoundationEssentials|10Foundation|15CoreFoundation|16NetworkExtension)'
engine_modules='^\$s(6Engine|7Netlink|8Nftables|9DNSConfig|7Session)'
symbols() { nm "$2" 2>/dev/null | awk '{print $NF}' | grep -cE "$1"; }
ON_DEMAND=$(dirname "$TG")/tunnelgate-on-demand
check "[executable] tunnelgate has the engine's symbols ($(symbols "$engine_modules" "$TG"))" \
  test "$(symbols "$engine_modules" "$TG")" -gt 1000
check_eq "[executable] ... and none of Foundation's or NetworkExtension's" 0 "$(symbols "$foundation_modules" "$TG")"
check "[executable] tunnelgate-on-demand has them ($(symbols "$foundation_modules" "$ON_DEMAND"))" \
  test "$(symbols "$foundation_modules" "$ON_DEMAND")" -gt 1000
check_eq "[executable] tunnelgate-plane has neither" "0 0" \
  "$(symbols "$engine_modules" "$TG_PLANE") $(symbols "$foundation_modules" "$TG_PLANE")"
check_plane_executable() { # LABEL NS NAME
  local pid
  pid=$(status_json "$2" "$3" | jq -r '.planePID // empty')
  check_eq "[$1] the plane runs tunnelgate-plane" "$(readlink -f "$TG_PLANE")" "$(readlink "/proc/${pid:-0}/exe" 2>&1)"
  check_eq "[$1] ... with no Foundation library mapped" "" "$(grep -i foundation "/proc/${pid:-0}/maps" 2>&1)"
  check_eq "[$1] ... and its command line is tunnelgate-plane" tunnelgate-plane "$(tr '\0' ' ' <"/proc/${pid:-0}/cmdline" 2>&1 | sed 's/ $//')"
}
status_is() { status_json "$1" "$2" | jq -e "$3" >/dev/null; }

# --- no runtime, and the example runtime: the sandbox from outside ----------------------------------------
cat >"$TG_TMP/none.json" <<CFG
{"name": "tgn", "tunnelRemoteAddress": "$CARRIER4", "mtu": 1400,
 "ipv4Settings": {"addresses": ["10.62.0.1"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["10.62.0.0/24"]}}
CFG
tg_run ip netns exec "$NS_C" "$TG" up "$TG_TMP/none.json" --detach
check_rc "[none] up" 0
tg_check_plane none "$NS_C" tgn
check_plane_executable none "$NS_C" tgn
tg_run ip netns exec "$NS_C" "$TG" down tgn
check_rc "[none] down" 0

# --- the plane's executable: beside tunnelgate, refused when missing or replaceable by others -----------
alone=$TG_TMP/alone
mkdir -p "$alone" && chmod 755 "$alone" && cp "$TG" "$alone/tunnelgate"
tg_run ip netns exec "$NS_C" "$alone/tunnelgate" up "$TG_TMP/none.json"
check_rc "[executable] a tunnelgate copied without its plane: up fails" 1
check_match "[executable] ... naming where it looked" \
  "the packet plane's executable is missing: neither $(tg_re "$alone/tunnelgate-plane") nor $(tg_re "$TG_TMP/lib/tunnelgate/tunnelgate-plane") exists" "$TG_ERR"
check_eq "[executable] ... having made nothing: no tgn link in C" "" "$(ip -n "$NS_C" -o link show tgn 2>/dev/null)"
cp "$TG_PLANE" "$alone/tunnelgate-plane" && chmod 777 "$alone/tunnelgate-plane"
tg_run ip netns exec "$NS_C" "$alone/tunnelgate" up "$TG_TMP/none.json"
check_rc "[executable] a plane executable others can write: up fails" 1
check_match "[executable] ... refusing it, never running it" "$(tg_re "$alone/tunnelgate-plane"): writable by others" "$TG_ERR"
check_eq "[executable] ... having made nothing" "" "$(ip -n "$NS_C" -o link show tgn 2>/dev/null)"
chmod 755 "$alone/tunnelgate-plane"
tg_run ip netns exec "$NS_C" "$alone/tunnelgate" up "$TG_TMP/none.json" --detach
check_rc "[executable] with the plane beside it, that copy's up works" 0
check_eq "[executable] ... and runs the plane beside it" "$alone/tunnelgate-plane" \
  "$(readlink "/proc/$(status_json "$NS_C" tgn | jq -r '.planePID // 0')/exe" 2>&1)"
tg_run ip netns exec "$NS_C" "$alone/tunnelgate" down tgn
check_rc "[executable] down" 0
# The on-demand watcher is found the same way: missing, `on-demand` says where it looked and runs nothing;
# beside it, `on-demand` becomes it (the same pid: what the pid file and a unit's MainPID= name).
tg_run ip netns exec "$NS_C" "$alone/tunnelgate" on-demand --clean
check_rc "[executable] a tunnelgate copied without its on-demand watcher: on-demand fails" 1
check_match "[executable] ... naming where it looked" \
  "the on-demand watcher's executable is missing: neither $(tg_re "$alone/tunnelgate-on-demand") nor $(tg_re "$TG_TMP/lib/tunnelgate/tunnelgate-on-demand") exists" "$TG_ERR"
cp "$ON_DEMAND" "$alone/tunnelgate-on-demand" && chmod 777 "$alone/tunnelgate-on-demand"
tg_run ip netns exec "$NS_C" "$alone/tunnelgate" on-demand --clean
check_match "[executable] a watcher others can write is refused" "$(tg_re "$alone/tunnelgate-on-demand"): writable by others" "$TG_ERR"
chmod 755 "$alone/tunnelgate-on-demand"
tg_run ip netns exec "$NS_C" "$alone/tunnelgate" on-demand --clean
check_eq "[executable] beside it, on-demand --clean runs it" "0 nothing to clean" "$TG_RC $TG_OUT"
ip netns exec "$NS_C" "$alone/tunnelgate" on-demand >"$TG_TMP/watch.log" 2>&1 &
watcher=$!
tg_defer tg_end_if_running "$watcher"
runs_watcher() { [ "$(readlink "/proc/$watcher/exe")" == "$alone/tunnelgate-on-demand" ]; }
wait_for "[executable] ... and the watcher is tunnelgate's own pid, now running tunnelgate-on-demand" 10 runs_watcher
kill -TERM "$watcher"; rc=0; wait "$watcher" || rc=$?
check_eq "[executable] ... which ends on SIGTERM with 0" 0 "$rc"

config "$TG_TMP/a.json" tga 10.60.0.1 "$C_ETH0_4:5400" "$LAN4:5400" "$LIB" "" ', "includeAllNetworks": true, "carrierEndpoints": ["'"$LAN4"':5400/udp"], "restart": {"policy": "on-failure", "attempts": 3}'
config "$TG_TMP/b.json" tgb 10.60.0.2 "$LAN4:5400" "$C_ETH0_4:5400" "$LIB" "" ""
sed -i 's|"includedRoutes": \["0.0.0.0/0"\]|"includedRoutes": ["10.60.0.0/24"]|' "$TG_TMP/b.json"
tg_run ip netns exec "$NS_L" "$TG" up "$TG_TMP/b.json" --detach
check_rc "[callback] up in L" 0
# A restart policy that is not one changes nothing.
tg_run ip netns exec "$NS_C" "$TG" up "$TG_TMP/a.json" --detach --restart sometimes
check_rc "[restart] up --restart sometimes: a usage error" 64
check_match "... naming the option and the policies" "--restart: 'sometimes' is not a restart policy \\(never, on-failure or on-failure:ATTEMPTS\\)" "$TG_ERR"
check_eq "... and nothing was started" "" "$(tg_tunnel_pids "$NS_C")"
sed 's/"attempts": 3/"attempts": 0/' "$TG_TMP/a.json" >"$TG_TMP/a0.json"
tg_run "$TG" validate "$TG_TMP/a0.json"
check_rc "[restart] restart.attempts 0: validate fails" 1
check_match "... naming the key" "restart.attempts: 0 is out of range \\(1–100\\)" "$TG_ERR"
tg_run ip netns exec "$NS_C" "$TG" up "$TG_TMP/a.json" --detach
check_rc "[callback] up in C (full tunnel, kill switch, \"restart\": on-failure, 3 attempts)" 0
check_ping "[callback] ping crosses the tunnel" "$NS_C" 10.60.0.2
tg_check_plane callback "$NS_C" tga
check_plane_executable callback "$NS_C" tga
engine=$(tg_tunnel_pids "$NS_C" | head -n 1)
# NET_ADMIN NET_BIND_SERVICE SYS_ADMIN SETUID SETGID SETPCAP KILL DAC_OVERRIDE DAC_READ_SEARCH IPC_LOCK SYS_PTRACE
check_match "[engine] keeps only the capabilities it needs" '^CapEff:[[:space:]]+00000000002855e6$' "$(cat "/proc/$engine/status")"
check_match "[engine] ... in its bounding set too" '^CapBnd:[[:space:]]+00000000002855e6$' "$(cat "/proc/$engine/status")"

# --- the plane killed: restarted with the same TUN ------------------------------------------------------------
tg_lab_leak_declare --carrier "$LAN4:5400/udp@$C_ETH0_4:5400"
index=$(status_json "$NS_C" tga | jq .interfaceIndex)
old_plane=$(status_json "$NS_C" tga | jq .planePID)
kill -KILL "$old_plane"
plane_changed() { local p; p=$(status_json "$NS_C" tga | jq -r '.planePID // empty'); [ -n "$p" ] && [ "$p" != "$old_plane" ]; }
wait_for "[SIGKILL] a new plane runs" 10 plane_changed
wait_for "[SIGKILL] connected again" 10 status_is "$NS_C" tga '.status == "connected"'
check "[SIGKILL] the engine survived (pid $engine)" test -d "/proc/$engine"
check_eq "[SIGKILL] ... with the same TUN (interface index)" "$index" "$(status_json "$NS_C" tga | jq .interfaceIndex)"
wait_for "[SIGKILL] ping crosses the tunnel again" 10 ip netns exec "$NS_C" ping -n -c 1 -W 1 10.60.0.2
check_match "[SIGKILL] the log says the plane was restarted" 'packet plane restarted \(attempt 1\) after: the packet plane killed by signal 9' \
  "$(cat "$(tg_state_dir "$NS_C")/tga.log")"
check_lab_no_leaks "[SIGKILL and restart] nothing left C's physical interfaces but the carrier 5-tuples"

# --- the plane hung: the engine notices its silence and restarts it --------------------------------------------
old_plane=$(status_json "$NS_C" tga | jq .planePID)
kill -STOP "$old_plane"
wait_for "[SIGSTOP] within 15 s the engine has replaced the hung plane" 15 plane_changed
wait_for "[SIGSTOP] connected again" 10 status_is "$NS_C" tga '.status == "connected"'
check_match "[SIGSTOP] the log says why" 'said nothing for 10 s \(hung\)' "$(cat "$(tg_state_dir "$NS_C")/tga.log")"
check "[SIGSTOP] the hung plane is gone" bash -c "[ ! -d /proc/$old_plane ] || grep -q '^State:.*Z' /proc/$old_plane/status"
# --- restarts in a row: three are allowed ("attempts": 3), the fourth failure ends the runtime ---------------
old_plane=$(status_json "$NS_C" tga | jq .planePID)
kill -KILL "$old_plane"
wait_for "[in a row] a third quick failure: restarted again" 10 plane_changed
check_match "[in a row] ... as attempt 3 of 3" 'packet plane restarted \(attempt 3\)' "$(cat "$(tg_state_dir "$NS_C")/tga.log")"
old_plane=$(status_json "$NS_C" tga | jq .planePID)
kill -KILL "$old_plane"
wait_for "[in a row] a fourth: the runtime has failed (disconnected, the reason kept)" 10 status_is "$NS_C" tga \
  '.status == "disconnected" and (.lastDisconnectError | test("killed by signal 9"))'
check_no_match "[in a row] ... with no attempt 4" 'attempt 4' "$(cat "$(tg_state_dir "$NS_C")/tga.log")"
check "[in a row] the engine still runs, holding the kill switch" status_is "$NS_C" tga '.killSwitch and .planePID == null'
tg_run ip netns exec "$NS_C" "$TG" down tga
check_rc "[callback] down" 0

# --- a hostile runtime --------------------------------------------------------------------------------------
state_file="$(tg_state_dir "$NS_C")/tgh.state"
config "$TG_TMP/h.json" tgh 10.61.0.1 "$C_ETH0_4:5401" "$LAN4:5401" "$HOSTILE" \
  ', "--read", "'"$KEY"'", "--read-hidden", "'"$secret"'", "--state", "'"$state_file"'"' ', "includeAllNetworks": true'
rules_before=$(ip -n "$NS_C" -4 rule show; ip -n "$NS_C" -4 route show table all)
tg_run ip netns exec "$NS_C" "$TG" up "$TG_TMP/h.json" --detach
check_rc "[hostile] up" 0
attempts=$(ip netns exec "$NS_C" "$TG" message tgh attempts | jq -c .attempts)
expect() { # KEY ERRNO-NAME WHAT
  check_eq "[hostile] $3: refused ($2)" "$2" "$(jq -r --arg k "$1" '.[$k]' <<<"$attempts")"
}
expect netlinkRoute EPERM "a route added over netlink"
expect rawSocket EPERM "a raw socket"
expect packetSocket EPERM "a packet socket"
expect writeEtc EROFS "a file written under /etc"
expect writeRoot EROFS "a file written under /"
expect readEngineStateFile ENOENT "the engine's state file read"
expect readKeyFile EACCES "a root-only key file read"
expect readHiddenKeyFile ENOENT "a key file in the test's /tmp read"
expect readShadow EACCES "/etc/shadow read"
expect ptraceEngine EPERM "the engine ptraced"
expect readEngineMemory EPERM "the engine's memory read (process_vm_readv)"
expect killEngine EPERM "the engine killed"
expect setuidRoot EPERM "setuid(0)"
expect mount EPERM "a mount"
expect unshareUser EPERM "a user namespace"
expect fork EPERM "fork"
expect execShell EPERM "exec of /bin/sh"
expect bpf EPERM "bpf"
expect loadModule EPERM "a kernel module loaded"
expect markSocket EPERM "a socket marked with the tunnel's fwmark (SO_MARK)"
expect bindPort80 EACCES "port 80 bound"
expect dumpable EPERM "itself made dumpable again"
check "[hostile] the engine still runs" test -d "/proc/$(tg_tunnel_pids "$NS_C" | head -n 1)"
check "[hostile] the tunnel is up (connected)" status_is "$NS_C" tgh '.status == "connected"'
check_fails "[hostile] nothing was written to the host's /etc" test -e /etc/tunnelgate-hostile-was-here
rules_after=$(ip -n "$NS_C" -4 rule show; ip -n "$NS_C" -4 route show table all)
check_no_match "[hostile] no blackhole route appeared in C" 'blackhole' "$rules_after"
tg_run ip netns exec "$NS_C" "$TG" down tgh
check_rc "[hostile] down" 0
check_eq "[hostile] after down C's rules and routes are as before" "$rules_before" "$(ip -n "$NS_C" -4 rule show; ip -n "$NS_C" -4 route show table all)"

# --- a runtime flooding and garbling its channel: the engine ends the plane, stays, holds the kill switch -----
# The configuration asks for restarts; --restart never overrides it: the flooding plane is not started again.
config "$TG_TMP/f.json" tgf 10.61.0.1 "$C_ETH0_4:5402" "$LAN4:5402" "$HOSTILE" ', "--flood", "5000"' \
  ', "includeAllNetworks": true, "restart": {"policy": "on-failure"}'
tg_run ip netns exec "$NS_C" "$TG" up "$TG_TMP/f.json" --detach --restart never
check_rc "[flood] up --restart never" 0
engine=$(tg_tunnel_pids "$NS_C" | head -n 1)
wait_for "[flood] the engine ends the plane and says why" 10 status_is "$NS_C" tgf \
  '.status == "disconnected" and (.lastDisconnectError | test("flooded or garbled"))'
check "[flood] the engine is still running" test -d "/proc/$engine"
check "[flood] the kill switch is on" status_is "$NS_C" tgf '.killSwitch'
check_no_match "[flood] --restart never: the plane was not started again" 'restarting the packet plane' \
  "$(cat "$(tg_state_dir "$NS_C")/tgf.log")"
tg_lab_leaks_reset
ip netns exec "$NS_C" ping -n -c 2 -i 0.2 -W 0.3 -I eth0 "$INCLUDED4" >/dev/null 2>&1
check_lab_no_leaks "[a flooded channel] nothing left C's physical interfaces but the carrier 5-tuples"
tg_run ip netns exec "$NS_C" "$TG" down tgf
check_rc "[flood] down removes it" 0

tg_summary
