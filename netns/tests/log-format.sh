#!/usr/bin/env bash
# `--log-format json`: every log line tunnelgate writes on standard error (and a detached owner's
# NAME.log) is one JSON object with time, level and message, for log shippers; text stays the default.
#
#   C  tunnelgate "tg0" (runtime none, full tunnel) and "tgk" (built-in WireGuard, its peer never
#      answers), both detached; their logs in C's state directory
#   R, L, I: the usual topology (lib.sh), unused but for routes
#
# Asserted: a detached owner started with --log-format json logs JSON lines only (RFC 3339 time, a level,
# the message), also for a repair after an outside change; a failed validation is one error event, its
# several lines in one message; a usage error is one error event with the usage; the mlock warning is a
# warning event, in the caller's output and in the owner's log; TUNNELGATE_LOG_FORMAT does the same as
# the option; an unknown format is refused (exit 64) naming where it came from; without the option the
# lines are text as before; stdout (command output, not logs) is unchanged; no private key in any log.
# Under journald (JOURNAL_STREAM naming standard error) every line carries its syslog priority.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
tg_begin

STATE=""
# json_lines FILE: every non-empty line of FILE is a log event as promised (a predicate; prints the bad ones).
json_lines() {
  local bad
  bad=$(grep -v '^$' "$1" | while IFS= read -r line; do
    jq -e 'type == "object" and (keys | sort) == (["level", "message", "time"] | sort)
             and (.time | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}Z$"))
             and (.level | IN("info", "warning", "error")) and (.message | type == "string")' \
      <<<"$line" >/dev/null 2>&1 || printf '%s\n' "$line"
  done)
  [ -z "$bad" ] || { printf '%s\n' "$bad"; return 1; }
}

# --- A detached owner logs JSON ---------------------------------------------------------------------------
tg_full_tunnel_config "$TG_TMP/tg0.json"
tg_run in_c "$TG" --log-format json up "$TG_TMP/tg0.json" --detach
check_rc "tunnelgate --log-format json up tg0.json --detach" 0
check_match "its standard output is the command's output, as before (not a log event)" \
  "running in the background as pid [0-9]+$" "$TG_OUT"
STATE=$(tg_state_dir "$NS_C")
check "the owner's log tg0.log exists" test -s "$STATE/tg0.log"
check "every line of tg0.log is a JSON event (time, level, message)" json_lines "$STATE/tg0.log"
check "... one of them: info, the tunnel is connected" \
  jq -se 'any(.level == "info" and (.message | startswith("tg0: connected")))' "$STATE/tg0.log"
table=$(tg_tunnel_table "$NS_C" 4)
in_c ip -4 rule del not fwmark "$table" table "$table"
repaired() { jq -se 'any(.message | startswith("repaired after an outside change"))' "$STATE/tg0.log" >/dev/null 2>&1; }
wait_for "a repair after deleting its rule is logged as a JSON event" 10 repaired
check "... and the log is still JSON lines only" json_lines "$STATE/tg0.log"

# --- Errors -------------------------------------------------------------------------------------------------
printf '{"name": "tg1", "mtu": 70000, "ipv4Settings": {"addresses": ["10.9.0.300"], "subnetMasks": ["255.255.255.0"]}}\n' \
  >"$TG_TMP/bad.json"
tg_run "$TG" --log-format json validate "$TG_TMP/bad.json"
check_rc "validate of a bad configuration fails (exit 1)" 1
printf '%s\n' "$TG_ERR" >"$TG_TMP/validate.err"
check_eq "... with one line on standard error" 1 "$(grep -c . "$TG_TMP/validate.err")"
check "... a JSON event" json_lines "$TG_TMP/validate.err"
check "... of level error whose message holds every problem with its key path" \
  jq -e '.level == "error" and (.message | contains("ipv4Settings.addresses[0]") and contains("mtu") and contains("\n"))' \
  "$TG_TMP/validate.err"
tg_run "$TG" up --log-format json
check_rc "a usage error exits 64" 64
check "... and is one error event with the usage" \
  jq -e '.level == "error" and .message == "missing CONFIG" and (.usage | startswith("tunnelgate up CONFIG"))' <<<"$TG_ERR"
tg_run "$TG" --log-format xml status
check_rc "--log-format xml is refused (exit 64)" 64
check_match "... naming the value" "^Error: --log-format xml: the log format is text, json or journal$" "$TG_ERR"
tg_run env TUNNELGATE_LOG_FORMAT=yaml "$TG" status
check_rc "TUNNELGATE_LOG_FORMAT=yaml is refused (exit 64)" 64
check_match "... naming the variable" "^Error: TUNNELGATE_LOG_FORMAT=yaml: the log format is text, json or journal$" "$TG_ERR"
tg_run env TUNNELGATE_LOG_FORMAT=json "$TG" validate "$TG_TMP/bad.json"
check "TUNNELGATE_LOG_FORMAT=json does what the option does" \
  jq -e '.level == "error" and (.message | contains("mtu"))' <<<"$TG_ERR"
