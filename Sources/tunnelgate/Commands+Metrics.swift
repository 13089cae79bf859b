import Engine
import LinuxSystem
import Metrics
import Session

/// `tunnelgate metrics`: the help text's body (CommandLine+Run.swift prints it after the usage line).
let metricsHelpText = """

OPTIONS:
  --listen ADDR:PORT      Where to serve http://ADDR:PORT/metrics (default \(ListenAddress.defaultValue)).
                          [IPV6]:PORT for IPv6; localhost is 127.0.0.1.
  --allow-non-loopback    Serve on an address other hosts can reach (refused without it:
                          the metrics name every tunnel, its peers and its traffic).
  --netns NS              The tunnels of namespace NS (`ip netns add NS`), also those put
                          there with `up --netns NS`. May be given more than once.
  --all-namespaces        The tunnels of this namespace and of every named namespace with
                          tunnel state (looked up again at every scrape).

Without --netns or --all-namespaces, serves the tunnels of the namespace it runs in. Each
scrape reads what `tunnelgate status --json` reads (the state records, the last errors,
the kernel's counters and nftables tables); nothing is changed. Runs until SIGINT or
SIGTERM. The metrics are listed in docs/operations.md, Metrics.

"""

extension CommandLine {
    static func metrics(_ args: inout [String]) throws -> Int32 {
        var namespaces: [String] = []
        while let name = try takeNamespaceName(&args, .metrics) { namespaces.append(name) }
        let all = takeFlag(&args, "--all-namespaces")
        let allowNonLoopback = takeFlag(&args, "--allow-non-loopback")
        let listenText = try takeOption(&args, "--listen", .metrics)
        try noMore(args, .metrics)
        if all && !namespaces.isEmpty {
            throw UsageError(message: "--all-namespaces and --netns exclude each other", command: .metrics)
        }
        var listen = ListenAddress.defaultValue
        if let listenText {
            switch ListenAddress.parse(listenText) {
            case .success(let a): listen = a
            case .failure(let e): throw UsageError(message: e.description, command: .metrics)
            }
        }
        if !listen.isLoopback && !allowNonLoopback {
            throw UsageError(message: "--listen \(listen): \(listen.address) is not a loopback address, so other hosts could "
                             + "read every tunnel's metrics; add --allow-non-loopback to serve them there", command: .metrics)
        }
        // Duplicates would be duplicate series, which Prometheus refuses whole.
        var unique: [String] = []
        for n in namespaces where !unique.contains(n) { unique.append(n) }
        for n in unique where !FileSystem.exists(NamedNetworkNamespaces.path(n)) {
            throw Failure("no network namespace named \(n) (\(NamedNetworkNamespaces.path(n)) does not exist)")
        }
        let selection: NamespaceSelection = all ? .all : unique.isEmpty ? .current : .named(unique)

        let signals = try TerminationSignals.block()
        let collector: MetricsCollector
        let server: MetricsServer
        do {
            collector = try MetricsCollector(selection: selection)
            server = try MetricsServer(listen: listen.socketAddress)
        } catch {
            throw Failure("cannot serve metrics on \(listen): \(error)")
        }
        let what = switch selection {
        case .current: "the tunnels of this namespace (\(collector.currentLabel))"
        case .named(let names): "the tunnels of namespace\(names.count == 1 ? "" : "s") \(names.joined(separator: ", "))"
        case .all: "the tunnels of every namespace"
        }
        printError("tunnelgate: serving \(what) at http://\(server.address)/metrics; stop with Ctrl-C")
        var lastErrors: [String: String] = [:]
        try server.run(stop: signals) { counters in
            let began = ProcessControl.monotonicSeconds()
            let snapshots = collector.collect()
            // A namespace that cannot be read is said once, and again only when what is wrong changes.
            for ns in snapshots where lastErrors[ns.name] != ns.error {
                if let error = ns.error { printError("tunnelgate: metrics: namespace \(ns.name): \(error)") }
                lastErrors[ns.name] = ns.error
            }
            return TunnelMetrics.exposition(snapshots, now: ProcessControl.realtimeSeconds(),
                                            scrapeSeconds: ProcessControl.monotonicSeconds() - began,
                                            collector: counters).render()
        }
        let signal = TerminationSignals.read(signals)
        printError("tunnelgate: metrics: stopping (signal \(signal))")
        return ExitCode.success
    }
}
