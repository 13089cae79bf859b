# shellcheck shell=bash
# netns/lib.sh: the network-namespace harness that Tunnelgate's end-to-end scenarios, the demo and the
# test runner share. Sourced, never run. Needs root, iproute2, nftables, ping and jq (Scripts/setup.sh),
# and tunnelgate-lab (docs/lab.md), which builds the topology, counts leaks and takes the snapshots.
#
# Topology built by tg_topology_up: `tunnelgate-lab up netns/topology.json`, four nodes c, r, l, i, whose
# namespaces are named uniquely per run ($NS_C $NS_R $NS_L $NS_I, tgl-RUN-c …), joined by veth pairs
# created inside them (no interface ever sits in the caller's namespace).
#
#   ┌───────────────────────────────────┐
#   │ C  client: tunnelgate runs here   │
#   │    default routes via eth0        │
#   └──┬─────────────────────┬──────────┘
#      │ eth0 .2  ::2        │ eth1 .2  ::2         (a second physical path, no default route via it)
#      │ 10.231.0.0/24       │ 10.232.0.0/24
#      │ fd00:231::/64       │ fd00:232::/64
#      │ c0   .1  ::1        │ c1   .1  ::1
#   ┌──┴─────────────────────┴──────────┐
#   │ R  router: forwards IPv4 and IPv6 │
#   └──┬─────────────────────┬──────────┘
#      │ lan0 .1  ::1        │ inet0 .254  ::fe
#      │ 192.168.231.0/24    │ 198.18.0.0/24
#      │ fd00:a1::/64        │ 2001:db8:18::/64
#      │ eth0 .2  ::2        │ eth0 .10 .20 .30  ::10 ::20 ::30
#   ┌──┴─────────┐        ┌──┴──────────────────────────────┐
#   │ L  LAN host│        │ I  "internet" host              │
#   │ default: R │        │ .10 ::10  the carrier endpoint  │
#   └────────────┘        │ .20 ::20  an "excluded" host    │
#                         │ .30 ::30  an "included" host    │
#                         │ default: R                      │
#                         └─────────────────────────────────┘
#
# The links are the lab's "uplink" (C eth0 - R c0), "uplink2" (C eth1 - R c1), "lan" and "inet": `tg_lab
# impair uplink down` pulls C's cable upstream. C is the lab's client: its leak counters (tg_lab_leaks_reset,
# check_lab_no_leaks, check_lab_not_reached) count what arrives at R from c0 and c1, and by uid what leaves
# C's eth0 and eth1.
# Every address is a name below ($CARRIER4, $EXCLUDED6, $LAN4 …): scenarios use the names, not literals.
# IPv6 addresses are nodad and DAD is off in every namespace, so no address is ever tentative and nothing
# has to wait for DAD. Waits poll kernel state every 50 ms (wait_for); nothing sleeps a fixed time.
#
# Cleanup: one EXIT trap, set when this file is sourced, runs the cleanup stack (tg_defer) in reverse
# order on every way out (the end, tg_bail, Ctrl-C, SIGTERM from a timeout); a scenario never sets a trap
# of its own. A run killed with SIGKILL is removed by `tunnelgate-lab sweep` (Scripts/test.sh runs it).
#
# Assertions print TAP-like lines ("ok - DESC" / "not ok - DESC" plus "#" detail lines) and count;
# tg_summary prints "N passed, N failed" alone on the last line and fails if any check failed.

# --- Addresses (fixed; the topology is the same in every run, only the namespace names differ) -------
export C_ETH0_4=10.231.0.2        C_ETH0_6=fd00:231::2
export R_C0_4=10.231.0.1          R_C0_6=fd00:231::1
export C_ETH1_4=10.232.0.2        C_ETH1_6=fd00:232::2
export R_C1_4=10.232.0.1          R_C1_6=fd00:232::1
export R_LAN4=192.168.231.1       R_LAN6=fd00:a1::1
export LAN4=192.168.231.2         LAN6=fd00:a1::2
export LAN_NET4=192.168.231.0/24  LAN_NET6=fd00:a1::/64
export R_INET4=198.18.0.254       R_INET6=2001:db8:18::fe
export INET_NET4=198.18.0.0/24    INET_NET6=2001:db8:18::/64
export CARRIER4=198.18.0.10       CARRIER6=2001:db8:18::10
export EXCLUDED4=198.18.0.20      EXCLUDED6=2001:db8:18::20
export INCLUDED4=198.18.0.30      INCLUDED6=2001:db8:18::30
# Addresses nothing in the topology owns: only a full tunnel's default route covers them.
export ELSEWHERE4=198.19.77.1     ELSEWHERE6=2001:db8:77::1

TG_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export TG_ROOT
export TG="${TG:-$TG_ROOT/.build/debug/tunnelgate}"
# The packet plane's executable, which the engine finds beside its own (Session's PlaneProcess).
export TG_PLANE="${TG_PLANE:-$(dirname "$TG")/tunnelgate-plane}"
export TG_LAB="${TG_LAB:-$TG_ROOT/.build/debug/tunnelgate-lab}"
# The topology tg_topology_up builds (node names c r l i; the addresses above).
TG_TOPOLOGY=${TG_TOPOLOGY:-$TG_ROOT/netns/topology.json}
# The lab run of this scenario's topology (set by tg_topology_up).
TG_LAB_RUN=""

TG_PASSED=0
TG_FAILED=0
TG_NAMESPACES=()
TG_TMP=""
TG_OUT="" TG_ERR="" TG_RC=0

# --- Reporting ----------------------------------------------------------------------------------------

# _tg_detail LINE...: prints each line (of each argument) as a "#   " detail line.
_tg_detail() {
  local text
  for text in "$@"; do
    [ -n "$text" ] && printf '%s\n' "$text" | sed 's/^/#   /'
  done
  return 0
}

tg_pass() {
  TG_PASSED=$((TG_PASSED + 1))
  printf 'ok - %s\n' "$1"
}

# tg_fail DESC [DETAIL...]
tg_fail() {
  local desc=$1
  shift
  TG_FAILED=$((TG_FAILED + 1))
  printf 'not ok - %s\n' "$desc"
  _tg_detail "$@"
  return 1
}

# tg_bail DESC [DETAIL...]: a failure after which the scenario cannot go on (the topology did not come
# up, the binary is missing). Counts it, prints the summary and exits; the EXIT trap cleans up.
tg_bail() {
  tg_fail "$@"
  tg_summary
  exit 1
}

# tg_summary: "N passed, N failed" alone on the last line; non-zero if anything failed.
tg_summary() {
  printf '%d passed, %d failed\n' "$TG_PASSED" "$TG_FAILED"
  [ "$TG_FAILED" -eq 0 ]
}

# --- The cleanup stack ---------------------------------------------------------------------------------
#
# What a scenario makes, it undoes with tg_defer right after making it; the one EXIT trap below runs the
# deferred commands newest first, so a thing made on top of another (a container on the topology, a
# process in a namespace) goes before what it stands on. tg_topology_up defers tg_topology_down, tg_tmpdir
# the removal of $TG_TMP. The trap is set when lib.sh is sourced; a scenario never replaces it.

TG_DEFERRED=()

# tg_defer CMD [ARG...]: runs CMD ARG... (a command or a shell function, its words as given) at exit.
tg_defer() {
  local words
  printf -v words '%q ' "$@"
  TG_DEFERRED+=("$words")
}

