#!/usr/bin/env bash
# systemd-unit: the packaged units run a tunnel under a real systemd (PID 1 of a booted Debian 12
# container) with all their hardening: up, stop (ExecStop), a SIGKILL (ExecStopPost removes the residue,
# Restart= brings it back), isolate mode (tunnelgate-netns@), the main process's capabilities,
# no_new_privs and read-only /usr as the unit says, and with includeAllNetworks a SIGKILL whose
# ExecStopPost= (down --keep-kill-switch) keeps the kill switch while removing the rest.
#
#   this machine
#   └─ systemd-nspawn -b --private-network   ROOT: mmdebstrap bookworm + systemd, dbus, iproute2,
#      ┌──────────────────────────────────────────── and the .deb (apt-get install ./tunnelgate_….deb)
#      │ PID 1 systemd          network namespace of its own: lo, a veth "uplink" 198.18.0.2/24
#      │                        (the carrier 198.18.0.10's route), then the tunnels' TUNs
#      │  ├─ tunnelgate@tg0.service        → TUN tg0 here, routes in its own table
#      │  └─ tunnelgate-netns@box.service  → TUN box in namespace "box" (ip netns add box)
#      └─ commands enter it with nsenter; kernel state is read with ip/nft in its namespaces
#
# The units run as shipped: `tunnelgate up NAME` (found in /etc/tunnelgate) as Type=notify, so
# `systemctl start` returns once READY=1 came, i.e. once the tunnel is applied and verified; STATUS= is
# the unit's status text; WatchdogSec= is met by WATCHDOG=1 from the event loop (a SIGSTOPped engine is
# killed for it); the names `up NAME` finds and refuses, and `tunnelgate list`, are checked in the root.
# Only RestartSec= is shortened (and a test instance gets a short WatchdogSec=) by drop-ins.
# Bounded: every wait polls with a timeout; the container is powered off (then killed) by the cleanup
# stack (netns/lib.sh tg_defer), also when a check bails out or the run is interrupted.
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"

tg_begin --no-topology --no-binary --tmp --needs systemd-nspawn
cache=$TG_ROOT/.build/package-test/cache
mkdir -p "$cache"
ROOT=$TG_TMP/root
nspawn_pid="" leader=""
# stop_container: powers the container off (SIGRTMIN+4 to its systemd), kills nspawn if it does not end,
# then removes nspawn's runtime directories on this machine if no other container uses them (rmdir: only
# empty ones). With TG_KEEP_CONTAINER set it keeps the container and its root: the rest of the cleanup
# stack (the removal of $TG_TMP, which holds the root) is dropped.
stop_container() {
  if [ -n "${TG_KEEP_CONTAINER:-}" ]; then
    echo "# kept: nsenter --target $leader --all; root $ROOT"
    TG_DEFERRED=()
    return
  fi
  if [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; then
    [ -n "$leader" ] && kill -s SIGRTMIN+4 "$leader" 2>/dev/null
    _tg_poll 20 _tg_gone "$nspawn_pid" || kill -KILL "$nspawn_pid" 2>/dev/null
    _tg_poll 5 _tg_gone "$nspawn_pid"
  fi
  rmdir /run/systemd/nspawn/propagate /run/systemd/nspawn/locks /run/systemd/nspawn 2>/dev/null
  return 0
}
_tg_gone() { ! kill -0 "$1" 2>/dev/null; }

# --- The root, with the package installed ---------------------------------------------------------------
tg_run bash "$TG_ROOT/Scripts/package-deb.sh" --output "$TG_TMP/out"
check_rc "Scripts/package-deb.sh builds the package" 0 || tg_bail "no package" "$TG_ERR"
deb=$(printf '%s\n' "$TG_OUT" | tail -n 1)
# keep_downloads FROM CACHE: the .debs mmdebstrap downloaded, into CACHE under a temporary name and
# renamed, so a run reading CACHE at the same time never sees half a file.
mkdir -p "$TG_TMP/cache-out"
keep_downloads() {
  local f
  for f in "$1"/*.deb; do
    [ -e "$f" ] && [ ! -e "$2/${f##*/}" ] || continue
    cp "$f" "$2/.${f##*/}.part" && mv "$2/.${f##*/}.part" "$2/${f##*/}"
  done
  return 0
}
sources=/etc/apt/sources.list.d/debian.sources
[ -f "$sources" ] || sources=/etc/apt/sources.list
t0=$(_tg_now_ms)
tg_run mmdebstrap --variant=apt --include=systemd,systemd-sysv,dbus,iproute2 --skip=download/empty \
  --skip=essential/unlink \
  --setup-hook="mkdir -p \"\$1\"/var/cache/apt/archives" \
  --setup-hook="sync-in $cache /var/cache/apt/archives/" \
  --customize-hook="copy-in $deb /tmp" \
  --customize-hook="chroot \"\$1\" apt-get install -y -q --no-install-recommends /tmp/$(basename "$deb")" \
  --customize-hook="sync-out /var/cache/apt/archives $TG_TMP/cache-out" \
  bookworm "$ROOT" "$sources"
