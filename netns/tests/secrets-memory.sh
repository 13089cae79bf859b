#!/usr/bin/env bash
# secrets-memory: what an attacker with root finds in the memory of a running tunnel. The tunnel's own
# process is read as a debugger would (/proc/PID/maps and /proc/PID/mem, netns/tests/memscan.py) while
# traffic crosses it, and the key material is counted: the raw 32 bytes of the private key (the one copy
# the handshake uses, at most), its base64 text and the preshared key's (none: the file buffers that held
# them are wiped after parsing), in locked memory excluded from core dumps (smaps VmFlags "lo", "dd").
#
#   C  tunnelgate "tgmNNN" 10.73.0.1 ── R ── L  wireguard-go "wgmNNN" 10.73.0.2 (UDP 192.168.231.2:51820)
#      [1] a wg-quick file, PrivateKey and PresharedKey inline
#      [2] JSON, privateKeyFile and presharedKeyFile
#   C  tunnelgate "tgs" 10.74.0.1 ──R── L tunnelgate "tgt" 10.74.0.2   (the example runtime, callback ABI)
#      [3] the runtime's secret from secretFile: one copy (kept to scrub what the runtime says)
#
# [5] Without CAP_IPC_LOCK and with RLIMIT_MEMLOCK 0 the keys cannot be locked: `up` says so once, and
#     the key's page is still excluded from core dumps.
# [4] Every process holding a key is non-dumpable (PR_SET_DUMPABLE 0) and has no core limit
#     (RLIMIT_CORE 0): with the core limit raised from outside (prlimit) and SIGABRT, no core file is
#     written. Then `down` removes what the killed owner left, and C is exactly as before.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"

TGM=tgm$((RANDOM % 100000))
WGM=wgm$((RANDOM % 100000))
tg_defer rm -f "/var/run/wireguard/$TGM.sock" "/var/run/wireguard/$WGM.sock"
tg_begin --runtime --needs wireguard-go,wg

umask 077
wg genkey >"$TG_TMP/c.key"; wg pubkey <"$TG_TMP/c.key" >"$TG_TMP/c.pub"
wg genkey >"$TG_TMP/l.key"; wg pubkey <"$TG_TMP/l.key" >"$TG_TMP/l.pub"
wg genpsk >"$TG_TMP/psk"
C_PUB=$(cat "$TG_TMP/c.pub") L_PUB=$(cat "$TG_TMP/l.pub")
# The patterns, each in a file of its own (no command line carries a key): the raw bytes, the base64
# text (without its newline), and the hex wg(8)'s API uses.
pattern() { # NAME KEYFILE: writes NAME.raw, NAME.b64, NAME.hex from the base64 key in KEYFILE
  tr -d '\n' <"$2" >"$TG_TMP/$1.b64"
  base64 -d <"$2" >"$TG_TMP/$1.raw"
  od -An -tx1 <"$TG_TMP/$1.raw" | tr -d ' \n' >"$TG_TMP/$1.hex"
}
pattern priv "$TG_TMP/c.key"
pattern psk "$TG_TMP/psk"
SECRET="runtime-secret-$$-$RANDOM-kept-once"
printf '%s\n' "$SECRET" >"$TG_TMP/secret"
printf '%s' "$SECRET" >"$TG_TMP/secret.text"
chmod 600 "$TG_TMP/c.key" "$TG_TMP/psk" "$TG_TMP/secret"

# The owners run with the process's working directory in $TG_TMP/cwd (where a core file would land),
# without Swift's crash backtracer (it would read the process on SIGABRT), and without CAP_SYS_PTRACE,
# which they do not need: so that a root process that lacks it too (a compromised service) is kept out
# of their memory by the kernel exactly when they are not dumpable (ptrace_may_access), which shows it.
mkdir -p "$TG_TMP/cwd"
NOPTRACE=(setpriv --bounding-set=-sys_ptrace --inh-caps=-sys_ptrace)
tg_up() { # NS CONFIG
  tg_run bash -c "cd '$TG_TMP/cwd' && SWIFT_BACKTRACE=enable=no ip netns exec '$1' ${NOPTRACE[*]} '$TG' up '$2' --detach"
}
owner_pid() { jq -r .pid "$(tg_state_dir "$1")/$2.state" 2>/dev/null; }