# _tg_cleanup: the EXIT trap: every deferred command, newest first, each once, whatever it returns; the
# script's exit status is kept.
_tg_cleanup() {
  local rc=$? cmd
  while [ "${#TG_DEFERRED[@]}" -gt 0 ]; do
    cmd=${TG_DEFERRED[-1]}
    unset 'TG_DEFERRED[-1]'
    eval "$cmd" || true
  done
  exit "$rc"
}

# A signal counts as a failed check, so an interrupted scenario still ends with its summary line; the
# exit that follows runs the cleanup stack.
# The report goes to the standard output the scenario had when it sourced lib.sh: a signal that comes
# while a wait_for predicate runs (a function, its output sent to /dev/null) is handled inside it.
exec {TG_STDOUT_FD}>&1
trap _tg_cleanup EXIT
trap '{ tg_fail "interrupted by SIGINT"; tg_summary; } >&"$TG_STDOUT_FD"; exit 130' INT
trap '{ tg_fail "interrupted by SIGTERM (timed out?)"; tg_summary; } >&"$TG_STDOUT_FD"; exit 143' TERM

# tg_tmpdir: makes $TG_TMP (a fresh directory under /tmp) if there is none yet, removed at exit.
tg_tmpdir() {
  [ -n "$TG_TMP" ] && [ -d "$TG_TMP" ] && return 0
  TG_TMP=$(mktemp -d "/tmp/tunnelgate-$(basename "$0" .sh).XXXXXX") || tg_bail "mktemp -d for \$TG_TMP"
  export TG_TMP
  tg_defer _tg_remove_tmp "$TG_TMP"
}

# _tg_remove_tmp DIR: removes DIR (never across a mount point: a scenario may mount under it), and
# forgets it as $TG_TMP.
_tg_remove_tmp() {
  rm -rf --one-file-system "$1"
  [ "$TG_TMP" != "$1" ] || TG_TMP=""
}

# --- Assertions ---------------------------------------------------------------------------------------

# check DESC CMD...: passes if CMD exits 0; on failure shows the command, its exit code and its output.
check() {
  local desc=$1 out rc
  shift
  out=$("$@" 2>&1) && rc=0 || rc=$?
  if [ "$rc" -eq 0 ]; then
    tg_pass "$desc"
  else
    tg_fail "$desc" "command: $*" "exit: $rc" "$out"
  fi
}

# check_fails DESC CMD...: passes if CMD exits non-zero (the observable fact is that something fails,
# e.g. a lookup of a link that must be gone).
check_fails() {
  local desc=$1 out rc
  shift
  out=$("$@" 2>&1) && rc=0 || rc=$?
  if [ "$rc" -ne 0 ]; then
    tg_pass "$desc"
  else
    tg_fail "$desc" "command: $*" "exit: 0 (expected non-zero)" "$out"
  fi
}

# check_eq DESC EXPECTED ACTUAL: a one-line mismatch shows both values, a multi-line one a diff.
check_eq() {
  local desc=$1 expected=$2 actual=$3
  if [ "$expected" == "$actual" ]; then
    tg_pass "$desc"
  elif [[ $expected == *$'\n'* || $actual == *$'\n'* ]]; then
    tg_fail "$desc" "$(diff -u --label expected --label actual \
      <(printf '%s\n' "$expected") <(printf '%s\n' "$actual"))"
  else
    tg_fail "$desc" "expected: $expected" "actual:   $actual"
  fi
}

# check_match DESC REGEX TEXT: passes if some line of TEXT matches the extended regular expression.
check_match() {
  local desc=$1 regex=$2 text=$3
  # A here-string, not a pipe: grep -q exits at the first match, and under pipefail a printf still writing
  # into the closed pipe (SIGPIPE, 141) would turn a match into a failure.
  if grep -Eq -- "$regex" <<<"$text"; then
    tg_pass "$desc"
  else
    tg_fail "$desc" "no line matches: $regex" "in:" "$text"
  fi
}

# check_no_match DESC REGEX TEXT: passes if no line of TEXT matches.
check_no_match() {
  local desc=$1 regex=$2 text=$3
  # A here-string, as in check_match: through a pipe, a match could end in SIGPIPE and read as none.
  if grep -Eq -- "$regex" <<<"$text"; then
    tg_fail "$desc" "unexpected match for: $regex" "in:" "$text"
  else
    tg_pass "$desc"
  fi
}

# tg_run CMD...: runs CMD and keeps its stdout in $TG_OUT, its stderr in $TG_ERR, its exit code in
# $TG_RC, for the assertions that follow. Not a check by itself.
tg_run() {
  local out_file err_file
  out_file=$(mktemp "${TG_TMP:-/tmp}/run-out.XXXXXX")
  err_file=$(mktemp "${TG_TMP:-/tmp}/run-err.XXXXXX")
  "$@" >"$out_file" 2>"$err_file" && TG_RC=0 || TG_RC=$?
  TG_OUT=$(<"$out_file")
  TG_ERR=$(<"$err_file")
  rm -f "$out_file" "$err_file"
  return 0
}

# check_rc DESC EXPECTED: compares the exit code of the last tg_run; on failure shows what it printed.
check_rc() {
  local desc=$1 expected=$2
  if [ "$TG_RC" -eq "$expected" ]; then
    tg_pass "$desc"
  else
    tg_fail "$desc" "expected exit: $expected" "actual exit:   $TG_RC" "stdout:" "$TG_OUT" "stderr:" "$TG_ERR"
  fi
}

# check_rc_nonzero DESC: the last tg_run failed.
check_rc_nonzero() {
  local desc=$1
  if [ "$TG_RC" -ne 0 ]; then
    tg_pass "$desc"
  else
    tg_fail "$desc" "expected a non-zero exit, got 0" "stdout:" "$TG_OUT" "stderr:" "$TG_ERR"
  fi
}

# wait_for DESC TIMEOUT_S CMD...: polls CMD every 50 ms until it succeeds (pass) or TIMEOUT_S seconds
# have gone by (fail, with CMD's last output).
wait_for() {
  local desc=$1 timeout=$2 out rc
  shift 2
  if _tg_poll "$timeout" "$@"; then
    tg_pass "$desc"
  else
    out=$("$@" 2>&1) && rc=0 || rc=$?
    tg_fail "$desc" "timed out after ${timeout}s waiting for: $*" "last exit: $rc" "$out"
  fi
}

# _tg_poll TIMEOUT_S CMD...: the polling loop of wait_for, without reporting.
_tg_poll() {
  local timeout=$1 deadline now
  shift
  deadline=$(_tg_now_ms)
  deadline=$((deadline + ${timeout%.*} * 1000))
  while :; do
    "$@" >/dev/null 2>&1 && return 0
    now=$(_tg_now_ms)
    [ "$now" -ge "$deadline" ] && return 1
    sleep 0.05
  done
}

_tg_now_ms() {
  local t=${EPOCHREALTIME/[.,]/}
  printf '%s\n' "$((t / 1000))"
}

# --- Routing ------------------------------------------------------------------------------------------

# route_dev NS ADDR: the device `ip -n NS route get ADDR` chooses (IPv4 or IPv6); nothing if no route.
route_dev() {
  ip -n "$1" route get "$2" 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p' | head -n 1
}