keep_downloads "$TG_TMP/cache-out" "$cache"
check_rc "a Debian 12 root with systemd and the package installed ($(( ($(_tg_now_ms) - t0) / 1000 )) s)" 0 ||
  tg_bail "no root" "$TG_ERR"

# The tunnels' configurations (IP literals; the container has only lo, which is all `up` needs here).
write_config() {
  cat >"$ROOT/etc/tunnelgate/$1.json" <<EOF
{
  "name": "$1",
  "tunnelRemoteAddress": "198.18.0.10",
  "mtu": 1400,
  "ipv4Settings": {"addresses": ["10.8.0.2"], "subnetMasks": ["255.255.255.0"],
                   "includedRoutes": ["0.0.0.0/0"], "excludedRoutes": ["198.18.0.20/32"]},
  "carrierEndpoints": ["198.18.0.10"]
}
EOF
  chmod 600 "$ROOT/etc/tunnelgate/$1.json"
}
write_config tg0
# tg0 also sets DNS: with no systemd-resolved in the root, the resolv.conf backend replaces
# /etc/resolv.conf (by rename in /etc, which the unit leaves writable) and restores it at down.
jq '.dnsSettings = {"servers": ["10.8.0.1"], "searchDomains": ["tunnel.example"]}' "$ROOT/etc/tunnelgate/tg0.json" \
  >"$ROOT/etc/tunnelgate/tg0.json.new" && mv "$ROOT/etc/tunnelgate/tg0.json.new" "$ROOT/etc/tunnelgate/tg0.json" &&
  chmod 600 "$ROOT/etc/tunnelgate/tg0.json"
printf 'nameserver 192.168.231.1\n' >"$ROOT/etc/resolv.conf"
resolv_before=$(cat "$ROOT/etc/resolv.conf")
write_config box
mkdir -p "$ROOT/etc/systemd/system/tunnelgate@.service.d" "$ROOT/etc/wireguard"
# A short restart delay keeps the test quick; the shipped 5 s is checked from the unit file below.
check_match "the shipped unit restarts on failure after 5 s" '^RestartSec=5s$' "$(cat "$ROOT/usr/lib/systemd/system/tunnelgate@.service")"
for unit in tunnelgate@ tunnelgate-netns@; do
  check_match "the shipped $unit.service sets a watchdog (WatchdogSec=)" '^WatchdogSec=[0-9]+s$' \
    "$(cat "$ROOT/usr/lib/systemd/system/$unit.service")"
done
printf '[Service]\nRestartSec=1s\n' >"$ROOT/etc/systemd/system/tunnelgate@.service.d/test-restart.conf"

# --- Boot ---------------------------------------------------------------------------------------------
# --resolv-conf=off: the root's own /etc/resolv.conf, not one nspawn mounts over it.
systemd-nspawn -D "$ROOT" --private-network --register=no --keep-unit --bind=/dev/net/tun --resolv-conf=off --quiet -b \
  >"$TG_TMP/console.log" 2>&1 &
