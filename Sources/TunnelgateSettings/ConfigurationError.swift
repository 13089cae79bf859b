/// One thing wrong with a configuration: where (a key path such as
/// `ipv4Settings.subnetMasks[0]`) and why.
public struct ConfigProblem: Sendable, Equatable, CustomStringConvertible {
    public var path: String
    public var reason: String

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { path.isEmpty ? reason : "\(path): \(reason)" }
}

/// Every problem found in a configuration, in file order. Printed one per line.
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public var problems: [ConfigProblem]

    public init(_ problems: [ConfigProblem]) { self.problems = problems }

    public var description: String { problems.map(\.description).joined(separator: "\n") }
}

/// A value as problems quote it: `'10.0.0.300'`.
func quoted(_ s: String) -> String { "'\(s)'" }
