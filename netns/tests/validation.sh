#!/usr/bin/env bash
# validation: every bad configuration is refused by `validate` (exit 1, one `key.path: reason` line on
# stderr naming the key) and by `up` (non-zero, the key named, the kernel untouched); `plan` touches
# nothing; usage errors exit 64 and help exits 0, as the CLI conventions say. Files are trusted like sshd's
# StrictModes: a world- or group-writable config, a symlinked config in a world-writable directory,
# another user's config in a sticky directory, a group-writable runtime library and a secret file in a
# world-writable directory are each refused in one line naming the file, its mode and owner, and so is a
# state directory that others can read or that is a symbolic link, with C's kernel state untouched.
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
tg_begin

tgc() { ip netns exec "$NS_C" "$TG" "$@"; }

base=$TG_TMP/base.json
tg_full_tunnel_config "$base" tg0
tg_snapshot "$NS_C" "$TG_TMP/before"

# --- Good configurations --------------------------------------------------------------------------------
tg_run tgc validate "$base"
check_rc "validate of the full-tunnel config exits 0" 0
check_eq "validate of the full-tunnel config prints no problem" "" "$TG_ERR"
v4only=$TG_TMP/v4only-mtu1000.json
jq 'del(.ipv6Settings) | .mtu = 1000 | .carrierEndpoints = ["'"$CARRIER4"'"]' "$base" >"$v4only"
tg_run tgc validate "$v4only"
check_rc "validate of an IPv4-only config with MTU 1000 exits 0 (IPv6's 1280 minimum does not apply)" 0

tg_run tgc plan "$base"
check_rc "plan exits 0" 0
check_match "plan names the interface tg0" 'tg0' "$TG_OUT"
check_match "plan names the address 10.8.0.2" '10\.8\.0\.2' "$TG_OUT"
check_match "plan names the excluded $EXCLUDED4" "$(tg_re "$EXCLUDED4")" "$TG_OUT"
check_match "plan names the carrier $CARRIER6" "$(tg_re "$CARRIER6")" "$TG_OUT"
tg_snapshot "$NS_C" "$TG_TMP/after-plan"
check_same_snapshot "plan leaves C's kernel state untouched" "$TG_TMP/before" "$TG_TMP/after-plan"

# --- Bad configurations ---------------------------------------------------------------------------------
# bad NAME KEY_PATH_REGEX JQ_FILTER: the base config changed by JQ_FILTER must be refused, naming the key.
bad() {
  local what=$1 key=$2 filter=$3 cfg
  cfg=$TG_TMP/bad-$(printf '%s' "$what" | tr -c 'A-Za-z0-9' '-').json
  jq "$filter" "$base" >"$cfg" || tg_bail "jq filter for $what: $filter"

  tg_run tgc validate "$cfg"
  check_rc "$what: validate exits 1" 1
  check_match "$what: validate reports '$key: reason' on stderr" "^$key: .+" "$TG_ERR"
  check_eq "$what: validate reports exactly one problem (one line besides an 'Error: ' header)" 1 \
    "$(printf '%s\n' "$TG_ERR" | grep -v '^Error: ' | grep -c .)"

  tg_run tgc up "$cfg" --detach
  check_rc_nonzero "$what: up refuses it"
  check_match "$what: up's error names $key" "$key" "$TG_ERR"
  tg_snapshot "$NS_C" "$TG_TMP/after-bad"
  check_same_snapshot "$what: up left C's kernel state untouched" "$TG_TMP/before" "$TG_TMP/after-bad"
}

bad "subnet mask 255.0.255.0" 'ipv4Settings\.subnetMasks\[0\]' \
  '.ipv4Settings.subnetMasks = ["255.0.255.0"]'
bad "IPv6 prefix length 129" 'ipv6Settings\.networkPrefixLengths\[0\]' \
  '.ipv6Settings.networkPrefixLengths = [129]'
bad "two addresses, one mask" 'ipv4Settings\.(subnetMasks|addresses)' \
  '.ipv4Settings.addresses = ["10.8.0.2", "10.8.0.3"]'
bad "MTU 500" 'mtu' \
  '.mtu = 500'
bad "MTU 1000 with ipv6Settings" 'mtu' \
  '.mtu = 1000'
bad "an IPv6 route in ipv4Settings.includedRoutes" 'ipv4Settings\.includedRoutes\[1\]' \
  '.ipv4Settings.includedRoutes = ["0.0.0.0/0", "::/0"]'
bad "unknown key ipv4Settings.adresses" 'ipv4Settings\.adresses' \
  '.ipv4Settings.adresses = ["10.8.0.3"]'