nspawn_pid=$!
tg_defer stop_container
find_leader() {
  leader=$(pgrep -P "$nspawn_pid" | head -n 1)
  [ -n "$leader" ] && [ "$(cat "/proc/$leader/comm" 2>/dev/null)" = systemd ]
}
wait_for "the container's systemd starts" 30 find_leader || tg_bail "no container" "$(tail -n 30 "$TG_TMP/console.log")"
find_leader
# in_ct CMD...: CMD inside the container (all its namespaces, its root).
in_ct() { nsenter --target "$leader" --all -- "$@"; }
booted() { grep -qxE 'running|degraded' <<<"$(in_ct systemctl is-system-running 2>/dev/null)"; }
wait_for "the container boots (systemctl is-system-running)" 60 booted ||
  tg_bail "not booted" "$(in_ct systemctl --failed --no-pager 2>&1)" "$(tail -n 30 "$TG_TMP/console.log")"

# ip/nft of the host, in the container's network namespace (or a namespace of its).
ct_ip() { nsenter --target "$leader" --net -- ip "$@"; }
ct_nft() { nsenter --target "$leader" --net -- nft "$@"; }
tunnel_connected() {
  in_ct systemctl is-active "tunnelgate@$1"
  in_ct tunnelgate status "$1" --json 2>&1 | grep '"status" : "connected"'
}
main_pid() { in_ct systemctl show -P MainPID "$1"; }
before=$TG_TMP/before
tg_snapshot_ct() {
  {
    ct_ip -4 rule; ct_ip -6 rule; ct_ip -4 route show table all; ct_ip -6 route show table all
    ct_ip -o link show | awk '{print $2}'; ct_nft list ruleset
  } >"$1" 2>&1
}
# A carrier path: a veth uplink (its peer beside it) whose subnet holds the carrier endpoint (nothing
# leaves the container; without a route to its carrier a tunnel reports reasserting, not connected).
# DAD off first, and the snapshot only once the links have their link-local addresses (as lib.sh's
# topology does), so the snapshots differ only by what a tunnel changed.
nsenter --target "$leader" --net -- sysctl -q -w net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 &&
  ct_ip link add uplink type veth peer name uplink-peer && ct_ip addr add 198.18.0.2/24 dev uplink &&
  ct_ip link set uplink-peer up && ct_ip link set uplink up ||
  tg_bail "a veth uplink in the container"
uplink_settled() {
  local l
  for l in uplink uplink-peer; do
    grep -q 'inet6 fe80::' <<<"$(ct_ip -6 -o addr show dev "$l" scope link)" || return 1
    grep -q "^local fe80::.* dev $l " <<<"$(ct_ip -6 route show table local)" || return 1
  done
  ! grep -q tentative <<<"$(ct_ip -o addr show)"
}
wait_for "the uplink has settled (link-local addresses, nothing tentative)" 10 uplink_settled
tg_snapshot_ct "$before"

# --- tunnelgate@tg0: up ----------------------------------------------------------------------------------
tg_run in_ct systemctl start tunnelgate@tg0
check_rc "systemctl start tunnelgate@tg0" 0
# Type=notify: start returned after READY=1, so the tunnel is complete now, without waiting.
check "as soon as systemctl start returns (READY=1 came), tg0 is connected" tunnel_connected tg0
check_match "… and its default route is in place" ' dev tg0 ' "$(ct_ip route get 198.19.77.1 2>&1)"
check_match "the unit's status text is tunnelgate's STATUS= (connected, the summary)" '^tg0: connected \(table [0-9]+, ' \
  "$(in_ct systemctl show -P StatusText tunnelgate@tg0)"
