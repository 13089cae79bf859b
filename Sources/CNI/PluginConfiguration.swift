import TunnelgateSettings

/// Where a container's tunnel configuration comes from.
public enum TunnelSource: Equatable, Sendable, CustomStringConvertible {
    /// A configured name: NAME.json or NAME.conf in the tunnel directory.
    case configured(String)
    /// A file: a wg-quick file when it ends in `.conf`, else JSON with NetworkExtension's names.
    case path(String)
    /// The settings themselves, in the plugin's configuration (JSON with NetworkExtension's names).
    case settings(JSONValue)
    /// The configured name is the pod's name (CNI_ARGS K8S_POD_NAME; Podman passes the container's).
    case podName

    public var description: String {
        switch self {
        case .configured(let name): "the configured tunnel \(name)"
        case .path(let path): "the tunnel configuration \(path)"
        case .settings: "the settings in the network configuration"
        case .podName: "the configured tunnel named like the pod"
        }
    }
}

/// The network configuration tunnelgate-cni is given on standard input: the CNI keys (cniVersion,
/// name, prevResult, runtimeConfig) and its own (docs/cni.md).
public struct PluginConfiguration: Sendable {
    public var cniVersionText: String
    public var cniVersion: CNIVersion
    /// The network's name.
    public var network: String
    /// The result of the plugins before this one (the main plugin's interfaces and addresses).
    public var prevResult: JSONValue?
    /// `tunnel`: the network's tunnel for every container; nil: only containers that name one.
    public var tunnel: TunnelSource?
    /// Pod annotations (runtimeConfig's `io.kubernetes.cri.pod-annotations`, which containerd passes
    /// to plugins that declare the capability).
    public var podAnnotations: [(key: String, value: String)] = []
    public var tunnelDirectory = PluginConfiguration.defaultTunnelDirectory
    public var stateDirectory = PluginConfiguration.defaultStateDirectory
    /// `tunnelgate`: the command's absolute path; nil: looked up in the usual places.
    public var tunnelgate: String?
    /// `timeoutSeconds`: how long `tunnelgate up` may take before ADD gives up (and removes it).
    public var timeout: Double = 30

    public static let defaultTunnelDirectory = "/etc/tunnelgate/cni"
    public static let defaultStateDirectory = "/run/tunnelgate-cni"
    /// The pod annotation that names a configured tunnel.
    public static let annotation = "tunnelgate.io/tunnel"
    /// The runtimeConfig capability that carries pod annotations.
    public static let annotationsCapability = "io.kubernetes.cri.pod-annotations"

    /// Keys of the CNI specification and its conventions that a runtime may put in a plugin's
    /// configuration; they are accepted and, except those read above, ignored.
    static let specificationKeys: Set<String> = ["cniVersion", "name", "type", "prevResult", "runtimeConfig", "args",
                                                 "capabilities", "dns", "ipam", "ipMasq", "disableCheck"]

    /// Just the version, for errors about a configuration that is otherwise unreadable: the input's
    /// `cniVersion` when there is one, else the latest.
    public static func versionForErrors(_ input: [UInt8]) -> String {
        (try? JSONParser.parse(input))?[member: "cniVersion"]?.stringValue ?? CNIVersion.latest.description
    }

    /// Parses and checks standard input. Codes: 6 not JSON, 1 a version not spoken, 2 a key
    /// tunnelgate-cni does not know (named with its value), 7 a value that is wrong.
    public static func parse(_ input: [UInt8]) throws(CNIError) -> PluginConfiguration {
        let root: JSONValue
        do { root = try JSONParser.parse(input) } catch {
            throw CNIError(.decodingFailure, "the network configuration on standard input is not JSON", details: error.description)
        }
        guard case .object(let members) = root else {
            throw CNIError(.decodingFailure, "the network configuration on standard input is \(root.typeName), not an object")
        }
        guard let versionText = root[member: "cniVersion"]?.stringValue else {
            throw CNIError(.incompatibleVersion, "cniVersion is missing",
                           details: "tunnelgate-cni speaks \(CNIVersion.supported.map(\.description).joined(separator: ", "))")
        }
        guard let version = CNIVersion(versionText), CNIVersion.supported.contains(version) else {
            throw CNIError(.incompatibleVersion, "cniVersion \(JSONValue.quoted(versionText)) is not supported",
                           details: "tunnelgate-cni speaks \(CNIVersion.supported.map(\.description).joined(separator: ", "))")
        }
        guard let network = root[member: "name"]?.stringValue, !network.isEmpty else {
            throw CNIError(.invalidConfiguration, "name (the network's name) is missing")
        }
        var config = PluginConfiguration(cniVersionText: versionText, cniVersion: version, network: network)
        for (key, value) in members {
            switch key {
            case "prevResult":
                guard case .object = value else { throw invalid("prevResult", value, "an object (the previous plugin's result)") }
                config.prevResult = value
            case "runtimeConfig":
                guard case .object = value else { throw invalid("runtimeConfig", value, "an object") }
                if let annotations = value[member: annotationsCapability] {
                    guard case .object(let pairs) = annotations else {
                        throw invalid("runtimeConfig.\(annotationsCapability)", annotations, "an object of strings")
                    }
                    for (k, v) in pairs {
                        guard let s = v.stringValue else {
                            throw invalid("runtimeConfig.\(annotationsCapability).\(k)", v, "a string")
                        }
                        config.podAnnotations.append((k, s))
                    }
                }
            case "tunnel":
                config.tunnel = try tunnelSource(value)
            case "tunnelDirectory":
                config.tunnelDirectory = try absolutePath(key, value)
            case "stateDirectory":
                config.stateDirectory = try absolutePath(key, value)
            case "tunnelgate":
                config.tunnelgate = try absolutePath(key, value)
            case "timeoutSeconds":
                guard case .number(let seconds, _) = value, seconds >= 1, seconds <= 300 else {
                    throw invalid(key, value, "a number of seconds from 1 to 300")
                }
                config.timeout = seconds
            case "mode":
                guard value.stringValue == "isolate" else {
                    if value.stringValue == "gateway" {
                        throw CNIError(.unsupportedField, "mode: \"gateway\" is not supported yet",
                                       details: "tunnelgate-cni puts each container behind a tunnel of its own (\"isolate\")")
                    }
                    throw invalid(key, value, "\"isolate\"")
                }
            default:
                guard specificationKeys.contains(key) || key.hasPrefix("cni.dev/") else {
                    throw CNIError(.unsupportedField, "unsupported field \(key): \(shown(key, value))",
                                   details: "tunnelgate-cni knows tunnel, tunnelDirectory, stateDirectory, tunnelgate, "
                                   + "timeoutSeconds and mode besides the CNI specification's keys")
                }
            }
        }
        return config
    }