# route_is NS ADDR DEV: true if the lookup of ADDR in NS leaves through DEV (a predicate for wait_for).
route_is() {
  [ "$(route_dev "$1" "$2")" == "$3" ]
}

# check_route DESC NS ADDR DEV: asserts the route lookup; on failure shows the whole lookup.
check_route() {
  local desc=$1 ns=$2 addr=$3 dev=$4 got
  got=$(route_dev "$ns" "$addr")
  if [ "$got" == "$dev" ]; then
    tg_pass "$desc"
  else
    tg_fail "$desc" "expected dev: $dev" "actual dev:   ${got:-<none>}" \
      "ip route get $addr:" "$(ip -n "$ns" route get "$addr" 2>&1)"
  fi
}

# route_dev_marked NS ADDR MARK: the device a packet carrying fwmark MARK (a tunnel's carrier socket's)
# to ADDR would leave by; nothing if no route.
route_dev_marked() {
  ip -n "$1" route get "$2" mark "$3" 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p' | head -n 1
}

# check_route_marked DESC NS ADDR MARK DEV: check_route for a packet carrying fwmark MARK.
check_route_marked() {
  local desc=$1 ns=$2 addr=$3 mark=$4 dev=$5 got
  got=$(route_dev_marked "$ns" "$addr" "$mark")
  if [ "$got" == "$dev" ]; then
    tg_pass "$desc"
  else
    tg_fail "$desc" "expected dev: $dev" "actual dev:   ${got:-<none>}" \
      "ip route get $addr mark $mark:" "$(ip -n "$ns" route get "$addr" mark "$mark" 2>&1)"
  fi
}

# check_ping DESC NS ADDR: one echo request from NS must be answered within a second.
check_ping() {
  local desc=$1 ns=$2 addr=$3
  check "$desc" ip netns exec "$ns" ping -n -c 1 -W 1 "$addr"
}

# tg_rule_count NS FAMILY(4|6): the number of policy rules in NS.
tg_rule_count() {
  ip -n "$1" "-$2" rule show | wc -l
}

# --- Kernel state snapshots ---------------------------------------------------------------------------

# tg_snapshot NS FILE: writes the kernel state of NS that a tunnel may change, as `tunnelgate-lab snapshot`
# takes it: policy rules, routes of every table, addresses, links, the whole nftables ruleset (handles,
# counter values and the lab's leak-set elements left out), the resolv.conf NS's processes read
# (/etc/netns/NS/resolv.conf, else the host's) and every net.* sysctl but the counting ones. With static
# nodad addresses and DAD off, nothing in it changes unless someone changes the state, so any difference is
# a real one. NS is a node of the run ($NS_C …) or any other namespace (a pod's, tg_netns_add's).
tg_snapshot() {
  local ns=$1 file=$2 node="" out
  case $ns in
  "${NS_C:-}") node=c ;;
  "${NS_R:-}") node=r ;;
  "${NS_L:-}") node=l ;;
  "${NS_I:-}") node=i ;;
  esac
  if [ -n "$node" ] && [ -n "$TG_LAB_RUN" ]; then
    out=$(tg_lab snapshot "$node" --out "$file" 2>&1)
  else
    out=$(ip netns exec "$ns" "$TG_LAB" snapshot host --out "$file" 2>&1)
  fi || { printf '# tg_snapshot %s: %s\n' "$ns" "$out" >"$file"; tg_fail "snapshot of $ns" "$out"; }
}

# check_same_snapshot DESC BEFORE AFTER: the two snapshots are equal: tg_snapshot's by `tunnelgate-lab
# diff` (what differs shown section by section), any other two files (a scenario's own listing of names
# or files) by diff -u.
check_same_snapshot() {
  local desc=$1 before=$2 after=$3 d
  local header='# tunnelgate-lab snapshot: '
  if [ "$(head -c ${#header} "$before" 2>/dev/null)" == "$header" ] &&
    [ "$(head -c ${#header} "$after" 2>/dev/null)" == "$header" ]; then
    d=$("$TG_LAB" diff "$before" "$after" 2>&1)
  else
    d=$(diff -u "$before" "$after" 2>&1)
  fi
  if [ $? -eq 0 ]; then
    tg_pass "$desc"
  else
    tg_fail "$desc" "$d"
  fi
}

# --- Topology -----------------------------------------------------------------------------------------

# tg_lab ARGS...: tunnelgate-lab on this scenario's run (`tg_lab impair uplink down`, `tg_lab exec c -- …`).
tg_lab() {
  "$TG_LAB" --run "$TG_LAB_RUN" "$@"
}

# _tg_settled NS: every link but lo is operationally UP, has its IPv6 link-local address, and no address
# is tentative. Only then is a snapshot of NS stable (the lab waits for carrier; the link-local address
# comes a moment later).
_tg_settled() {
  local ns=$1 links link
  links=$(ip -n "$ns" -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | grep -vx lo)
  for link in $links; do
    grep -q ' state UP ' <<<"$(ip -n "$ns" -o link show dev "$link")" || return 1
    grep -q 'inet6 fe80::' <<<"$(ip -n "$ns" -6 -o addr show dev "$link" scope link)" || return 1
  done
  ! grep -q tentative <<<"$(ip -n "$ns" -o addr show)"
}

# tg_topology_up: builds C, R, L and I (see the drawing above; netns/topology.json) as a lab run owned by
# this script, exports $NS_C $NS_R $NS_L $NS_I and defers tg_topology_down. Returns once every link is up
# and every address usable; ends the scenario if that cannot be done.
tg_topology_up() {
  local id out node ns
  [ -x "$TG_LAB" ] || tg_bail "tunnelgate-lab is built at $TG_LAB" "build it with: swift build"
  tg_tmpdir
  id="t$$$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')"
  TG_LAB_RUN=$id
  tg_defer tg_topology_down
  out=$("$TG_LAB" up "$TG_TOPOLOGY" --run-id "$id" --owner $$ 2>&1) || tg_bail "topology: tunnelgate-lab up $TG_TOPOLOGY" "$out"
  while read -r node ns; do
    case $node in
    c) NS_C=$ns ;;
    r) NS_R=$ns ;;
    l) NS_L=$ns ;;
    i) NS_I=$ns ;;
    *) continue ;;
    esac
    TG_NAMESPACES+=("$ns")
  done <<<"$out"
  export NS_C NS_R NS_L NS_I
  TG_C_DEFAULT4=$(ip -n "$NS_C" -4 route show default)
  TG_C_DEFAULT6=$(ip -n "$NS_C" -6 route show default)
  for ns in "$NS_C" "$NS_R" "$NS_L" "$NS_I"; do
    _tg_poll 10 _tg_settled "$ns" || tg_bail "topology: links of $ns settle within 10 s" \
      "$(ip -n "$ns" addr show 2>&1)"
  done
}

# in_c CMD... (in_r, in_l, in_i): runs CMD inside that node's namespace.
in_c() { ip netns exec "$NS_C" "$@"; }
in_r() { ip netns exec "$NS_R" "$@"; }
in_l() { ip netns exec "$NS_L" "$@"; }
in_i() { ip netns exec "$NS_I" "$@"; }

