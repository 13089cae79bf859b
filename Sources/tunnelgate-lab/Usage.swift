import Lab

let version = "0.1.0"

enum ExitCode {
    static let success: Int32 = 0
    static let failure: Int32 = 1
    static let usage: Int32 = 64
}

struct UsageError: Error {
    let message: String
    let command: LabCommand?
}

enum LabCommand: String, CaseIterable {
    case up, down, sweep, list, exec, impair, addr, nat, dnsHijack = "dns-hijack", kill, leaks
    case expectNoLeaks = "expect-no-leaks", snapshot, diff, watch, run, phase, expect, help

    var usage: String {
        switch self {
        case .up: "tunnelgate-lab up TOPOLOGY.json [--run-id ID] [--owner PID]"
        case .down: "tunnelgate-lab down [RUN]"
        case .sweep: "tunnelgate-lab sweep"
        case .list: "tunnelgate-lab list"
        case .exec: "tunnelgate-lab exec [RUN] NODE -- CMD [ARG...]"
        case .impair: "tunnelgate-lab impair LINK loss PCT | rate KBIT | mtu-blackhole BYTES | delay MS [JITTER_MS] | jitter MS | down | up | clear"
        case .addr: "tunnelgate-lab addr NODE IFACE NEWADDR[/LEN]"
        case .nat: "tunnelgate-lab nat ROUTER masquerade|port-preserving|port-random|off"
        case .dnsHijack: "tunnelgate-lab dns-hijack NODE ADDR|off"
        case .kill: "tunnelgate-lab kill NODE PROCESS-NAME [--signal KILL|TERM|INT|HUP]"
        case .leaks: "tunnelgate-lab leaks reset | show [--carrier IP:PORT/PROTO[@[SADDR:]SPORT]]... [--allow PREFIX]... [--json]"
        case .expectNoLeaks: "tunnelgate-lab expect-no-leaks --carrier IP:PORT/PROTO[@[SADDR:]SPORT]... [--allow PREFIX]... [--uid UID] [--after MS] [--before MS] [--only carrier-addresses|other-addresses] [--name TEXT]"
        case .snapshot: "tunnelgate-lab snapshot NODE|host [--out FILE]"
        case .diff: "tunnelgate-lab diff SNAPSHOT-A SNAPSHOT-B"
        case .watch: "tunnelgate-lab watch [--tunnel NODE[:NAME]]... [--process NODE:NAME]... [--for SECONDS] [--tunnelgate PATH]"
        case .run: "tunnelgate-lab run SCENARIO [--topology TOPOLOGY.json] [--tap FILE] [--junit FILE] [--run-id ID] [-- ARG...]"
        case .phase: "tunnelgate-lab phase NAME"
        case .expect: "tunnelgate-lab expect reach NODE ADDR | no-reach NODE ADDR | route NODE ADDR DEV | carrier NODE IFACE on|off | same-snapshot A B [--name TEXT] | ok NAME -- CMD…"
        case .help: "tunnelgate-lab help [SUBCOMMAND]"
        }
    }

    var summary: String {
        switch self {
        case .up: "Build a topology in fresh namespaces; print the run id and the namespace names."
        case .down: "Remove a run: its processes, namespaces, files and state."
        case .sweep: "Remove every run whose owner process is gone, and lab namespaces no run claims."
        case .list: "List the runs on this host with their owners and namespaces."
        case .exec: "Run a command inside a node (as `ip netns exec` would); exits with its status."
        case .impair: "Impair a link while it runs: loss, rate, MTU black hole, delay, carrier flap."
        case .addr: "Change a node's address on an interface (roaming)."
        case .nat: "Set NAT on a router's wan interface."
        case .dnsHijack: "Run a resolver in a node that answers every name with ADDR."
        case .kill: "Signal the processes of a name in a node (a crash: --signal KILL)."
        case .leaks: "Reset or show the leak counters (every 5-tuple leaving the client's links)."
        case .expectNoLeaks: "Assert that nothing but the carriers left the client's links since the last reset."
        case .snapshot: "Write a node's rules, routes, addresses, links, nftables, resolv.conf and sysctls."
        case .diff: "Compare two snapshots; exits 1 when they differ."
        case .watch: "Stream timestamped transitions of tunnels and processes."
        case .run: "Run a scenario script against a fresh topology; TAP and JUnit results."
        case .phase: "Start a phase of a scenario (resets the leak counters)."
        case .expect: "Assert reachability, a route decision or equal snapshots."
        case .help: "Show help for a subcommand."
        }
    }