l_start() {
  ip netns exec "$NS_L" env LOG_LEVEL=error wireguard-go -f "$WGM" >>"$TG_TMP/wireguard-go.log" 2>&1 &
  L_PID=$!
  wait_for "wireguard-go's API socket in L" 10 test -S "/var/run/wireguard/$WGM.sock"
  in_l ip addr add 10.73.0.2/24 dev "$WGM"
  in_l ip link set "$WGM" up
  in_l wg set "$WGM" private-key "$TG_TMP/l.key" listen-port 51820 \
    peer "$C_PUB" allowed-ips 10.73.0.1/32 preshared-key "$TG_TMP/psk"
}
l_stop() {
  kill "$L_PID" 2>/dev/null
  wait "$L_PID" 2>/dev/null
  rm -f "/var/run/wireguard/$WGM.sock"
}
l_handshake_time() { in_l wg show "$WGM" latest-handshakes | awk '{print $2}'; }

# scan LABEL PID PATTERN-NAME...: reads PID's memory once and keeps the result in $TG_TMP/LABEL.json.
scan() {
  local label=$1 pid=$2 args=() name
  shift 2
  for name in "$@"; do args+=("$name=$TG_TMP/$name"); done
  python3 "$TG_ROOT/netns/tests/memscan.py" "$pid" "${args[@]}" >"$TG_TMP/$label.json" 2>"$TG_TMP/$label.err"
}
count() { jq -r --arg k "$2" '.[$k].count // "none"' "$TG_TMP/$1.json" 2>/dev/null; }
# flags LABEL PATTERN: the VmFlags of the mappings holding PATTERN's copies, one line per copy.
flags() { jq -r --arg k "$2" '.[$k].hits[] | .vmflags | join(" ")' "$TG_TMP/$1.json" 2>/dev/null; }
where() { jq -r --arg k "$2" '.[$k].hits[] | "\(.address) in \(.mapping) [\(.vmflags | join(" "))]"' "$TG_TMP/$1.json" 2>/dev/null; }
check_scanned() { # LABEL
  local scanned
  scanned=$(jq -r '._scanned_bytes // 0' "$TG_TMP/$1.json" 2>/dev/null)
  check "[$1] the owner's memory was read (${scanned:-0} bytes; unreadable: $(jq -c '._unreadable' "$TG_TMP/$1.json" 2>/dev/null))" \
    test "${scanned:-0}" -gt 1000000
}
check_count() { # LABEL PATTERN MAX DESC
  local n
  n=$(count "$1" "$2")
  if [ "$n" != none ] && [ "$n" -le "$3" ]; then
    tg_pass "[$1] $4: $n"
  else
    tg_fail "[$1] $4: $n (at most $3)" "$(where "$1" "$2")"
  fi
}
check_locked() { # LABEL PATTERN DESC: every copy lies in a mapping that is locked and excluded from dumps
  local lines bad
  lines=$(flags "$1" "$2")
  bad=$(printf '%s\n' "$lines" | awk 'NF && !(/(^| )dd( |$)/ && /(^| )lo( |$)/)' | wc -l)
  if [ -n "$lines" ] && [ "$bad" -eq 0 ]; then
    tg_pass "[$1] $3"
  else
    tg_fail "[$1] $3" "$(where "$1" "$2")"
  fi
}
# mem_open PID: what opening /proc/PID/mem gives a root process without CAP_SYS_PTRACE ("opened", or
# the error).
mem_open() {
  "${NOPTRACE[@]}" python3 -c "
try:
    open('/proc/$1/mem', 'rb').close(); print('opened')
except OSError as e:
    print(e.strerror)"
}
check_not_dumpable() { # LABEL PID: PR_SET_DUMPABLE 0 and RLIMIT_CORE 0, as seen from outside
  local label=$1 pid=$2
  check_eq "[$label] a root process without CAP_SYS_PTRACE cannot open the owner's /proc/PID/mem (not dumpable)" \
    "Permission denied" "$(mem_open "$pid")"
  check_match "[$label] the owner's core file size limit is 0, soft and hard (RLIMIT_CORE)" '^Max core file size +0 +0 ' \
    "$(cat "/proc/$pid/limits" 2>&1)"
}