# tg_c_default_route FAMILY(4|6): C's default route of FAMILY as the topology made it (via R over eth0;
# the lab adds it proto static onlink), put back after a scenario deleted or moved it.
tg_c_default_route() {
  # shellcheck disable=SC2086 # the words of `ip route show` when the topology came up
  ip -n "$NS_C" "-$1" route replace $([ "$1" = 4 ] && echo "$TG_C_DEFAULT4" || echo "$TG_C_DEFAULT6")
}

# tg_netns_add NAME: a namespace of the scenario's own beside the topology (lo up, DAD off, as the lab's
# nodes), removed with it by tg_topology_down; ends the scenario if it cannot be made.
tg_netns_add() {
  local out
  out=$(ip netns add "$1" 2>&1) || tg_bail "ip netns add $1" "$out"
  TG_NAMESPACES+=("$1")
  ip netns exec "$1" sysctl -q -w net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 >/dev/null &&
    ip -n "$1" link set lo up || tg_bail "$1: DAD off and lo up"
}

# _tg_kill_ns_pids NS: ends every process in NS (all of them were started by this run, in a namespace
# only this run knows): SIGTERM first so a tunnel can tear itself down, SIGKILL after 5 s.
_tg_kill_ns_pids() {
  local ns=$1 pids
  pids=$(ip netns pids "$ns" 2>/dev/null) || return 0
  [ -n "$pids" ] || return 0
  # shellcheck disable=SC2086 # a list of pids
  kill -TERM $pids 2>/dev/null
  _tg_poll 5 _tg_ns_empty "$ns" && return 0
  pids=$(ip netns pids "$ns" 2>/dev/null)
  # shellcheck disable=SC2086
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  _tg_poll 5 _tg_ns_empty "$ns"
}

# _tg_ns_empty NS: no process lives in NS.
_tg_ns_empty() {
  [ -z "$(ip netns pids "$1" 2>/dev/null)" ]
}

# tg_topology_down: ends the processes in every namespace of the run (the lab's and those of
# tg_netns_add), removes tunnelgate's state directory of each (it lives in the shared /run, keyed by the
# namespace's inode, which the kernel reuses for later namespaces), then the namespaces: the lab's with
# `tunnelgate-lab down` (their veths, /etc/netns files and the run's state go with them), the others with
# ip netns del; then $TG_TMP. Idempotent; safe at any point of tg_topology_up.
tg_topology_down() {
  local ns state out
  for ns in "${TG_NAMESPACES[@]}"; do
    [ -e "/run/netns/$ns" ] || continue
    _tg_kill_ns_pids "$ns"
    # Removed while NS still exists (and its processes are gone), so the inode cannot be anyone else's.
    state=$(tg_state_dir "$ns")
    [ -n "$state" ] && rm -rf "$state"
  done
  if [ -n "$TG_LAB_RUN" ] && [ -d "/run/tunnelgate-lab/$TG_LAB_RUN" ]; then
    out=$("$TG_LAB" down "$TG_LAB_RUN" 2>&1) || echo "# tg_topology_down: tunnelgate-lab down $TG_LAB_RUN: $out" >&2
  fi
  for ns in "${TG_NAMESPACES[@]}"; do
    [ -e "/run/netns/$ns" ] || continue
    rm -rf "/etc/netns/$ns"
    ip netns del "$ns" 2>/dev/null || echo "# tg_topology_down: ip netns del $ns failed" >&2
  done
  TG_NAMESPACES=()
  # $TG_TMP goes too (later on the stack anyway), for a scenario that still ends with its own trap
  # calling tg_topology_down.
  [ -z "$TG_TMP" ] || _tg_remove_tmp "$TG_TMP"
}

# tg_trap_cleanup: nothing left to do (the EXIT, INT and TERM traps are set when lib.sh is sourced);
# kept so that a scenario written before the cleanup stack still runs.
tg_trap_cleanup() {
  return 0
}

# --- Preambles ------------------------------------------------------------------------------------------

# tg_begin [--no-topology] [--no-binary] [--tmp] [--runtime] [--cni] [--lab] [--needs CMD[,CMD...]]...: a
# scenario's preamble in one call. Checks what the scenario needs before it makes anything (the tunnelgate
# binary unless --no-binary; with --runtime the example runtime, $LIB; with --cni tunnelgate-cni, $CNI; with --lab
# tunnelgate-lab, $LAB; with --needs these commands), then builds the topology (unless --no-topology;
# --tmp still makes $TG_TMP). A missing piece is one failed check that ends the scenario.
tg_begin() {
  local topology=1 tmp=0 binary=1 needs=() cmd missing=()
  while [ $# -gt 0 ]; do
    case $1 in
    --no-topology) topology=0 ;;
    --no-binary) binary=0 ;;
    --tmp) tmp=1 ;;
    --runtime) tg_require_runtime ;;
    --cni) tg_require_cni ;;
    --lab) tg_require_lab ;;
    --needs) IFS=, read -r -a cmd <<<"$2"; needs+=("${cmd[@]}"); shift ;;
    *) tg_bail "tg_begin: unknown argument $1" ;;
    esac
    shift
  done
  [ "$binary" = 0 ] || tg_require_binary
  for cmd in "${needs[@]}"; do command -v "$cmd" >/dev/null || missing+=("$cmd"); done
  [ "${#missing[@]}" -eq 0 ] || tg_bail "${needs[*]} are installed (missing: ${missing[*]})" "install them with Scripts/setup.sh"
  [ "$tmp" = 0 ] || tg_tmpdir
  [ "$topology" = 0 ] || tg_topology_up
}

# tg_require_runtime: the example runtime library is built; $LIB is its path.
tg_require_runtime() {
  LIB=$TG_ROOT/.build/debug/libTunnelgateExampleRuntime.so
  [ -f "$LIB" ] || tg_bail "the example runtime is built at $LIB" "build it with: swift build --product TunnelgateExampleRuntime"
}

# tg_require_cni: the CNI plugin is built; $CNI is its path.
tg_require_cni() {
  CNI=$TG_ROOT/.build/debug/tunnelgate-cni
  [ -x "$CNI" ] || tg_bail "tunnelgate-cni is built at $CNI" "build it with: swift build"
}

# tg_require_lab: tunnelgate-lab is built; $LAB is its path (the lab's own tests drive it directly).
tg_require_lab() {
  LAB=${LAB:-$TG_LAB}
  [ -x "$LAB" ] || tg_bail "tunnelgate-lab is built at $LAB" "build it with: swift build"
}

# tg_secret_file TEXT: a runtime's secret: the file $TG_TMP/secret holding TEXT, made owner-only from the
# start (umask 077, never readable by others even for a moment); $secret is its path.
tg_secret_file() {
  secret=$TG_TMP/secret
  (umask 077 && printf '%s\n' "$1" >"$secret") || tg_bail "writing $secret"
}

# --- Tunnelgate ---------------------------------------------------------------------------------------

# tg_require_binary: the scenario needs $TG; without it there is nothing to test (one failed check).
tg_require_binary() {
  [ -x "$TG" ] || tg_bail "tunnelgate binary is built at $TG" "build it with: swift build"
}

