/// What `--netns` names: the namespace a tunnel is put into in isolate mode (docs/operations.md,
/// Isolate mode).
///
///     NAME            a namespace under /run/netns (`ip netns add NAME`)
///     /PATH           any namespace file: /run/netns/NAME, /proc/PID/ns/net, /var/run/docker/netns/ID
///     pid:PID         the namespace of process PID (/proc/PID/ns/net)
///     docker:NAME     the namespace of Docker container NAME (or ID), through dockerd's API socket
///     podman:NAME     the namespace of Podman container NAME (or ID), through `podman inspect`
///
/// Parsing is pure; `NamespaceReference+Open.swift` finds the namespace.
public enum NamespaceReference: Hashable, Sendable, CustomStringConvertible {
    case named(String)
    case path(String)
    case process(Int32)
    case container(ContainerEngine, String)

    public enum ContainerEngine: String, Hashable, Sendable, CaseIterable {
        case docker, podman
    }

    /// Why an argument names no namespace; `description` is the usage error's text.
    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public let argument: String
        public let reason: String
        public var description: String { "--netns '\(argument)': \(reason)" }
    }

    /// The forms, as the help and the errors list them.
    public static let forms = "a name under /run/netns, an absolute path to a namespace file, pid:PID, docker:NAME or podman:NAME"

    public static func parse(_ text: String) throws(ParseError) -> NamespaceReference {
        func refuse(_ reason: String) -> ParseError { ParseError(argument: text, reason: reason) }
        guard !text.isEmpty else { throw refuse("empty; it takes \(forms)") }
        if text.hasPrefix("/") {
            guard text.count > 1, !text.hasSuffix("/") else { throw refuse("a directory, not a namespace file") }
            guard !text.utf8.contains(0) else { throw refuse("holds a NUL byte") }
            return .path(text)
        }
        if text.hasPrefix("pid:") {
            let digits = text.dropFirst(4)
            guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let pid = Int32(digits), pid > 0 else {
                throw refuse("pid: takes a process id (a whole number above 0)")
            }
            return .process(pid)
        }
        for engine in ContainerEngine.allCases where text.hasPrefix(engine.rawValue + ":") {
            let name = String(text.dropFirst(engine.rawValue.count + 1))
            if let problem = containerNameProblem(name) { throw refuse("\(engine.rawValue): \(problem)") }
            return .container(engine, name)
        }
        guard !text.contains("/") else { throw refuse("neither a name (it has a '/') nor an absolute path; it takes \(forms)") }
        guard text != ".", text != ".." else { throw refuse("not a name under /run/netns; it takes \(forms)") }
        return .named(text)
    }

    /// Docker's and Podman's rule for a container name, which their ids (hexadecimal) also follow:
    /// `[a-zA-Z0-9][a-zA-Z0-9_.-]*`, here at most 253 characters.
    static func containerNameProblem(_ name: String) -> String? {
        guard let first = name.unicodeScalars.first else { return "takes a container name or id" }
        guard name.unicodeScalars.count <= 253 else { return "a container name has at most 253 characters" }
        func alphanumeric(_ c: Unicode.Scalar) -> Bool { c.isASCII && (("a"..."z").contains(c) || ("A"..."Z").contains(c) || ("0"..."9").contains(c)) }
        guard alphanumeric(first) else { return "a container name starts with a letter or digit" }
        guard name.unicodeScalars.allSatisfy({ alphanumeric($0) || $0 == "_" || $0 == "." || $0 == "-" }) else {
            return "a container name has only letters, digits, '_', '.' and '-'"
        }
        return nil
    }

    /// The argument again, as `tunnelgate` prints and records it (and as `status` and `down` take it).
    public var description: String {
        switch self {
        case .named(let n): n
        case .path(let p): p
        case .process(let pid): "pid:\(pid)"
        case .container(let engine, let name): "\(engine.rawValue):\(name)"
        }
    }

    /// The namespace file this names, when that does not need a container engine's answer.
    public var filePath: String? {
        switch self {
        case .named(let n): "/run/netns/\(n)"
        case .path(let p): p
        case .process(let pid): "/proc/\(pid)/ns/net"
        case .container: nil
        }
    }

    /// The process whose namespace a path names: /proc/PID/ns/net or /proc/PID/task/TID/ns/net (PID).
    public static func process(inProcPath path: String) -> Int32? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        // "", "proc", PID, "ns", "net"  or  "", "proc", PID, "task", TID, "ns", "net"
        guard parts.count == 5 || parts.count == 7, parts[0].isEmpty, parts[1] == "proc",
              parts[parts.count - 2] == "ns", parts[parts.count - 1] == "net" else { return nil }
        if parts.count == 7, parts[3] != "task" { return nil }
        let id = parts[2]
        guard !id.isEmpty, id.allSatisfy({ $0.isASCII && $0.isNumber }), let pid = Int32(id), pid > 0 else { return nil }
        return pid
    }
}