bad "carrier host no-such-host.invalid" 'carrierEndpoints\[0\]' \
  '.carrierEndpoints = ["no-such-host.invalid"]'
bad "interface name longer than 15 bytes" 'name' \
  '.name = "this-name-is-way-too-long"'

tg_run tgc validate "$TG_TMP/does-not-exist.json"
check_rc "validate of a missing file exits 1" 1
check_match "validate of a missing file names the file" 'does-not-exist\.json' "$TG_ERR"

# --- Usage ----------------------------------------------------------------------------------------------
# --- Files trusted like sshd's StrictModes ----------------------------------------------------------------
# A configuration, secret file or runtime library that someone other than root could change, or that is
# reached through a directory someone else could change, is refused in one line naming it, its mode and
# owner, and nothing is touched. $TG_TMP (mktemp -d in /tmp: root's, 0700, in the root-owned sticky /tmp)
# is trusted, as every scenario's configs there show.
LIB=$TG_ROOT/.build/debug/libTunnelgateExampleRuntime.so
# refused WHAT REGEX CONFIG [validate]: `up` (and `validate` unless the last argument says no) refuse
# CONFIG with one line matching REGEX, and C's kernel state is what it was.
refused() {
  local what=$1 line=$2 cfg=$3 with_validate=${4:-validate}
  if [ "$with_validate" == validate ]; then
    tg_run tgc validate "$cfg"
    check_rc "[trust] $what: validate exits 1" 1
    check_match "[trust] $what: validate says why in one line" "^Error: $line\$" "$TG_ERR"
    check_eq "[trust] $what: ... and only that line" 1 "$(printf '%s\n' "$TG_ERR" | grep -c .)"
  fi
  tg_run tgc up "$cfg" --detach
  check_rc "[trust] $what: up exits 1" 1
  check_match "[trust] $what: up says why in one line" "^Error: $line\$" "$TG_ERR"
  check_eq "[trust] $what: ... and only that line" 1 "$(printf '%s\n' "$TG_ERR" | grep -c .)"
  check_eq "[trust] $what: no tunnelgate process was left" "" "$(tg_tunnel_pids "$NS_C")"
  tg_snapshot "$NS_C" "$TG_TMP/after-trust"
  check_same_snapshot "[trust] $what: C's kernel state is untouched" "$TG_TMP/before" "$TG_TMP/after-trust"
}
re() { printf '%s' "$1" | sed 's/[][\.*^$+?(){}|/]/\\&/g'; }

cp "$base" "$TG_TMP/world.json"
chmod 666 "$TG_TMP/world.json"
refused "a world-writable config" "$(re "$TG_TMP/world.json"): writable by others \(mode 0666, owner root\); refusing it" \
  "$TG_TMP/world.json"
cp "$base" "$TG_TMP/group.json"
chmod 664 "$TG_TMP/group.json"
refused "a group-writable config" "$(re "$TG_TMP/group.json"): writable by its group \(mode 0664, owner root\); refusing it" \
  "$TG_TMP/group.json"

mkdir -m 0777 "$TG_TMP/open"
ln -s "$base" "$TG_TMP/open/tg0.json"
refused "a symlinked config in a world-writable directory" \
  "$(re "$TG_TMP/open/tg0.json"): a symbolic link in $(re "$TG_TMP/open"), a directory writable by others \(mode 0777, owner root\); refusing it" \
  "$TG_TMP/open/tg0.json"
cp "$base" "$TG_TMP/open/plain.json"
refused "a config in a world-writable directory" \
  "$(re "$TG_TMP/open"): a directory writable by others, on the way to $(re "$TG_TMP/open/plain.json") \(mode 0777, owner root\); refusing it" \
  "$TG_TMP/open/plain.json"
mkdir -m 1777 "$TG_TMP/sticky"
cp "$base" "$TG_TMP/sticky/theirs.json"
chown 65534 "$TG_TMP/sticky/theirs.json"
refused "another user's config in a sticky directory" \
  "$(re "$TG_TMP/sticky/theirs.json"): owned by another user in the sticky directory $(re "$TG_TMP/sticky") \(mode 0644, owner uid 65534\); refusing it" \
  "$TG_TMP/sticky/theirs.json"
# The same file as root's in that sticky directory, and a link to the config from a trusted directory: accepted.
cp "$base" "$TG_TMP/sticky/mine.json"
tg_run tgc validate "$TG_TMP/sticky/mine.json"
check_rc "[trust] root's own config in a root-owned sticky directory is valid" 0
ln -s "$base" "$TG_TMP/link.json"
tg_run tgc validate "$TG_TMP/link.json"
check_rc "[trust] a symlink to the config in a trusted directory is followed" 0