# tg_full_tunnel_config FILE [NAME]: the full-tunnel configuration every scenario starts from:
# everything into the tunnel except $EXCLUDED4/6 and the carrier endpoints.
tg_full_tunnel_config() {
  local file=$1 name=${2:-tg0}
  cat >"$file" <<EOF
{
  "name": "$name",
  "tunnelRemoteAddress": "$CARRIER4",
  "mtu": 1400,
  "ipv4Settings": {
    "addresses": ["10.8.0.2"],
    "subnetMasks": ["255.255.255.0"],
    "includedRoutes": ["0.0.0.0/0"],
    "excludedRoutes": ["$EXCLUDED4/32"]
  },
  "ipv6Settings": {
    "addresses": ["fd00:8::2"],
    "networkPrefixLengths": [64],
    "includedRoutes": ["::/0"],
    "excludedRoutes": ["$EXCLUDED6/128"]
  },
  "carrierEndpoints": ["$CARRIER4", "$CARRIER6"],
  "runtime": {"kind": "none"}
}
EOF
}

# tg_runtime_config FILE NAME ADDRESS BIND PEER [OPTION VALUE]...: FILE, the configuration of tunnel NAME
# hosting the example runtime (IP in UDP; netns/tests/runtime.sh): ADDRESS/24 on the TUN, the runtime's
# socket bound to BIND (IP:PORT) sending to PEER (IP:PORT), whose address is the tunnelRemoteAddress; MTU
# 1400. The scenarios' own config() helpers say what differs, with these options (FRAGMENT: JSON text
# that begins with a comma, or nothing):
#   --routes JSON        ipv4Settings.includedRoutes (default ["10.60.0.0/24"])
#   --ipv6 JSON          an ipv6Settings too: fd60::N/64 (N: ADDRESS's last number), includedRoutes JSON
#   --carriers JSON      carrierEndpoints
#   --library PATH       runtime.library (default $LIB)
#   --args FRAGMENT      more runtime.arguments after --bind and --peer (', "--keepalive-ms", "150"')
#   --secret TEXT        the runtime's secret keys (default "secretFile": "$secret", tg_secret_file's)
#   --packet-path PATH   runtime.packetPath (callback or tun; default: none, the runtime's choice)
#   --runtime FRAGMENT   more runtime keys
#   --top FRAGMENT       more top-level keys after the MTU (', "includeAllNetworks": true')
#   --tail FRAGMENT      more top-level keys after the runtime
tg_runtime_config() {
  local file=$1 name=$2 address=$3 bind=$4 peer=$5 routes='["10.60.0.0/24"]' ipv6="" carriers="" library=${LIB:-}
  local args="" secret_keys="" packet_path="" runtime="" top="" tail=""
  shift 5 || tg_bail "tg_runtime_config FILE NAME ADDRESS BIND PEER [OPTION VALUE]..."
  while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || tg_bail "tg_runtime_config: $1 needs a value"
    case $1 in
    --routes) routes=$2 ;;
    --ipv6) ipv6=$2 ;;
    --carriers) carriers=$2 ;;
    --library) library=$2 ;;
    --args) args=$2 ;;
    --secret) secret_keys=$2 ;;
    --packet-path) packet_path=$2 ;;
    --runtime) runtime=$2 ;;
    --top) top=$2 ;;
    --tail) tail=$2 ;;
    *) tg_bail "tg_runtime_config: unknown option $1" ;;
    esac
    shift 2
  done
  [ -n "$secret_keys" ] || secret_keys="\"secretFile\": \"${secret:?tg_runtime_config: no \$secret (tg_secret_file) and no --secret}\""
  {
    printf '{"name": "%s", "tunnelRemoteAddress": "%s", "mtu": 1400%s,\n' "$name" "${peer%:*}" "$top"
    printf ' "ipv4Settings": {"addresses": ["%s"], "subnetMasks": ["255.255.255.0"], "includedRoutes": %s},\n' "$address" "$routes"
    [ -z "$ipv6" ] || printf ' "ipv6Settings": {"addresses": ["fd60::%s"], "networkPrefixLengths": [64], "includedRoutes": %s},\n' \
      "${address##*.}" "$ipv6"
    [ -z "$carriers" ] || printf ' "carrierEndpoints": %s,\n' "$carriers"
    printf ' "runtime": {"kind": "callback", "library": "%s",\n' "$library"
    printf '             "arguments": ["--bind", "%s", "--peer", "%s"%s],\n' "$bind" "$peer" "$args"
    printf '             %s%s%s}%s}\n' "$secret_keys" "${packet_path:+, \"packetPath\": \"$packet_path\"}" "$runtime" "$tail"
  } >"$file"
}

# tg_state_dir NS: tunnelgate's state directory for NS (/run/tunnelgate/net-INODE; may not exist).
tg_state_dir() {
  local inode
  inode=$(stat -L -c %i "/run/netns/$1" 2>/dev/null) || return 0
  echo "/run/tunnelgate/net-$inode"
}