wait_for "tunnelgate status tg0 says connected" 15 tunnel_connected tg0
# Named configurations, in the root's own /etc.
tg_run in_ct tunnelgate validate tg0
check_rc "tunnelgate validate tg0 (the name) exits 0" 0
check_match "… having read /etc/tunnelgate/tg0.json" '^/etc/tunnelgate/tg0\.json: valid: tunnel tg0' "$TG_OUT"
: >"$ROOT/etc/tunnelgate/dup0.json"
: >"$ROOT/etc/wireguard/dup0.conf"
tg_run in_ct tunnelgate up dup0
check_rc "tunnelgate up dup0, configured twice, is refused" 1
check_eq "… in one line naming both files" \
  "Error: the name dup0 is configured twice: /etc/tunnelgate/dup0.json and /etc/wireguard/dup0.conf; remove one or give the file's path" "$TG_ERR"
tg_run in_ct tunnelgate plan nosuch0
check_rc "tunnelgate plan nosuch0 (no such name) fails" 1
check_eq "… in one line naming the files looked for" \
  "Error: no configuration named nosuch0: looked for /etc/tunnelgate/nosuch0.json, /etc/tunnelgate/nosuch0.conf, /etc/wireguard/nosuch0.conf" "$TG_ERR"
tg_run in_ct tunnelgate up 'bad:name'
check_rc "tunnelgate up 'bad:name' (not an interface name) is a usage error" 64
check_match "… saying why" "^Error: CONFIG 'bad:name' is neither a path .* nor a tunnel name: .*':'" "$TG_ERR"
rm -f "$ROOT/etc/tunnelgate/dup0.json" "$ROOT/etc/wireguard/dup0.conf"
tg_run in_ct tunnelgate list
check_match "tunnelgate list: tg0 is configured in /etc/tunnelgate/tg0.json and running here" \
  '^  tg0 +/etc/tunnelgate/tg0\.json; running in this namespace$' "$TG_OUT"
check_match "… box is configured and not running" '^  box +/etc/tunnelgate/box\.json; not running$' "$TG_OUT"
check_match "… and the running tunnels list tg0 connected" '^  tg0 +this namespace: connected \(pid [0-9]+\)$' "$TG_OUT"
check_eq "tunnelgate list --json: tg0 runs in this namespace" '[""]' \
  "$(in_ct tunnelgate list --json | jq -c '.configured[] | select(.name == "tg0") | .runningIn')"
check "the TUN tg0 exists in the container's namespace" ct_ip link show tg0
check_match "the lookup of an outside address goes through tg0" ' dev tg0 ' "$(ct_ip route get 198.19.77.1 2>&1)"
check_match "the tunnel's DNS server is in the container's /etc/resolv.conf (written under ProtectSystem=strict)" \
  '^nameserver 10\.8\.0\.1$' "$(in_ct cat /etc/resolv.conf)"
check_eq "net.ipv4.conf.all.src_valid_mark is 1 (a sysctl the unit lets it write)" 1 \
  "$(nsenter --target "$leader" --net -- cat /proc/sys/net/ipv4/conf/all/src_valid_mark)"
check_match "the excluded host does not" 'unreachable|dev lo|dev [^t]|Network is unreachable' \
  "$(ct_ip route get 198.18.0.20 2>&1)"
pid=$(main_pid tunnelgate@tg0)
status=$(in_ct cat "/proc/$pid/status" 2>/dev/null)
# KILL 5, SETGID 6, SETUID 7, SETPCAP 8, NET_BIND_SERVICE 10, NET_ADMIN 12, IPC_LOCK 14, SYS_ADMIN 21: 0x2055e0,
# less what the container itself was not given (its init's bounding set).
container_bounding=$(in_ct cat /proc/1/status | awk '/^CapBnd:/ {print $2}')
unit_caps=$(printf '%016x' $(( 0x2055e0 & 0x${container_bounding:-0} )))
check_match "the main process (the engine) has the unit's capabilities only (0x$unit_caps)" \
  "^CapEff:[[:space:]]+$unit_caps\$" "$status"