tg_snapshot "$NS_C" "$TG_TMP/c-before"

# --- [1] wg-quick file: PrivateKey and PresharedKey inline ---------------------------------------------
l_start
cat >"$TG_TMP/$TGM.conf" <<CONF
[Interface]
PrivateKey = $(cat "$TG_TMP/c.key")
Address = 10.73.0.1/24
ListenPort = 51831

[Peer]
PublicKey = $L_PUB
PresharedKey = $(cat "$TG_TMP/psk")
Endpoint = $LAN4:51820
AllowedIPs = 10.73.0.0/24
CONF
chmod 600 "$TG_TMP/$TGM.conf"
tg_up "$NS_C" "$TG_TMP/$TGM.conf"
check_rc "[wg-quick] tunnelgate up $TGM.conf" 0
# Read once as soon as the tunnel is up, before traffic has churned the heap (freed, unwiped buffers
# are still intact then), and again after a handshake, traffic and `wg show`.
pid=$(owner_pid "$NS_C" "$TGM")
check "[wg-quick] the owner's pid is known ($pid)" test -n "$pid" -a -d "/proc/${pid:-0}"
scan wg-quick-at-up "$pid" priv.raw priv.b64 psk.raw psk.b64
check_scanned wg-quick-at-up
check_count wg-quick-at-up priv.raw 1 "copies of the raw private key"
check_count wg-quick-at-up priv.b64 0 "copies of the private key's base64 text"
check_count wg-quick-at-up psk.b64 0 "copies of the preshared key's base64 text"
check_count wg-quick-at-up psk.raw 1 "copies of the raw preshared key"
check_ping "[wg-quick] ping 10.73.0.2 crosses the tunnel (a handshake with the PSK)" "$NS_C" 10.73.0.2
check "[wg-quick] wireguard-go completed a handshake" test "$(l_handshake_time)" -gt 0
check "[wg-quick] 50 pings both ways" bash -c "ip netns exec $NS_C ping -q -c 25 -i 0.01 -W 1 10.73.0.2 >/dev/null &&
  ip netns exec $NS_L ping -q -c 25 -i 0.01 -W 1 10.73.0.1 >/dev/null"
check "[wg-quick] wg show on Tunnelgate's interface (its API answers with the keys in hex)" in_c wg show "$TGM"
scan wg-quick "$pid" priv.raw priv.b64 priv.hex psk.raw psk.b64 psk.hex
check_scanned wg-quick
check_count wg-quick priv.raw 1 "copies of the raw private key"
check_count wg-quick priv.b64 0 "copies of the private key's base64 text"
check_count wg-quick psk.b64 0 "copies of the preshared key's base64 text"
check_count wg-quick psk.raw 1 "copies of the raw preshared key"
check_count wg-quick priv.hex 0 "copies of the private key's hex (the wg(8) API's answer, wiped once sent)"
check_count wg-quick psk.hex 0 "copies of the preshared key's hex"
check_locked wg-quick priv.raw "the private key's page is locked (lo) and excluded from core dumps (dd)"
check_locked wg-quick psk.raw "the preshared key's page is locked (lo) and excluded from core dumps (dd)"
check_not_dumpable wg-quick "$pid"