    var details: String {
        switch self {
        case .up:
            return """
            ARGUMENTS:
              TOPOLOGY.json   Nodes, links, addresses, routes (docs/lab.md; Examples/lab/vpn-client.json).

            OPTIONS:
              --run-id ID     The run's id (1-16 lower-case letters and digits); default: random.
              --owner PID     The process the run belongs to; `sweep` removes the run once it is
                              gone. Default: the process that called tunnelgate-lab (its parent).

            Prints `run ID` and one `NODE NAMESPACE` line per node. State in /run/tunnelgate-lab/ID/.
            A topology with a problem is refused with every problem and its key path; nothing is made.
            """
        case .exec:
            return """
            Enters the node's network namespace, mounts /etc/netns/NAMESPACE/* over /etc and a /sys of
            the namespace (as `ip netns exec` does) and executes CMD. The exit status is CMD's (127 when
            it cannot be run). RUN defaults to --run, $TUNNELGATE_LAB_RUN or the only run up.
            """
        case .impair:
            return """
            loss PCT            drop PCT% of the packets in each direction (nftables numgen)
            rate KBIT           at most KBIT kbit/s in each direction (htb)
            mtu-blackhole BYTES drop packets larger than BYTES, and the ICMP fragmentation-needed and
                                ICMPv6 packet-too-big messages that would say so
            delay MS [JITTER]   needs the kernel's sch_netem; refused with a message where it is missing
            jitter MS           the same
            down | up           take the link's far end (b) down or up: the near end (a) loses carrier
            clear               remove every impairment of the link
            """
        case .leaks:
            return """
            reset   every counter to zero, every flow forgotten (`phase` does this too)
            show    every flow since then, one a line: its kind (carrier, allowed, dns or other, as
                    --carrier and --allow say; by-uid for what the client counted by socket uid), the
                    5-tuple, its packets, where it was counted and when it was first seen:
                    `first-seen MS (HH:MM:SS.mmmZ)`, MS in milliseconds since the epoch; with
                    --json one object: {"flows": [...], "byUID": [...], "unitemised": N}, each flow with
                    kind, proto, source, destination, sourcePort and destinationPort (ICMP: icmpType and
                    icmpCode), packets, at, firstSeen, uid and toCarrierAddress
            """
        case .expectNoLeaks:
            return """
            OPTIONS:
              --carrier IP:PORT/PROTO[@[SADDR:]SPORT]
                                 a 5-tuple the client may send to (udp or tcp; [IPv6]:PORT/udp); with
                                 @SPORT only from that source port of the client (a carrier socket bound
                                 to a known local port, e.g. WireGuard's ListenPort), with @SADDR:SPORT
                                 (@[IPv6]:SPORT) only from that address and port too
              --allow PREFIX     destinations that are not leaks (e.g. the LAN)
              --uid UID          carrier packets count only from UID (counted on the client itself)
              --after MS         judge only flows first seen at or after MS (milliseconds since the
                                 epoch: `date +%s%3N`)
              --before MS        judge only flows first seen before MS (e.g. the moment a kill switch
                                 was last seen in place)
              --only carrier-addresses|other-addresses
                                 judge only flows to a carrier's address (but not its 5-tuple) or only
                                 flows to any other address
              --name TEXT        the assertion's name in the TAP and JUnit results

            Counts since the last `leaks reset` or `phase`. Every other flow is listed, DNS separately,
            oldest first, each with the time it was first seen; exit 1 when there is any. A first-seen
            time is never earlier than the flow's first packet and at most a clock tick (10 ms) and the
            read's own time later. Packets the counters hold without a flow count in every window.
            """
        case .run:
            return """
            The scenario is a bash script run with the lab's functions defined: lab, phase, expect,
            expect-no-leaks, in_node and lab_wait (docs/lab.md). The run is torn down at the end, on
            SIGINT and SIGTERM. Prints TAP to stdout and `N passed, N failed` last; --tap and --junit
            write the results to files. Exit 1 when any assertion failed or the script failed.
            """
        default:
            return ""
        }
    }

    var help: String {
        var text = "OVERVIEW: \(summary)\n\nUSAGE: \(usage)\n"
        if !details.isEmpty { text += "\n" + details + "\n" }
        return text
    }
}

let overview = """
OVERVIEW: Network-namespace end-to-end testing of tunnel software: throwaway dual-stack
topologies, impairments, leak counters, host-state snapshots, TAP and JUnit results.

USAGE: tunnelgate-lab <subcommand>

OPTIONS:
  -h, --help      Show help information.
  --version       Show the version.
  --run RUN       The run a subcommand acts on (default: $TUNNELGATE_LAB_RUN, else the only one).

SUBCOMMANDS:
\(LabCommand.allCases.map { "  " + $0.rawValue.padded(17) + $0.summary }.joined(separator: "\n"))

  See 'tunnelgate-lab help <subcommand>' for detailed help; docs/lab.md for a walkthrough.

"""

extension String {
    func padded(_ width: Int) -> String { count >= width ? self + " " : self + String(repeating: " ", count: width - count) }
}
