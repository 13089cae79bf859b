#!/usr/bin/env bash
# networkextension-proxy: a provider's NETunnelNetworkSettings.proxySettings (an HTTP and HTTPS proxy
# with two exceptions) become files for the programs of its namespace, never enforced: the engine
# writes NAME.proxy.pac and NAME.proxy.env in /run/tunnelgate-proxy/net-INODE/ (readable by every
# user; the state directory is root's), journals them, `status` names them (text and JSON), and they go
# at a clean stop, and after a SIGKILL of the host when `tunnelgate down` recovers. The PAC file runs
# in node as a browser runs it. Settings with a bad proxy port are refused with the key path named, and
# nothing is applied.
#
#   C ── tunnelgate-provider-example ── tg0 (10.8.0.2/24; proxy 198.18.0.30:3128, not enforced)
#   │ eth0 (carrier $CARRIER4 stays here)
#   R ── I
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
PROVIDER=${TG_PROVIDER_EXAMPLE:-$TG_ROOT/.build/debug/tunnelgate-provider-example}
[ -x "$PROVIDER" ] || tg_bail "the example host is built at $PROVIDER" "build it with: swift build"
tg_begin --needs node,jq,setpriv
tg_plane_test_hooks TG_NE_REMOTE TG_NE_DNS TG_NE_PROXY TG_NE_PROXY_EXCEPTIONS
mkdir -p "/etc/netns/$NS_C"
tg_defer rm -rf "/etc/netns/$NS_C"
printf 'nameserver %s\n' "$R_C0_4" >"/etc/netns/$NS_C/resolv.conf"
tg_snapshot "$NS_C" "$TG_TMP/before"

state=$(tg_state_dir "$NS_C")
proxy_dir=${state/\/run\/tunnelgate\//\/run\/tunnelgate-proxy\/}
pac=$proxy_dir/tg0.proxy.pac
envfile=$proxy_dir/tg0.proxy.env
log=$TG_TMP/provider.log

connected() { grep -q '"status" *: *"connected"' "$state/tg0.state" 2>/dev/null; }
start() {  # start PROXY: the counting provider with proxySettings for PROXY (HOST:PORT)
  ip netns exec "$NS_C" env TG_NE_REMOTE="$CARRIER4" TG_NE_DNS=10.8.0.1 TG_NE_PROXY="$1" \
    TG_NE_PROXY_EXCEPTIONS='*.internal.example,10.0.0.0/8' "$PROVIDER" --provider counting >"$log" 2>&1 &
  provider_pid=$!
}

start 198.18.0.30:3128
wait_for "the provider's tunnel is connected" 15 connected
check_eq "the environment file holds the proxy for http and https and the exceptions as no_proxy" \
  "$(printf '%s\n' http_proxy=http://198.18.0.30:3128 https_proxy=http://198.18.0.30:3128 HTTPS_PROXY=http://198.18.0.30:3128 \
      no_proxy=.internal.example,10.0.0.0/8 NO_PROXY=.internal.example,10.0.0.0/8)" "$(cat "$envfile" 2>&1)"
check_eq "both files are mode 0644, root's" "644 0 644 0" "$(stat -c '%a %u' "$pac" "$envfile" 2>&1 | tr '\n' ' ' | sed 's/ $//')"
check "an unprivileged user can read the PAC file" setpriv --reuid 65534 --regid 65534 --clear-groups cat "$pac"
pac_says() {  # pac_says URL HOST: what FindProxyForURL answers, run by node as a browser runs the file
  node -e 'const fs = require("fs"); eval(fs.readFileSync(process.argv[1], "utf8")); console.log(FindProxyForURL(process.argv[2], process.argv[3]))' \
    "$pac" "$1" "$2"
}
check_eq "the PAC file sends http://www.example.org/ through the proxy" "PROXY 198.18.0.30:3128" "$(pac_says http://www.example.org/ www.example.org 2>&1)"
check_eq "the PAC file sends https://a.internal.example/ direct (exception *.internal.example)" "DIRECT" \
  "$(pac_says https://a.internal.example/ a.internal.example 2>&1)"
check_eq "the PAC file sends http://10.1.2.3/ direct (exception 10.0.0.0/8)" "DIRECT" "$(pac_says http://10.1.2.3/ 10.1.2.3 2>&1)"
check_match "the journal records both files" "^file $pac\$" "$(cat "$state/tg0.journal" 2>&1)"
check_match "the journal records the environment file" "^file $envfile\$" "$(cat "$state/tg0.journal" 2>&1)"
tg_run ip netns exec "$NS_C" "$TG" status tg0
check_match "status names the files and says nothing is enforced" \
  "^  proxy \(not enforced\): PAC $pac, environment $envfile\$" "$TG_OUT"
tg_run ip netns exec "$NS_C" "$TG" status tg0 --json
check_eq "status --json: .proxy.environmentFile" "$envfile" "$(jq -r '.proxy.environmentFile' <<<"$TG_OUT" 2>&1)"
check_match "status --json: .proxy.notes say what no_proxy cannot" 'no_proxy: IPv4 prefixes' "$(jq -r '.proxy.notes[]' <<<"$TG_OUT" 2>&1)"

kill -TERM "$provider_pid"; wait "$provider_pid"
check_eq "the host exits 0 after SIGTERM" 0 "$?"
check_fails "the PAC file is gone after the stop" test -e "$pac"
check_fails "the environment file is gone after the stop" test -e "$envfile"
check_fails "... and the namespace's proxy directory, empty, with them" test -e "$proxy_dir"

# A SIGKILL of the host and its plane leaves the files; `tunnelgate down` removes them from the journal.
start 198.18.0.30:3128
wait_for "the provider's tunnel is connected again" 15 connected
check "the files are there again" test -s "$envfile"
provider_pids=$(for pid in $(ip netns pids "$NS_C"); do
  [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$(readlink -f "$PROVIDER")" ] && echo "$pid"; done)
# shellcheck disable=SC2086  # one pid a word
kill -KILL $provider_pids; wait "$provider_pid" 2>/dev/null
check "after SIGKILL the environment file is still there (nobody removed it)" test -e "$envfile"
tg_run ip netns exec "$NS_C" "$TG" down tg0
check_eq "tunnelgate down recovers the killed tunnel" 0 "$TG_RC"
check_fails "recovery removed the PAC file" test -e "$pac"
check_fails "recovery removed the environment file" test -e "$envfile"

# Bad proxy settings: refused with the key path, nothing applied.
start 198.18.0.30:0
wait "$provider_pid"
check_eq "a proxy on port 0 fails the start (the host exits 1)" 1 "$?"
check_match "the refusal names proxySettings.httpServer.port" 'proxySettings\.httpServer\.port: 0 is not a port \(1-65535\)' "$(cat "$log")"
check_fails "no tg0 was made" ip -n "$NS_C" link show dev tg0
check_fails "no proxy file was written" test -e "$envfile"

tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "C's kernel state at the end equals the state before" "$TG_TMP/before" "$TG_TMP/after"
tg_summary