check_match "… and its bounding set is the same" "^CapBnd:[[:space:]]+$unit_caps\$" "$status"
plane=$(in_ct cat "/proc/$pid/task/$pid/children" 2>/dev/null | awk '{print $1}')
plane_status=$(in_ct cat "/proc/${plane:-0}/status" 2>/dev/null)
check_match "its packet plane (a child) runs as a uid of its own, not root" \
  '^Uid:[[:space:]]+19529[0-9]{5}[[:space:]]' "$plane_status"
check_match "… with no capabilities" '^CapEff:[[:space:]]+0000000000000000$' "$plane_status"
check_match "… and a seccomp filter" '^Seccomp:[[:space:]]+2$' "$plane_status"
check_match "… with no_new_privs" '^NoNewPrivs:[[:space:]]+1$' "$status"
mounts=$(in_ct cat "/proc/$pid/mountinfo" 2>/dev/null)
# mount_options PATH: the options of the mount at PATH in its view (the last one mounted there).
mount_options() { printf '%s\n' "$mounts" | awk -v p="$1" '$5 == p { o = $6 } END { print o }'; }
check_match "… / (so /usr) read-only in its view (ProtectSystem=strict)" '^ro(,|$)' "$(mount_options /)"
check_match "… /etc writable (the resolv.conf backend renames into it)" '^[0-9]+ [0-9]+ [^ ]+ [^ ]+ /etc rw[, ]' "$mounts"
check_match "… /run/tunnelgate writable (its state)" '^[0-9]+ [0-9]+ [^ ]+ [^ ]+ /run/tunnelgate rw[, ]' "$mounts"
check_match "… /home hidden (ProtectHome=yes)" '^[0-9]+ [0-9]+ [^ ]+ [^ ]+ /home ro[, ]' "$mounts"

# --- stop: ExecStop= removes everything ---------------------------------------------------------------
tg_run in_ct systemctl stop tunnelgate@tg0
check_rc "systemctl stop tunnelgate@tg0" 0
check_eq "/etc/resolv.conf is restored" "$resolv_before" "$(in_ct cat /etc/resolv.conf)"
check_eq "src_valid_mark is restored" 0 "$(nsenter --target "$leader" --net -- cat /proc/sys/net/ipv4/conf/all/src_valid_mark)"
check_eq "the unit is inactive (a clean stop, not failed)" inactive "$(in_ct systemctl is-active tunnelgate@tg0)"
tg_snapshot_ct "$TG_TMP/after-stop"
check_same_snapshot "after stop, the container's rules, routes, links and ruleset are as before" "$before" "$TG_TMP/after-stop"
check_match "ExecStop= ran tunnelgate down" 'tg0: down, everything removed' \
  "$(in_ct journalctl -u tunnelgate@tg0 --no-pager -o cat 2>&1)"

# --- SIGKILL: ExecStopPost= removes the residue, Restart= brings the tunnel back --------------------------
tg_run in_ct systemctl start tunnelgate@tg0
wait_for "tunnelgate@tg0 is connected again" 15 tunnel_connected tg0
old=$(main_pid tunnelgate@tg0)
check_match "its main process is tunnelgate (pid $old in the container)" '^tunnelgate$' "$(in_ct cat "/proc/$old/comm" 2>/dev/null)"
in_ct sh -c "kill -KILL $old"
restarted() { local p; p=$(main_pid tunnelgate@tg0); [ -n "$p" ] && [ "$p" != 0 ] && [ "$p" != "$old" ] && tunnel_connected tg0; }
wait_for "after SIGKILL the unit restarts it and it is connected with a new process" 20 restarted
check_eq "systemd counted one restart" 1 "$(in_ct systemctl show -P NRestarts tunnelgate@tg0)"
journal=$(in_ct journalctl -u tunnelgate@tg0 --no-pager -o cat 2>&1)
check_match "ExecStopPost= removed the dead run's residue (its down found the journal)" 'tg0: down, everything removed' \
  "$(printf '%s\n' "$journal" | sed -n '/Main process exited, code=killed/,$p')"
tg_run in_ct systemctl stop tunnelgate@tg0
tg_snapshot_ct "$TG_TMP/after-crash"
check_same_snapshot "after the crash, the restart and a stop, the kernel state is as before" "$before" "$TG_TMP/after-crash"

