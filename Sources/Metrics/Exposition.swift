/// A metric family's type, as the TYPE line of Prometheus's text format 0.0.4 names it.
public enum MetricType: String, Sendable {
    /// Only goes up (resets when its process restarts); its name ends in `_total`.
    case counter
    /// Goes up and down; a state or a measurement.
    case gauge
}

/// One metric family: its name, type and HELP text. All samples of a family share the three.
public struct MetricFamily: Sendable, Hashable {
    public let name: String
    public let type: MetricType
    public let help: String

    /// `name` must be a valid metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`): families are constants of
    /// Tunnelgate's, so an invalid one is a bug, not input.
    public init(_ name: String, _ type: MetricType, _ help: String) {
        precondition(Exposition.isValidMetricName(name), "invalid metric name \(name)")
        precondition(type != .counter || name.hasSuffix("_total"), "a counter's name ends in _total: \(name)")
        self.name = name
        self.type = type
        self.help = help
    }
}

/// A sample's value. Integers are written exactly (a counter of bytes passes 2^53 long before it
/// passes 2^64); doubles as Go's ParseFloat reads them, with NaN, +Inf and -Inf spelled as the
/// format wants.
public enum MetricValue: Sendable, Equatable {
    case unsigned(UInt64)
    case signed(Int64)
    case double(Double)

    public static func bool(_ value: Bool) -> MetricValue { .unsigned(value ? 1 : 0) }

    var text: String {
        switch self {
        case .unsigned(let v): return String(v)
        case .signed(let v): return String(v)
        case .double(let v):
            if v.isNaN { return "NaN" }
            if v.isInfinite { return v < 0 ? "-Inf" : "+Inf" }
            // Whole numbers in the range a double holds exactly, without an exponent or ".0".
            if v == v.rounded(), abs(v) < 9_007_199_254_740_992 { return String(Int64(v)) }
            return String(v)
        }
    }
}

/// A scrape's samples, grouped by family and written in Prometheus's text exposition format 0.0.4
/// (https://prometheus.io/docs/instrumenting/exposition_formats/): for each family, in the order
/// families were first added, `# HELP`, `# TYPE` and then its samples in the order they were added, so
/// that every family is one group as the format requires, however the samples were interleaved.
/// A sample whose label set its family already has is dropped (the first one stays): a scrape with a
/// duplicate series is rejected whole by Prometheus.
public struct Exposition: Sendable {
    public typealias Label = (name: String, value: String)

    private struct Group: Sendable {
        let family: MetricFamily
        var lines: [String] = []
        var seen: Set<String> = []
    }

    private var groups: [Group] = []
    private var index: [String: Int] = [:]

    public init() {}

    /// An exposition whose families are written in `order` (then any others, as first added); a family
    /// with no sample is not written at all.
    public init(order: [MetricFamily]) {
        for family in order where index[family.name] == nil {
            index[family.name] = groups.count
            groups.append(Group(family: family))
        }
    }

    /// Adds a sample of `family` with `labels` (written in this order).
    public mutating func add(_ family: MetricFamily, _ labels: [Label] = [], _ value: MetricValue) {
        let position: Int
        if let i = index[family.name] {
            precondition(groups[i].family == family, "two families named \(family.name)")
            position = i
        } else {
            position = groups.count
            index[family.name] = position
            groups.append(Group(family: family))
        }
        let labelText = Self.labelSet(labels)
        guard groups[position].seen.insert(labelText).inserted else { return }
        groups[position].lines.append(family.name + labelText + " " + value.text)
    }

    /// The families that have samples, in the order they are written.
    public var families: [MetricFamily] { groups.filter { !$0.lines.isEmpty }.map(\.family) }

    /// The text, ending in a newline (empty when nothing was added).
    public func render() -> String {
        var out = ""
        for group in groups where !group.lines.isEmpty {
            out += "# HELP \(group.family.name) \(Self.escapeHelp(group.family.help))\n"
            out += "# TYPE \(group.family.name) \(group.family.type.rawValue)\n"
            for line in group.lines { out += line + "\n" }
        }
        return out
    }

    /// `{a="x",b="y"}`, or nothing without labels.
    static func labelSet(_ labels: [Label]) -> String {
        guard !labels.isEmpty else { return "" }
        return "{" + labels.map { label in
            precondition(isValidLabelName(label.name), "invalid label name \(label.name)")
            return "\(label.name)=\"\(escapeLabelValue(label.value))\""
        }.joined(separator: ",") + "}"
    }

    /// A label value as the format quotes it: backslash, double quote and line feed escaped.
    public static func escapeLabelValue(_ value: String) -> String {
        var out = ""
        out.unicodeScalars.reserveCapacity(value.unicodeScalars.count)
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// HELP text as the format writes it: backslash and line feed escaped (a double quote is not).
    public static func escapeHelp(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`.
    public static func isValidMetricName(_ name: String) -> Bool {
        isName(name, extra: ":")
    }

    /// `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__` (reserved for Prometheus's own labels).
    public static func isValidLabelName(_ name: String) -> Bool {
        isName(name, extra: nil) && !name.hasPrefix("__")
    }

    private static func isName(_ name: String, extra: Unicode.Scalar?) -> Bool {
        guard let first = name.unicodeScalars.first else { return false }
        func letter(_ c: Unicode.Scalar) -> Bool { ("a"..."z").contains(c) || ("A"..."Z").contains(c) || c == "_" || c == extra }
        guard letter(first) else { return false }
        return name.unicodeScalars.allSatisfy { letter($0) || ("0"..."9").contains($0) }
    }
}
