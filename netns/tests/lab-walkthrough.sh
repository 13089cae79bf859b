#!/usr/bin/env bash
# docs/lab.md's walkthrough, run as written: Examples/lab/walkthrough-wg-quick.sh (the file the doc
# shows) tests plain wg-quick with wireguard-go in the lab's default topology and must find its leak.
#
#   client (wg-quick + wireguard-go, full tunnel) ══ router ══ internet ══ carrier (wireguard-go + wg)
#                                                                      ╚═ included (the probe's target)
# Asserted: the doc includes the script verbatim; it ends with a JUnit file that is well-formed XML;
# the deliberately leaking client is found: the restart phase's leak check fails, listing the probe's
# echo requests to the included host seen in the clear at the router, and the crash phase's too;
# the connect and steady phases pass; the host is left as it was.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
tg_begin --no-topology --no-binary --lab --tmp --needs wireguard-go,wg-quick
TMP=$TG_TMP

script=$TG_ROOT/Examples/lab/walkthrough-wg-quick.sh
# The doc shows the script between the markers; the two must be the same text.
sed -n '/^<!-- walkthrough-wg-quick.sh -->$/,/^<!-- end -->$/p' "$TG_ROOT/docs/lab.md" | sed '1,2d;$d' | sed '$d' >"$TMP/doc.sh"
check_eq "docs/lab.md includes Examples/lab/walkthrough-wg-quick.sh verbatim" "$(cat "$script")" "$(cat "$TMP/doc.sh")"

before() { ip -o link show | sed -E 's/ link-netns(id)? [^ ]+//' | awk '{ $1=""; print }'; nft list ruleset; }
before >"$TMP/host.before"
cd "$TG_ROOT" || tg_bail "cd $TG_ROOT"
tg_run env LAB="$LAB" OUT="$TMP/out" bash "$TMP/doc.sh"
check_rc "the walkthrough ends with exit 1: the lab found wg-quick's leaks" 1
check "it wrote a well-formed JUnit file" xmllint --noout "$TMP/out/leaks.xml"
check_match "connect passes (the carrier is the only thing leaving)" '^ok - \[up\] nothing but the carrier leaves while connecting' "$TG_OUT"
check_match "steady passes" '^ok - \[steady\] nothing but the carrier leaves while connected' "$TG_OUT"
check_match "the restart leak is found" '^not ok - \[restart\] nothing but the carrier leaves while the client restarts' "$TG_OUT"
check_match "and shown as the probe's echo requests in the clear at the router" \
  '^#   leak: icmp 10\.231\.0\.2 -> 198\.18\.30\.30 type 8 code 0 packets [0-9]+ .*\(at router\)' "$TG_OUT"
check_match "the crash leak is found" '^not ok - \[crash\] nothing leaves after wireguard-go is SIGKILLed' "$TG_OUT"
check_match "JUnit has the restart failure with its 5-tuple" 'leak: icmp 10\.231\.0\.2 -&gt; 198\.18\.30\.30' \
  "$(grep -A2 'classname="leaks.restart"' "$TMP/out/leaks.xml")"
before >"$TMP/host.after"
check_same_snapshot "the host's links and nftables are as before" "$TMP/host.before" "$TMP/host.after"
tg_summary