# --- tunnelgate-netns@box: isolate mode ----------------------------------------------------------------
tg_run in_ct ip netns add box
check_rc "ip netns add box, in the container" 0
tg_run in_ct systemctl start tunnelgate-netns@box
check_rc "systemctl start tunnelgate-netns@box" 0
box_connected() { in_ct tunnelgate status box --netns box --json 2>&1 | grep '"status" : "connected"'; }
wait_for "tunnelgate status box --netns box says connected" 15 box_connected
check_eq "tunnelgate list: box runs in namespace box" '["box"]' \
  "$(in_ct tunnelgate list --json | jq -c '.configured[] | select(.name == "box") | .runningIn')"
check "the TUN box is in namespace box" in_ct ip -n box link show box
check_fails "… and not in the container's own namespace" ct_ip link show box
pid=$(main_pid tunnelgate-netns@box)
check_match "its main process has the same capabilities (CAP_SYS_ADMIN is for setns too), and nothing more" \
  "^CapEff:[[:space:]]+$unit_caps\$" "$(in_ct cat "/proc/$pid/status" 2>/dev/null)"
tg_run in_ct systemctl stop tunnelgate-netns@box
check_rc "systemctl stop tunnelgate-netns@box" 0
check_fails "the TUN box is gone from namespace box" in_ct ip -n box link show box
check_eq "namespace box has only lo left" "lo" "$(in_ct ip -n box -o link show | awk -F': ' '{print $2}' | tr '\n' ' ' | sed 's/ $//')"

# --- tunnelgate-on-demand@box: `tunnelgate on-demand` becomes the watcher under the unit's sandbox ---------
tg_run in_ct systemctl start tunnelgate-on-demand@box
check_rc "systemctl start tunnelgate-on-demand@box" 0
od_runs() { [ "$(in_ct readlink "/proc/$(main_pid tunnelgate-on-demand@box)/exe")" = /usr/lib/tunnelgate/tunnelgate-on-demand ]; }
wait_for "its MainPID runs /usr/lib/tunnelgate/tunnelgate-on-demand (exec'd by tunnelgate, same pid)" 10 od_runs
check_eq "… and the unit is active" active "$(in_ct systemctl is-active tunnelgate-on-demand@box)"
tg_run in_ct systemctl stop tunnelgate-on-demand@box
check_rc "systemctl stop tunnelgate-on-demand@box" 0
check_eq "… a clean stop (ExecStopPost's --clean ran too)" "inactive success" \
  "$(in_ct systemctl is-active tunnelgate-on-demand@box) $(in_ct systemctl show -P Result tunnelgate-on-demand@box)"

check_eq "no tunnelgate unit failed" "" "$(in_ct systemctl list-units --failed --no-legend 'tunnelgate*' 2>&1)"

# --- The watchdog: WATCHDOG=1 from the event loop; a stopped engine is killed for its silence -----------
write_config wd0
mkdir -p "$ROOT/etc/systemd/system/tunnelgate@wd0.service.d"
printf '[Service]\nWatchdogSec=2s\nTimeoutAbortSec=3s\nRestart=no\n' >"$ROOT/etc/systemd/system/tunnelgate@wd0.service.d/test-watchdog.conf"
in_ct systemctl daemon-reload
tg_run in_ct systemctl start tunnelgate@wd0
check_rc "systemctl start tunnelgate@wd0 (WatchdogSec=2s)" 0
last_ping() { in_ct systemctl show -P WatchdogTimestampMonotonic tunnelgate@wd0; }
first=$(last_ping)
pinged_again() { local t; t=$(last_ping); [ -n "$t" ] && [ "$t" != 0 ] && [ "$t" != "$first" ]; }
wait_for "systemd receives WATCHDOG=1 again and again (WatchdogTimestamp moves)" 5 pinged_again
wd_pid=$(main_pid tunnelgate@wd0)
in_ct sh -c "kill -STOP $wd_pid"
wd_ended() { [ "$(in_ct systemctl show -P Result tunnelgate@wd0)" = watchdog ]; }
wait_for "with the engine SIGSTOPped, systemd ends the unit for its watchdog (Result=watchdog)" 20 wd_ended
wd_gone() { [ "$(in_ct systemctl is-active tunnelgate@wd0)" = failed ]; }
wait_for "… and the unit has stopped (failed)" 20 wd_gone
check_fails "… and ExecStopPost= removed its TUN" ct_ip link show wd0
in_ct systemctl reset-failed tunnelgate@wd0