    /// `tunnel`: "NAME", or an object with exactly one of name, path, settings, podName.
    static func tunnelSource(_ value: JSONValue) throws(CNIError) -> TunnelSource {
        if let name = value.stringValue { return .configured(try configuredName("tunnel", name)) }
        guard case .object(let members) = value else {
            throw invalid("tunnel", value, "a configured name, or an object with one of name, path, settings, podName")
        }
        var sources: [TunnelSource] = []
        for (key, v) in members {
            switch key {
            case "name":
                guard let s = v.stringValue else { throw invalid("tunnel.name", v, "a string") }
                sources.append(.configured(try configuredName("tunnel.name", s)))
            case "path":
                sources.append(.path(try absolutePath("tunnel.path", v)))
            case "settings":
                guard case .object = v else { throw invalid("tunnel.settings", v, "an object (NetworkExtension's names)") }
                sources.append(.settings(v))
            case "podName":
                guard v == .bool(true) else { throw invalid("tunnel.podName", v, "true") }
                sources.append(.podName)
            default:
                throw CNIError(.unsupportedField, "unsupported field tunnel.\(key): \(shown(key, v))",
                               details: "tunnel takes one of name, path, settings, podName")
            }
        }
        guard sources.count == 1 else {
            throw CNIError(.invalidConfiguration, "tunnel has \(sources.isEmpty ? "none" : "more than one") of name, path, settings, podName",
                           details: "exactly one says where the container's tunnel configuration comes from")
        }
        return sources[0]
    }

    /// A configured name: a letter or digit, then letters, digits, '_', '.', '-'; at most 64.
    public static func configuredName(_ key: String, _ name: String) throws(CNIError) -> String {
        if let problem = configuredNameProblem(name) {
            throw CNIError(.invalidConfiguration, "\(key) \(JSONValue.quoted(name)) is not a configured tunnel name", details: problem)
        }
        return name
    }

    static func configuredNameProblem(_ name: String) -> String? {
        let bytes = Array(name.utf8)
        func alnum(_ b: UInt8) -> Bool {
            (0x30...0x39).contains(b) || (0x41...0x5a).contains(b) || (0x61...0x7a).contains(b)
        }
        guard let first = bytes.first, alnum(first) else { return "it must start with a letter or digit" }
        guard bytes.count <= 64 else { return "it is longer than 64 characters" }
        guard bytes.allSatisfy({ alnum($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") }) else {
            return "only letters, digits, '_', '.' and '-' may follow"
        }
        return nil
    }

    /// A value for an error message: the specification wants the key and value of an unsupported
    /// field, but a key's name that suggests a secret gets its value withheld, and a long one its type.
    static func shown(_ key: String, _ value: JSONValue) -> String {
        let lower = key.lowercased()
        if ["key", "secret", "password", "psk", "token", "credential"].contains(where: { lower.contains($0) }) {
            return "(\(value.typeName), not shown: the key's name suggests a secret)"
        }
        let text = value.serialized()
        return text.count > 80 ? "(\(value.typeName) of \(text.count) characters)" : text
    }

    static func absolutePath(_ key: String, _ value: JSONValue) throws(CNIError) -> String {
        guard let s = value.stringValue, s.hasPrefix("/"), !s.utf8.contains(0) else {
            throw invalid(key, value, "an absolute path")
        }
        return s
    }

    static func invalid(_ key: String, _ value: JSONValue, _ expected: String) -> CNIError {
        let shown = value.serialized()
        return CNIError(.invalidConfiguration, "\(key) is \(shown.count > 80 ? value.typeName : shown), not \(expected)")
    }
}