# tg_tunnel_pids NS: the tunnelgate processes living in NS.
tg_tunnel_pids() {
  local pid
  for pid in $(ip netns pids "$1" 2>/dev/null); do
    [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$(readlink -f "$TG")" ] && echo "$pid"
  done
  return 0
}

# tg_plane_pids NS: the packet planes (tunnelgate-plane, the unprivileged processes that run the tunnels'
# runtimes) living in NS.
tg_plane_pids() {
  local pid
  for pid in $(ip netns pids "$1" 2>/dev/null); do
    [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$(readlink -f "$TG_PLANE")" ] && echo "$pid"
  done
  return 0
}

# tg_plane_test_hooks NAME...: for a test fixture that runs in a packet plane (a runtime, a provider),
# whose environment is empty and which writes only its own tmpfs: exports the engine's test hooks so the
# plane gets the variables NAME... and may write in $TG_HOOKS (made here, mode 1777), where the fixture's
# files then go. Never set by Tunnelgate itself.
tg_plane_test_hooks() {
  TG_HOOKS=$TG_TMP/hooks
  mkdir -p "$TG_HOOKS" && chmod 1777 "$TG_HOOKS"
  local IFS=,
  export TG_HOOKS TUNNELGATE_PLANE_TEST_DIRECTORY=$TG_HOOKS TUNNELGATE_PLANE_PASS_ENVIRONMENT="$*"
}

# tg_plane_uid NS NAME: the uid of tunnel NAME's packet plane (its carrier identity), from its status.
tg_plane_uid() {
  ip netns exec "$1" "$TG" status "$2" --json 2>/dev/null | jq -r '.planeUser // empty'
}

# tg_no_tunnel_process NS: no tunnelgate process is left in NS (a predicate for wait_for).
tg_no_tunnel_process() {
  [ -z "$(tg_tunnel_pids "$1")" ]
}

# tg_tunnel_table NS FAMILY(4|6): the table that the tunnel's policy rule (`not fwmark M lookup T`)
# sends lookups to; the first such rule if there are several.
tg_tunnel_table() {
  ip -n "$1" "-$2" rule show | sed -n 's/.*not from all fwmark [^ ]* lookup \([^ ]*\).*/\1/p' | head -n 1
}

# --- Packets that arrive --------------------------------------------------------------------------------

# tg_watch_echo NS ADDR...: counts, in NS's input hook, the echo requests that arrive for each ADDR
# (an nftables table "tgtest" of NS; read with tg_echo_count).
tg_watch_echo() {
  local ns=$1 addr rules=""
  shift
  for addr in "$@"; do
    if [[ $addr == *:* ]]; then
      rules+="    ip6 daddr $addr icmpv6 type echo-request counter"$'\n'
    else
      rules+="    ip daddr $addr icmp type echo-request counter"$'\n'
    fi
  done
  ip netns exec "$ns" nft -f - <<EOT || tg_bail "nft: echo counters in $ns"
table inet tgtest {
  chain input {
    type filter hook input priority 0; policy accept;
$rules  }
}
EOT
}

# tg_echo_count NS ADDR: how many echo requests for ADDR arrived in NS since tg_watch_echo.
tg_echo_count() {
  ip netns exec "$1" nft list chain inet tgtest input 2>/dev/null |
    awk -v a="$2" '$0 ~ ("daddr " a " ") { for (i = 1; i < NF; i++) if ($i == "packets") print $(i + 1) }' |
    head -n 1
}

# tg_re TEXT: TEXT with its dots escaped, for an address inside a regular expression.
tg_re() {
  printf '%s' "${1//./\\.}"
}

# tg_exited PID: PID has exited (gone, or a zombie waiting to be reaped); a predicate for wait_for.
tg_exited() {
  [ ! -e "/proc/$1" ] || [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" == Z ]
}

# --- The lab's leak counters ------------------------------------------------------------------------------
#
# tunnelgate-lab up gives R a table (inet tunnelgate_lab_leaks) that counts every packet arriving from C's
# c0 and c1 per 5-tuple (ICMP: type and code), in prerouting before anything can drop it, IPv6 neighbour
# discovery and MLD left out, each 5-tuple with the moment it was first seen; and C one that counts what
# leaves eth0 and eth1 by the sending socket's uid. tg_lab_leaks_reset starts a phase; check_lab_no_leaks
# reads it (docs/lab.md, "Leak counters").
#
# A scenario that checks many phases against the same carriers declares them once with
# tg_lab_leak_declare; every check_lab_no_leaks, tg_lab_leak_count, tg_lab_carrier_packets and
# tg_lab_leak_tuples after it then judges by them.

# The --carrier and --allow arguments of the last tg_lab_leak_declare.
TG_LAB_LEAK_ARGS=()

# tg_lab_leak_declare [--carrier IP:PORT/PROTO[@[SADDR:]SPORT]]... [--allow PREFIX]...: the carrier
# 5-tuples that may leave C (@SPORT: only from that source port of C, a carrier socket bound to a known
# local port such as WireGuard's ListenPort; @SADDR:SPORT: from that address too) and the destinations
# that may be reached directly in the phases that follow (an excluded route without the kill switch, the
# LAN with excludeLocalNetworks); replaces an earlier declaration and starts the counters at zero. Ends
# the scenario if the lab refuses them.
tg_lab_leak_declare() {
  local out
  out=$(tg_lab leaks show "$@" 2>&1 >/dev/null) || tg_bail "tg_lab_leak_declare $*" "$out"
  TG_LAB_LEAK_ARGS=("$@")
  tg_lab_leaks_reset
}

# tg_lab_leak_json: the lab's reading since tg_lab_leaks_reset, judged by the declaration (`leaks show
# --json`: flows with kind carrier, allowed, dns or other, and whether the destination is a carrier's).
tg_lab_leak_json() {
  tg_lab leaks show --json "${TG_LAB_LEAK_ARGS[@]}"
}

# tg_lab_leak_count [carrier-addresses|other-addresses]: the packets that leaked since tg_lab_leaks_reset
# (flows that are neither a declared carrier nor allowed): to a carrier's address, to any other address,
# or (no argument) both, with the packets no flow holds.
tg_lab_leak_count() {
  tg_lab_leak_json | jq --arg only "${1:-all}" '
    ([.flows[] | select(.kind == "dns" or .kind == "other")
      | select($only == "all" or (.toCarrierAddress == ($only == "carrier-addresses"))) | .packets] | add // 0) + .unitemised'
}

# tg_lab_carrier_packets: the packets of the declared carrier 5-tuples that left C since tg_lab_leaks_reset
# (the tunnel's own carrier traffic: a tunnel that works moves it).
tg_lab_carrier_packets() {
  tg_lab_leak_json | jq '[.flows[] | select(.kind == "carrier") | .packets] | add // 0'
}

# tg_lab_leak_tuples: what R counted since tg_lab_leaks_reset, one flow a line, as `tunnelgate-lab leaks
# show` prints it with the declaration ("other tcp 10.231.0.2:40000 -> 198.18.0.10:8080 packets 3 (at r)
# first-seen MS (HH:MM:SS.mmmZ)"); what C counted by uid left out.
tg_lab_leak_tuples() {
  tg_lab leaks show "${TG_LAB_LEAK_ARGS[@]}" | grep -v '^by-uid '
}

# tg_lab_leaks_reset: every counter of the lab's leak watch to zero.
tg_lab_leaks_reset() {
  local out
  out=$(tg_lab leaks reset 2>&1) || tg_bail "tunnelgate-lab leaks reset" "$out"
}

# check_lab_no_leaks DESC [--carrier IP:PORT/PROTO[@[SADDR:]SPORT]]... [--allow PREFIX]... [--uid UID]
# [--after MS] [--before MS] [--only carrier-addresses|other-addresses]: since tg_lab_leaks_reset nothing
# left C's physical links but the carriers' 5-tuples (those of tg_lab_leak_declare too) and what went to an
# --allow prefix (with --uid, carrier packets only from that uid), as `tunnelgate-lab expect-no-leaks`
# judges it; with --after/--before only the 5-tuples first seen then (MS from _tg_now_ms), with --only those
# to a carrier's address or to any other. On failure every offending 5-tuple is listed with its packets and
# the moment it was first seen.
check_lab_no_leaks() {
  local desc=$1 out
  shift
  _tg_leak_settle
  if out=$(tg_lab expect-no-leaks --name "$desc" "${TG_LAB_LEAK_ARGS[@]}" "$@" 2>&1); then
    tg_pass "$desc"
  else
    tg_fail "$desc" "$(printf '%s\n' "$out" | grep -v '^\(not \)\{0,1\}ok - ' | sed 's/^#   //')"
  fi
}

# tg_lab_leaked DESTINATION: the packets the lab's counters at R saw from C to DESTINATION (an address)
# since tg_lab_leaks_reset, all flows summed.
tg_lab_leaked() {
  tg_lab leaks show 2>/dev/null | awk -v d="$1" '
    { for (i = 1; i < NF; i++) if ($i == "->") dst = $(i + 1)
      if (dst ~ /^\[/) { sub(/^\[/, "", dst); sub(/\]:[0-9]+$/, "", dst) } else if (dst !~ /:.*:/) sub(/:[0-9]+$/, "", dst)
      for (i = 1; i < NF; i++) if ($i == "packets") n = $(i + 1) }
    $1 != "by-uid" && dst == d { sum += n }
    END { print sum + 0 }'
}

# check_lab_not_reached DESC ADDRESS: since tg_lab_leaks_reset no packet from C to ADDRESS arrived at R
# (as the lab's counters saw it); on failure its flows are listed.
check_lab_not_reached() {
  local desc=$1 address=$2 n
  _tg_leak_settle
  n=$(tg_lab_leaked "$address")
  if [ "$n" -eq 0 ]; then
    tg_pass "$desc"
  else
    tg_fail "$desc" "$n packets to $address arrived at R:" \
      "$(tg_lab leaks show 2>&1 | grep -F -- "-> $address" | grep -v '^by-uid ')"
  fi
}

# --- DNS servers ------------------------------------------------------------------------------------------

# tg_dnsmasq NS ADDRESS [DNSMASQ-OPTION...]: a DNS server (dnsmasq, in the foreground of a background
# process, no upstream, no /etc/hosts) in NS bound to ADDRESS port 53, answering as the options say
# (--address=/#/198.18.33.33 answers every name with that address; --log-queries
# --log-facility=FILE logs each query). Its output goes to $TG_TMP/dnsmasq-ADDRESS.log, its pid to
# $TG_TMP/dnsmasq-ADDRESS.pid; it ends with its namespace. One check: it listens on ADDRESS:53 (UDP)
# within 10 s; the scenario ends if it does not.
tg_dnsmasq() {
  local ns=$1 address=$2 listening
  shift 2
  ip netns exec "$ns" dnsmasq --keep-in-foreground --no-resolv --no-hosts --bind-interfaces \
    --listen-address="$address" --port=53 --pid-file="$TG_TMP/dnsmasq-$address.pid" --user=root "$@" \
    >"$TG_TMP/dnsmasq-$address.log" 2>&1 &
  if [[ $address == *:* ]]; then listening="\[$address\]:53 "; else listening="$(tg_re "$address"):53 "; fi
  wait_for "dnsmasq listens on $address:53 in $ns" 10 bash -c "ip netns exec '$ns' ss -lunH | grep -q '$listening'" ||
    tg_bail "dnsmasq in $ns did not start" "$(cat "$TG_TMP/dnsmasq-$address.log" 2>&1)"
}

# === The leak generator (the leak suite: netns/tests/leaks.sh, leaks-runtime.sh, and the container scenarios) ===
#
# The traffic whose leaks the lab's counters (above) count: tg_leak_generate (bounded, in the foreground)
# and tg_leak_generate_start/_stop (the same in the background, for transitions) run
# netns/tests/leak_traffic.py probe in C: every way out from root and from uid 65534, IPv4 and IPv6, TCP,
# UDP, DNS, ICMP, through the routing table, forced onto eth0 and eth1, and bound to C's physical
# addresses, to the carrier, LAN and "internet" addresses.

TG_LEAK_TOOL=$TG_ROOT/netns/tests/leak_traffic.py
TG_LEAK_GEN_PID=""
# Arguments every run of the generator gets (a scenario's carrier port: --udp-port 5400 --udp-from …).
TG_LEAK_GEN_ARGS=()
# The addresses the generator tries by default: the carriers, the LAN host, the included, excluded and
# elsewhere "internet" hosts, in both families, and the router itself (its address on C's link; its
# IPv6 link-local address there is added when the generator runs).
TG_LEAK_TARGETS=("$CARRIER4" "$CARRIER6" "$LAN4" "$LAN6" "$INCLUDED4" "$INCLUDED6" "$EXCLUDED4" "$EXCLUDED6"
  "$ELSEWHERE4" "$ELSEWHERE6" "$R_C0_4")

# _tg_leak_settle: waits (at most 3 s) until C resolves no neighbour any more: a packet that waits for
# its next hop's link-layer address (a new on-link destination) is queued until then, and R must have
# seen everything the generator sent before the counters are read.
_tg_leak_settle() {
  _tg_poll 3 bash -c "! ip -n '$NS_C' neigh show | grep -q INCOMPLETE"
}

# tg_leak_generate [probe options...]: runs the generator in C in the foreground (bounded: by default one
# round from root and from uid 65534, forced onto eth0 and eth1 and bound to C's eth0 addresses, to
# $TG_LEAK_TARGETS); its JSON summary goes to $TG_TMP/leak-gen.json. Options are leak_traffic.py
# probe's; given targets replace the default ones.
tg_leak_generate() {
  _tg_leak_prepare_client
  # shellcheck disable=SC2046 # the default arguments are words
  ip netns exec "$NS_C" python3 "$TG_LEAK_TOOL" probe "${TG_LEAK_GEN_ARGS[@]}" "$@" $(_tg_leak_default_args "$@") \
    >"$TG_TMP/leak-gen.json" 2>"$TG_TMP/leak-gen.err"
}

# tg_leak_generate_start [probe options...]: the same in the background, round after round (0.1 s apart,
# at most 400 rounds or 90 s) until tg_leak_generate_stop. Returns once the first round is done, so that
# the generator is sending when the caller acts.
tg_leak_generate_start() {
  _tg_leak_prepare_client
  rm -f "$TG_TMP/leak-gen.stop" "$TG_TMP/leak-gen.progress"
  # shellcheck disable=SC2046 # the default arguments are words
  ip netns exec "$NS_C" python3 "$TG_LEAK_TOOL" probe --rounds 400 --pause 0.1 --max-seconds 90 \
    --stop-file "$TG_TMP/leak-gen.stop" --progress "$TG_TMP/leak-gen.progress" "${TG_LEAK_GEN_ARGS[@]}" "$@" \
    $(_tg_leak_default_args "$@") \
    >"$TG_TMP/leak-gen.json" 2>"$TG_TMP/leak-gen.err" &
  TG_LEAK_GEN_PID=$!
  _tg_poll 10 bash -c "[ -s '$TG_TMP/leak-gen.progress' ] || ! kill -0 $TG_LEAK_GEN_PID"
}

# tg_order_watch NAME [PHASE]: starts leak_traffic.py's watch of which the kernel has first, NAME's TUN or
# its kill switch table (inet tunnelgate-NAME), in C, and waits until it listens; tg_order_result waits for
# its verdict and sets $TG_ORDER to it ("table first", "interface first", "neither proven (both within one
# look)"). Not in a command substitution: a subshell cannot wait for the watch, the shell's child.
tg_order_watch() {
  rm -f "$TG_TMP/order.ready"
  ip netns exec "$NS_C" python3 "$TG_LEAK_TOOL" order "$1" "tunnelgate-$1" --ready "$TG_TMP/order.ready" \
    --max-seconds 20 >"$TG_TMP/order.out" 2>&1 &
  _TG_ORDERER=$!
  wait_for "${2:-[during up]} the watch for which comes first, the TUN or the kill switch, listens" 5 \
    test -s "$TG_TMP/order.ready"
}
tg_order_result() {
  wait "$_TG_ORDERER" 2>/dev/null
  TG_ORDER=$(cat "$TG_TMP/order.out")
}

# tg_order_settle NAME DOWN UP: the verdict in $TG_ORDER, made conclusive. Which came first is proven only
# when the watch saw one without the other; both within one of its looks (it was scheduled out between
# them, as under CI's load) proves nothing either way. Then NAME is taken down (the function DOWN, given
# "order, attempt N") and up (UP, given "[order, attempt N]") again under a new watch, at most four more
# times, until a look tells. UP should start the engine through tg_up_slowed, which widens the gap
# between the two to 0.2 s whichever comes first, so a loaded machine's look tells too. A look that tells
# still says "interface first" when the TUN comes first, and five that do not leave "neither proven".
tg_order_settle() {
  local name=$1 down=$2 up=$3 attempt
  for attempt in 2 3 4 5; do
    [ "$TG_ORDER" = "neither proven (both within one look)" ] || return 0
    "$down" "order, attempt $attempt"
    tg_order_watch "$name" "[order, attempt $attempt]"
    "$up" "[order, attempt $attempt]"
    tg_order_result
  done
}

# tg_up_slowed NS CONFIG [VAR=VALUE...]: `tunnelgate up CONFIG` in NS in the background, its engine in the
# foreground under strace, every ioctl(2) it makes delayed 0.2 s on entry (strace's syscall tampering;
# the engine's other calls, its netlink messages among them, run as they would). The TUN is made by an
# ioctl (TUNSETIFF) and the kill switch table by netlink, so whichever the engine makes first is in the
# kernel 0.2 s before the other: the order watch's verdict no longer depends on being scheduled in a gap
# of microseconds. The engine runs as with --detach otherwise; `tunnelgate down` ends it and strace.
tg_up_slowed() {
  local ns=$1 config=$2
  shift 2
  ip netns exec "$ns" env "$@" strace -qq -o /dev/null -e trace=ioctl -e inject=ioctl:delay_enter=200000 \
    "$TG" up "$config" >>"$TG_TMP/up-slowed.out" 2>&1 &
  tg_defer tg_end_if_running $!
}
# tg_end_if_running PID: for tg_defer, a background process ended if it still runs (quietly if it has not).
tg_end_if_running() { kill "$1" 2>/dev/null; true; }

# tg_leak_generated_rounds: how many rounds the background generator has finished.
tg_leak_generated_rounds() {
  cat "$TG_TMP/leak-gen.progress" 2>/dev/null || echo 0
}

# tg_leak_generate_stop DESC: stops the background generator after its current round (waiting for at
# least one more round, so the generator ran after whatever the caller just waited for) and checks that
# it ran: DESC passes when it made its attempts (rounds and outcomes in the detail on failure).
tg_leak_generate_stop() {
  local desc=$1 at rounds
  at=$(tg_leak_generated_rounds)
  _tg_poll 10 bash -c "[ \"\$(cat '$TG_TMP/leak-gen.progress' 2>/dev/null || echo 0)\" -gt $at ] || ! kill -0 $TG_LEAK_GEN_PID"
  touch "$TG_TMP/leak-gen.stop"
  wait "$TG_LEAK_GEN_PID" 2>/dev/null
  TG_LEAK_GEN_PID=""
  rounds=$(jq -r '.rounds // 0' "$TG_TMP/leak-gen.json" 2>/dev/null)
  check "$desc (the generator ran ${rounds:-0} rounds)" test "${rounds:-0}" -gt "$at" ||
    _tg_detail "$(cat "$TG_TMP/leak-gen.json" "$TG_TMP/leak-gen.err" 2>/dev/null)"
}

# _tg_leak_default_args ARGS...: what tg_leak_generate adds to ARGS: both uids unless --uid is given,
# the devices and source addresses unless --device/--source/--routed-only are given, the default targets
# unless ARGS end with targets (an argument that is an address and not an option's value).
_tg_leak_default_args() {
  local arg prev="" has_uid=0 has_path=0 has_target=0
  for arg in "$@"; do
    case $arg in
    --uid) has_uid=1 ;;
    --device | --source | --routed-only) has_path=1 ;;
    --*) ;;
    *) case $prev in --routed-only | "" | [!-]*) has_target=1 ;; esac ;;
    esac
    prev=$arg
  done
  [ "$has_uid" = 1 ] || echo "--uid 0 --uid 65534"
  [ "$has_path" = 1 ] || echo "--device eth0 --device eth1 --source $C_ETH0_4 --source $C_ETH0_6"
  [ "$has_target" = 1 ] || echo "${TG_LEAK_TARGETS[*]} $(_tg_leak_router_link_local)"
}

