# Examples/lab/scenarios/dns.sh: does DNS go where it should? With the client connected, names
# resolve (LAB_DNS_NAME to LAB_DNS_ANSWER), and no DNS query leaves the client's links in the clear:
# the client's resolv.conf names the LAN resolver (192.168.231.2), so a query that is not carried
# by the tunnel shows up at the router as a DNS leak. Then the LAN resolver is hijacked (it answers
# every name with 198.18.99.99): a client whose DNS goes through the tunnel never sees the lie.
# (LAB_* variables: common.sh.)
#
#   client ──uplink── router ──lan── lan (resolver 192.168.231.2)
#                        └────wan── internet ── carrier (VPN server; its resolver answers too)
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
LAB_DNS_NAME=${LAB_DNS_NAME:-included.lab.test}
LAB_DNS_ANSWER=${LAB_DNS_ANSWER:-198.18.30.30}

server_up
phase up
client "$LAB_CLIENT_UP"
lab_wait 20 tunnel_works
expect reach client "$LAB_TUNNEL_CHECK" --name "the tunnel carries traffic"

phase steady
answer=$(in_node client getent ahostsv4 "$LAB_DNS_NAME" | awk 'NR == 1 { print $1 }')
expect ok "$LAB_DNS_NAME resolves to $LAB_DNS_ANSWER (got: ${answer:-nothing})" -- test "$answer" = "$LAB_DNS_ANSWER"
expect-no-leaks "${carriers[@]}" --name "no DNS query (nor anything else) leaves in the clear"

phase hijacked
lab dns-hijack lan 198.18.99.99 >/dev/null
answer=$(in_node client getent ahostsv4 "$LAB_DNS_NAME" | awk 'NR == 1 { print $1 }')
expect ok "the hijacked LAN resolver's lie does not reach the client (got: ${answer:-nothing})" -- test "$answer" != 198.18.99.99
expect-no-leaks "${carriers[@]}" --name "no DNS query leaves in the clear while the LAN lies"

phase down
client "$LAB_CLIENT_DOWN" || note "the down command failed"