# --- A kill switch and a crash: ExecStopPost= keeps it (fail-closed), and the drop-in that lifts it -----
write_config ks0
jq '.includeAllNetworks = true' "$ROOT/etc/tunnelgate/ks0.json" >"$ROOT/etc/tunnelgate/ks0.json.new" &&
  mv "$ROOT/etc/tunnelgate/ks0.json.new" "$ROOT/etc/tunnelgate/ks0.json" && chmod 600 "$ROOT/etc/tunnelgate/ks0.json"
mkdir -p "$ROOT/etc/systemd/system/tunnelgate@ks0.service.d"
# No restart, so that what a crash leaves can be looked at.
printf '[Service]\nRestart=no\n' >"$ROOT/etc/systemd/system/tunnelgate@ks0.service.d/test-no-restart.conf"
in_ct systemctl daemon-reload
kill_switch() { ct_nft list table inet tunnelgate-ks0 >/dev/null 2>&1; }
ks_connected() { in_ct tunnelgate status ks0 --json 2>&1 | grep '"status" : "connected"'; }
ended() { [ "$(in_ct systemctl is-active tunnelgate@ks0)" = failed ]; }  # (is-active exits 3 when not active)
crash() {
  local p
  p=$(main_pid tunnelgate@ks0)
  in_ct sh -c "kill -KILL $p"
  wait_for "$1: the SIGKILLed unit has ended (failed)" 15 ended
}
tg_run in_ct systemctl start tunnelgate@ks0
wait_for "tunnelgate@ks0 (includeAllNetworks) is connected" 15 ks_connected
check "its kill switch is in place (nft table inet tunnelgate-ks0)" kill_switch
crash "as shipped"
check "as shipped (ExecStopPost=… down --keep-kill-switch), the kill switch holds after the crash" kill_switch
check_fails "… while the dead run's TUN is gone" ct_ip link show ks0
check_eq "… and so are its policy rules" "" "$(ct_ip -4 rule | grep -v -E '^(0|32766|32767):')"
check_match "ExecStopPost= said it kept the kill switch" 'ks0: down, everything removed but its kill switch' \
  "$(in_ct journalctl -u tunnelgate@ks0 --no-pager -o cat 2>&1)"
in_ct systemctl reset-failed tunnelgate@ks0
tg_run in_ct systemctl start tunnelgate@ks0
check_rc "the next start takes over the kept kill switch" 0
check "… and is connected at once (READY=1)" ks_connected
tg_run in_ct systemctl stop tunnelgate@ks0
check_rc "systemctl stop tunnelgate@ks0" 0
check_fails "systemctl stop (a clean stop) removes the kill switch" kill_switch
# The drop-in docs/packaging.md shows for lifting it at every crash instead.
printf '[Service]\nExecStopPost=\nExecStopPost=-/usr/sbin/tunnelgate down %%i\n' >"$ROOT/etc/systemd/system/tunnelgate@ks0.service.d/lift.conf"
in_ct systemctl daemon-reload
tg_run in_ct systemctl start tunnelgate@ks0
check "with the lifting drop-in, tunnelgate@ks0 is connected" ks_connected
crash "lifting"
check_fails "with it, the kill switch is gone after the crash" kill_switch
in_ct systemctl reset-failed tunnelgate@ks0
tg_snapshot_ct "$TG_TMP/after-ks"
check_same_snapshot "after it all, the kernel state is as before" "$before" "$TG_TMP/after-ks"
tg_summary
