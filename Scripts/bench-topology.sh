# shellcheck shell=bash
# Scripts/bench-topology.sh: what the benchmark scripts share, sourced, never run.

# bench_veth_pair A B: namespaces A and B (made here), their loopbacks up, joined by a veth named eth0
# on both sides: A 10.77.0.1/24 ═══ B 10.77.0.2/24. The caller's trap deletes them.
bench_veth_pair() {
  ip netns add "$1"
  ip netns add "$2"
  ip -n "$1" link set lo up
  ip -n "$2" link set lo up
  ip -n "$1" link add eth0 type veth peer name eth0 netns "$2"
  ip -n "$1" addr add 10.77.0.1/24 dev eth0
  ip -n "$2" addr add 10.77.0.2/24 dev eth0
  ip -n "$1" link set eth0 up
  ip -n "$2" link set eth0 up
}
