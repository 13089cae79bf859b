import TunnelgateSettings

/// What the runtime passes in the environment (the CNI specification's protocol parameters).
public struct CNIInvocation: Sendable {
    public var command: CNICommand
    /// CNI_CONTAINERID ("" for VERSION).
    public var containerID: String
    /// CNI_NETNS: a path to the container's network namespace; nil when not given (DEL may omit it).
    public var netns: String?
    /// CNI_IFNAME: the container's interface this attachment is for ("" for VERSION).
    public var ifname: String
    /// CNI_ARGS, in order.
    public var args: [(key: String, value: String)]

    /// The value of KEY in CNI_ARGS.
    public func argument(_ key: String) -> String? {
        args.first(where: { $0.key == key })?.value
    }

    /// Reads and checks the parameters `command` needs. Every invalid variable is named in one
    /// error (code 4), as the specification asks.
    public static func parse(_ environment: [String: String]) throws(CNIError) -> CNIInvocation {
        guard let text = environment["CNI_COMMAND"], !text.isEmpty else {
            throw CNIError(.invalidEnvironment, "CNI_COMMAND is missing", details: "one of ADD, DEL, CHECK, VERSION")
        }
        guard let command = CNICommand(rawValue: text) else {
            throw CNIError(.invalidEnvironment, "CNI_COMMAND '\(text)' is not supported",
                           details: "tunnelgate-cni handles ADD, DEL, CHECK and VERSION")
        }
        var problems: [String] = []
        let value = { (name: String) -> String? in
            guard let v = environment[name], !v.isEmpty else { return nil }
            return v
        }
        let containerID = value("CNI_CONTAINERID") ?? ""
        let netns = value("CNI_NETNS")
        let ifname = value("CNI_IFNAME") ?? ""
        var args: [(key: String, value: String)] = []
        if command != .version {
            if containerID.isEmpty {
                problems.append("CNI_CONTAINERID is missing")
            } else if let p = containerIDProblem(containerID) {
                problems.append("CNI_CONTAINERID \(JSONValue.quoted(containerID)) \(p)")
            }
            if ifname.isEmpty {
                problems.append("CNI_IFNAME is missing")
            } else if let p = InterfaceName.problem(ifname) {
                problems.append("CNI_IFNAME: \(p)")
            }
            if let netns, !netns.hasPrefix("/") {
                problems.append("CNI_NETNS \(JSONValue.quoted(netns)) is not an absolute path")
            } else if netns == nil, command != .del {
                problems.append("CNI_NETNS is missing")
            }
            if let raw = value("CNI_ARGS") {
                for pair in raw.split(separator: ";", omittingEmptySubsequences: true) {
                    let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                    guard kv.count == 2, !kv[0].isEmpty else {
                        problems.append("CNI_ARGS: \(JSONValue.quoted(String(pair))) is not KEY=VALUE")
                        continue
                    }
                    args.append((String(kv[0]), String(kv[1])))
                }
            }
        }
        guard problems.isEmpty else {
            throw CNIError(.invalidEnvironment, "invalid CNI environment variables: "
                           + problems.map { String($0.prefix(while: { $0 != " " && $0 != ":" })) }.joined(separator: ", "),
                           details: problems.joined(separator: "; "))
        }
        return CNIInvocation(command: command, containerID: containerID, netns: netns, ifname: ifname, args: args)
    }

    /// The specification's rule for container IDs: an alphanumeric character, then alphanumerics,
    /// underscores, dots and hyphens.
    static func containerIDProblem(_ id: String) -> String? {
        let bytes = Array(id.utf8)
        func alnum(_ b: UInt8) -> Bool {
            (0x30...0x39).contains(b) || (0x41...0x5a).contains(b) || (0x61...0x7a).contains(b)
        }
        guard let first = bytes.first, alnum(first) else { return "does not start with a letter or digit" }
        guard bytes.allSatisfy({ alnum($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") }) else {
            return "has a character other than letters, digits, '_', '.' and '-'"
        }
        return nil
    }
}
