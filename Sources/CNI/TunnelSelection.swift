/// Which tunnel configuration a container gets, by precedence: the pod annotation
/// `tunnelgate.io/tunnel` (Kubernetes, through containerd's `io.kubernetes.cri.pod-annotations`
/// capability), CNI_ARGS `TUNNELGATE_TUNNEL` (runtimes that pass arguments), then the network's
/// `tunnel`. A name given either way is a configured name (a file in the tunnel directory), never a
/// path: a pod's author picks among what the node's administrator put there. Nil: the container is
/// not to be put behind a tunnel (the network names none, nor does the container).
public struct TunnelSelection: Equatable, Sendable {
    public var source: TunnelSource
    /// Who chose it, for messages: "the pod annotation tunnelgate.io/tunnel", "the network".
    public var chosenBy: String

    /// The CNI_ARGS key that names a configured tunnel.
    public static let argument = "TUNNELGATE_TUNNEL"

    public static func select(_ config: PluginConfiguration, _ invocation: CNIInvocation) throws(CNIError) -> TunnelSelection? {
        if let name = config.podAnnotations.first(where: { $0.key == PluginConfiguration.annotation })?.value {
            let key = "the pod annotation \(PluginConfiguration.annotation)"
            return TunnelSelection(source: .configured(try PluginConfiguration.configuredName(key, name)), chosenBy: key)
        }
        if let name = invocation.argument(argument) {
            let key = "CNI_ARGS \(argument)"
            return TunnelSelection(source: .configured(try PluginConfiguration.configuredName(key, name)), chosenBy: key)
        }
        guard let source = config.tunnel else { return nil }
        if source == .podName {
            guard let pod = invocation.argument("K8S_POD_NAME"), !pod.isEmpty else {
                throw CNIError(.invalidEnvironment, "CNI_ARGS has no K8S_POD_NAME",
                               details: "the network's tunnel is named after the pod (tunnel.podName), and the runtime passed no pod name")
            }
            let key = "the pod name (CNI_ARGS K8S_POD_NAME)"
            return TunnelSelection(source: .configured(try PluginConfiguration.configuredName(key, pod)), chosenBy: key)
        }
        return TunnelSelection(source: source, chosenBy: "the network \(config.network)")
    }
}