# --- [4] the owner dumps no core, even when its limit is raised from outside -------------------------------
# prlimit raises a soft limit up to the hard one; past a hard limit of 0 only with CAP_SYS_RESOURCE (this
# harness may not have it). Either way, a non-dumpable process is not dumped.
prlimit --pid "$pid" --core=unlimited 2>"$TG_TMP/prlimit.err"
_tg_detail "prlimit --core=unlimited: $(cat "$TG_TMP/prlimit.err" 2>/dev/null)" \
  "$(grep '^Max core file size' "/proc/$pid/limits" 2>&1)"
kill -ABRT "$pid"
wait_for "[dump] the owner died of SIGABRT" 20 tg_exited "$pid"
check_eq "[dump] no core file was written in its working directory" "" "$(ls -A "$TG_TMP/cwd")"
rm -f "$TG_TMP/cwd/"*
tg_run in_c "$TG" down "$TGM"
check_rc "[dump] down removes what the killed owner left" 0
rm -f "/var/run/wireguard/$TGM.sock"

# --- [2] JSON with privateKeyFile and presharedKeyFile ---------------------------------------------------
cat >"$TG_TMP/$TGM.json" <<JSON
{"name": "$TGM", "tunnelRemoteAddress": "$LAN4",
 "ipv4Settings": {"addresses": ["10.73.0.1"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["10.73.0.0/24"]},
 "runtime": {"kind": "wireguard", "privateKeyFile": "$TG_TMP/c.key", "listenPort": 51831,
             "peers": [{"publicKey": "$L_PUB", "presharedKeyFile": "$TG_TMP/psk", "endpoint": "$LAN4:51820",
                        "allowedIPs": ["10.73.0.0/24"]}]}}
JSON
tg_up "$NS_C" "$TG_TMP/$TGM.json"
check_rc "[key files] tunnelgate up $TGM.json" 0
pid=$(owner_pid "$NS_C" "$TGM")
scan key-files-at-up "$pid" priv.raw priv.b64 psk.raw psk.b64
check_count key-files-at-up priv.raw 1 "copies of the raw private key"
check_count key-files-at-up priv.b64 0 "copies of the private key file's base64 text"
check_count key-files-at-up psk.b64 0 "copies of the preshared key file's base64 text"
check_count key-files-at-up psk.raw 1 "copies of the raw preshared key"
check "[key files] 50 pings both ways" bash -c "ip netns exec $NS_C ping -q -c 25 -i 0.01 -W 1 10.73.0.2 >/dev/null &&
  ip netns exec $NS_L ping -q -c 25 -i 0.01 -W 1 10.73.0.1 >/dev/null"
scan key-files "$pid" priv.raw priv.b64 psk.raw psk.b64
check_scanned key-files
check_count key-files priv.raw 1 "copies of the raw private key"
check_count key-files priv.b64 0 "copies of the private key file's base64 text"
check_count key-files psk.b64 0 "copies of the preshared key file's base64 text"
check_count key-files psk.raw 1 "copies of the raw preshared key"
check_locked key-files priv.raw "the private key's page is locked and excluded from core dumps"
check_not_dumpable key-files "$pid"
tg_run in_c "$TG" down "$TGM"
check_rc "[key files] down" 0
wait_for "[key files] the owner exited" 10 tg_exited "$pid"

# --- [5] mlock refused (no CAP_IPC_LOCK, RLIMIT_MEMLOCK 0): said once, and the key still out of dumps -------
tg_run bash -c "cd '$TG_TMP/cwd' && ip netns exec '$NS_C' setpriv --bounding-set=-sys_ptrace,-ipc_lock \
  --inh-caps=-sys_ptrace,-ipc_lock prlimit --memlock=0 '$TG' up '$TG_TMP/$TGM.conf' --detach"
check_rc "[no mlock] tunnelgate up without CAP_IPC_LOCK and with RLIMIT_MEMLOCK 0" 0
check_eq "[no mlock] up says once that the key memory could not be locked" 1 \
  "$(grep -c 'warning: mlock(.*) failed: .*RLIMIT_MEMLOCK is 0 bytes.*MADV_DONTDUMP' <<<"$TG_ERR")"
check "[no mlock] 20 pings both ways" bash -c "ip netns exec $NS_C ping -q -c 10 -i 0.01 -W 1 10.73.0.2 >/dev/null &&
  ip netns exec $NS_L ping -q -c 10 -i 0.01 -W 1 10.73.0.1 >/dev/null"
pid=$(owner_pid "$NS_C" "$TGM")
check_match "[no mlock] the owner's own log says it too" 'warning: mlock' "$(cat "$(tg_state_dir "$NS_C")/$TGM.log" 2>&1)"
scan no-mlock "$pid" priv.raw priv.b64
check_count no-mlock priv.raw 1 "copies of the raw private key"
check_count no-mlock priv.b64 0 "copies of the private key's base64 text"
check_eq "[no mlock] its page is excluded from core dumps (dd) though not locked (no lo)" "dd" \
  "$(flags no-mlock priv.raw | awk '{ dd = / dd( |$)/ ? "dd" : "no dd"; lo = / lo( |$)/ ? " lo" : ""; print dd lo }')"
tg_run in_c "$TG" down "$TGM"
check_rc "[no mlock] down" 0
wait_for "[no mlock] the owner exited" 10 tg_exited "$pid"
l_stop

# --- [3] the callback runtime's secret ---------------------------------------------------------------------
runtime_config() { # FILE NAME ADDRESS BIND PEER (lib.sh tg_runtime_config)
  tg_runtime_config "$1" "$2" "$3" "$4" "$5" --routes '["10.74.0.0/24"]' --secret "\"secretFile\": \"$TG_TMP/secret\"" \
    --packet-path callback
}
runtime_config "$TG_TMP/tgs.json" tgs 10.74.0.1 "$C_ETH0_4:5410" "$LAN4:5410"
runtime_config "$TG_TMP/tgt.json" tgt 10.74.0.2 "$LAN4:5410" "$C_ETH0_4:5410"
tg_up "$NS_C" "$TG_TMP/tgs.json"
check_rc "[runtime] tgs up in C" 0
tg_up "$NS_L" "$TG_TMP/tgt.json"
check_rc "[runtime] tgt up in L" 0
pid=$(owner_pid "$NS_C" tgs)
scan runtime-at-up "$pid" secret.text
check_count runtime-at-up secret.text 1 "copies of the runtime's secret"
check "[runtime] 50 pings both ways through the example runtime (both derived the key from the secret)" \
  bash -c "ip netns exec $NS_C ping -q -c 25 -i 0.01 -W 1 10.74.0.2 >/dev/null &&
  ip netns exec $NS_L ping -q -c 25 -i 0.01 -W 1 10.74.0.1 >/dev/null"
check "[runtime] status is polled meanwhile (the owner scrubs the runtime's status against the secret)" \
  in_c "$TG" status tgs --json
scan runtime "$pid" secret.text
check_scanned runtime
check_count runtime secret.text 1 "copies of the runtime's secret"
check_locked runtime secret.text "the secret's page is locked and excluded from core dumps"
check_not_dumpable runtime "$pid"
tg_run in_c "$TG" down tgs
check_rc "[runtime] down tgs" 0
tg_run in_l "$TG" down tgt
check_rc "[runtime] down tgt" 0
wait_for "[runtime] the owners exited" 10 tg_no_tunnel_process "$NS_C"

tg_snapshot "$NS_C" "$TG_TMP/c-after"
check_same_snapshot "C's kernel state at the end equals the state before" "$TG_TMP/c-before" "$TG_TMP/c-after"
tg_summary