# _tg_leak_router_link_local: R's IPv6 link-local address on c0, scoped to C's eth0 (fe80::…%eth0).
_tg_leak_router_link_local() {
  ip -n "$NS_R" -6 -o addr show dev c0 scope link | awk '{ sub(/\/.*/, "", $4); print $4 "%eth0"; exit }'
}

# _tg_leak_prepare_client: lets every uid of C use ping sockets (ICMP echo without privileges, as
# ping(8) does), so that uid 65534's ICMP is tried too.
_tg_leak_prepare_client() {
  ip netns exec "$NS_C" sysctl -q -w net.ipv4.ping_group_range="0 2147483647" >/dev/null ||
    tg_bail "sysctl net.ipv4.ping_group_range in $NS_C"
}

# tg_check_plane LABEL NS NAME [ENVIRONMENT]: the packet plane of tunnel NAME in NS, as /proc shows it:
# its own uid and gid of the plane range, no capability in any set, no_new_privs, a seccomp filter, the
# environment ENVIRONMENT (default: empty; lines VAR=VALUE), a read-only root, the engine's state directory
# hidden, no netlink socket.
tg_check_plane() {
  local label=$1 ns=$2 name=$3 environment=${4:-} pid uid st
  pid=$(ip netns exec "$ns" "$TG" status "$name" --json 2>/dev/null | jq -r '.planePID // empty')
  uid=$(ip netns exec "$ns" "$TG" status "$name" --json 2>/dev/null | jq -r '.planeUser // empty')
  if [ -z "$pid" ] || [ ! -d "/proc/$pid" ]; then
    tg_fail "[$label] the tunnel has a running packet plane" "status: $(ip netns exec "$ns" "$TG" status "$name" --json 2>&1)"
    return
  fi
  st=$(cat "/proc/$pid/status")
  check_match "[$label] the plane runs as its own uid $uid (real, effective, saved, fs), not root" \
    "^Uid:[[:space:]]+$uid[[:space:]]+$uid[[:space:]]+$uid[[:space:]]+$uid\$" "$st"
  check "[$label] ... a uid of the plane range, not 0" test "$uid" -ge 1952907264 -a "$uid" -lt 1952911360
  check_match "[$label] ... and its own gid" "^Gid:[[:space:]]+$uid[[:space:]]+$uid[[:space:]]+$uid[[:space:]]+$uid\$" "$st"
  check_match "[$label] ... and no supplementary groups" '^Groups:[[:space:]]*$' "$st"
  local cap
  for cap in CapInh CapPrm CapEff CapBnd CapAmb; do
    check_match "[$label] $cap is empty" "^$cap:[[:space:]]+0000000000000000\$" "$st"
  done
  check_match "[$label] no_new_privs" '^NoNewPrivs:[[:space:]]+1$' "$st"
  check_match "[$label] a seccomp filter" '^Seccomp:[[:space:]]+2$' "$st"
  check_eq "[$label] its environment is ${environment:-empty}" "$environment" "$(tr '\0' '\n' <"/proc/$pid/environ" | sort)"
  check_match "[$label] its root is mounted read-only" '^[0-9]+ [0-9]+ [0-9:]+ / / ro[, ]' "$(cat "/proc/$pid/mountinfo")"
  check_eq "[$label] the engine's state directory is hidden (empty) in its view" "" "$(ls -A "/proc/$pid/root/run/tunnelgate" 2>&1)"
  check_eq "[$label] it holds no netlink socket" "" "$(ss -f netlink -a -p 2>/dev/null | grep "pid=$pid,")"
}