# A runtime library its group can write: refused by up before the kernel is touched.
mkdir -m 0755 "$TG_TMP/lib"
cp "$LIB" "$TG_TMP/lib/libgroup.so"
chmod 775 "$TG_TMP/lib/libgroup.so"
printf 'secret-%s\n' "$RANDOM" >"$TG_TMP/secret"
chmod 600 "$TG_TMP/secret"
jq --arg lib "$TG_TMP/lib/libgroup.so" --arg s "$TG_TMP/secret" \
  '.runtime = {"kind": "callback", "library": $lib, "secretFile": $s, "arguments": ["--bind", "127.0.0.1:5499", "--peer", "127.0.0.1:5498"]}' \
  "$base" >"$TG_TMP/grouplib.json"
refused "a group-writable runtime library" \
  "cannot load runtime library $(re "$TG_TMP/lib/libgroup.so") \(runtime.library\): $(re "$TG_TMP/lib/libgroup.so"): writable by its group \(mode 0775, owner root\); refusing it" \
  "$TG_TMP/grouplib.json" up-only
# A secret file reached through a world-writable directory.
cp -p "$TG_TMP/secret" "$TG_TMP/open/secret"
jq --arg lib "$LIB" --arg s "$TG_TMP/open/secret" \
  '.runtime = {"kind": "callback", "library": $lib, "secretFile": $s, "arguments": ["--bind", "127.0.0.1:5499", "--peer", "127.0.0.1:5498"]}' \
  "$base" >"$TG_TMP/opensecret.json"
refused "a secret file in a world-writable directory" \
  "runtime\.secretFile: $(re "$TG_TMP/open"): a directory writable by others, on the way to $(re "$TG_TMP/open/secret") \(mode 0777, owner root\); refusing it" \
  "$TG_TMP/opensecret.json" up-only

# The state directory of C's namespace (/run/tunnelgate/net-INODE): root's, 0700, a directory itself.
state=$(tg_state_dir "$NS_C")
mkdir -p -m 0700 "$state"
chmod 0755 "$state"
tg_run tgc up "$base" --detach
check_rc "[trust] a state directory others can read: up exits 1" 1
check_match "[trust] ... saying why in one line" \
  "^Error: $(re "$state"): open to others \(mode 0755, owner root\); the state directory must be 0700; refusing it\$" "$TG_ERR"
tg_run tgc status
check_rc "[trust] ... and status refuses it too" 1
chmod 0700 "$state"
mv "$state" "$TG_TMP/state-elsewhere"
ln -s "$TG_TMP/state-elsewhere" "$state"
tg_run tgc up "$base" --detach
check_rc "[trust] a state directory that is a symbolic link: up exits 1" 1
check_match "[trust] ... saying why in one line" "^Error: $(re "$state"): reached through a symbolic link" "$TG_ERR"
rm -f "$state"
mv "$TG_TMP/state-elsewhere" "$state"
check_eq "[trust] no tunnelgate process was left" "" "$(tg_tunnel_pids "$NS_C")"
tg_snapshot "$NS_C" "$TG_TMP/after-trust"
check_same_snapshot "[trust] C's kernel state is untouched" "$TG_TMP/before" "$TG_TMP/after-trust"

tg_run tgc
check_rc "tunnelgate without a subcommand exits 64" 64
check_match "tunnelgate without a subcommand prints 'Error: ' on stderr" '^Error: ' "$TG_ERR"
check_match "tunnelgate without a subcommand prints the usage line on stderr" '[Uu]sage' "$TG_ERR"
tg_run tgc frobnicate
check_rc "tunnelgate frobnicate exits 64" 64
check_match "tunnelgate frobnicate names the unknown subcommand" '^Error: .*frobnicate' "$TG_ERR"
tg_run tgc up
check_rc "up without a config exits 64" 64
tg_run tgc --help
check_rc "--help exits 0" 0
help=$TG_OUT
for sub in validate plan up down status; do
  check_match "--help lists $sub" "(^|[^a-z])$sub([^a-z]|\$)" "$help"
done
tg_run tgc -h
check_eq "-h prints what --help prints" "$help" "$TG_OUT"
tg_run tgc up --help
check_rc "up --help exits 0" 0
up_help=$TG_OUT
tg_run tgc help up
check_rc "help up exits 0" 0
check_eq "help up prints what up --help prints" "$up_help" "$TG_OUT"
tg_run tgc --version
check_rc "--version exits 0" 0
check_match "--version prints a version" '[0-9]+\.[0-9]+' "$TG_OUT"

tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "C's kernel state at the end equals the state at the start" "$TG_TMP/before" "$TG_TMP/after"
tg_summary