tg_run "$TG" validate "$TG_TMP/bad.json"
check_match "without either the error is text, as before" "^Error: $TG_TMP/bad.json is not a valid configuration" "$TG_ERR"

# --- journald ----------------------------------------------------------------------------------------------
# Under systemd, JOURNAL_STREAM names standard error's device and inode when it is the journal's stream:
# then every line carries its syslog priority (<3> error, <6> info), which journald records as PRIORITY.
# Here standard error is a file and JOURNAL_STREAM names it, as systemd would name its socket.
journal_err=$TG_TMP/journal.err
: >"$journal_err"
stream=$(stat -c '%d:%i' "$journal_err")
env JOURNAL_STREAM="$stream" "$TG" validate "$TG_TMP/bad.json" >/dev/null 2>"$journal_err"
check_match "standard error is the journal's stream: the error's lines carry <3>" '^<3>Error: .*bad\.json is not a valid configuration' \
  "$(head -n 1 "$journal_err")"
check "... every line of it (journald makes an entry of each)" \
  bash -c '[ "$(grep -c . "$1")" -gt 1 ] && ! grep -v "^<3>" "$1"' _ "$journal_err"
env JOURNAL_STREAM="$stream" "$TG" status no-such-tunnel-here >/dev/null 2>"$journal_err"
check_no_match "... and no line without a priority" '^[^<]' "$(cat "$journal_err")"
other=$TG_TMP/other.err
: >"$other"
env JOURNAL_STREAM="$(stat -c '%d:%i' "$other")" "$TG" validate "$TG_TMP/bad.json" >/dev/null 2>"$journal_err"
check_match "JOURNAL_STREAM naming another file: plain text" '^Error: ' "$(head -n 1 "$journal_err")"
env JOURNAL_STREAM=garbage "$TG" validate "$TG_TMP/bad.json" >/dev/null 2>"$journal_err"
check_match "... and so for a JOURNAL_STREAM that is not DEVICE:INODE" '^Error: ' "$(head -n 1 "$journal_err")"
tg_run "$TG" --log-format journal validate "$TG_TMP/bad.json"
check_match "--log-format journal asks for it" '^<3>Error: ' "$TG_ERR"
env JOURNAL_STREAM="$stream" "$TG" --log-format json validate "$TG_TMP/bad.json" >/dev/null 2>"$journal_err"
check "... and --log-format json wins over the journal's stream" json_lines "$journal_err"

# --- A warning ------------------------------------------------------------------------------------------------
umask 077
wg genkey >"$TG_TMP/k.key"
cat >"$TG_TMP/tgk.conf" <<CONF
[Interface]
PrivateKey = $(cat "$TG_TMP/k.key")
Address = 10.72.0.1/24

[Peer]
PublicKey = $(wg genkey | wg pubkey)
Endpoint = $LAN4:51820
AllowedIPs = 10.72.0.0/24
CONF
# Without CAP_IPC_LOCK and with RLIMIT_MEMLOCK 0 the key memory cannot be locked: `up` warns and goes on.
tg_run in_c setpriv --bounding-set=-ipc_lock --inh-caps=-ipc_lock prlimit --memlock=0 \
  "$TG" --log-format json up "$TG_TMP/tgk.conf" --detach
check_rc "tunnelgate --log-format json up tgk.conf --detach, with no memory to lock" 0
printf '%s\n' "$TG_ERR" >"$TG_TMP/up.err"
check "the caller's standard error is JSON events" json_lines "$TG_TMP/up.err"
check "... among them the mlock warning, of level warning" \
  jq -se 'any(.level == "warning" and (.message | startswith("mlock(")))' "$TG_TMP/up.err"
check "the owner's tgk.log says it too, as JSON" \
  jq -se 'any(.level == "warning" and (.message | startswith("mlock(")))' "$STATE/tgk.log"
check "... and is JSON lines only" json_lines "$STATE/tgk.log"
check "the private key is in no log line" \
  bash -c "! grep -qF -f '$TG_TMP/k.key' '$STATE/tgk.log' '$STATE/tg0.log' '$TG_TMP/up.err'"

tg_run in_c "$TG" --log-format json down tgk
check_rc "down tgk" 0
check_eq "down's output is the command's output, as before" "tgk: down, everything removed" "$TG_OUT"
tg_run in_c "$TG" down tg0
check_rc "down tg0" 0
tg_summary
