import TunnelgateSettings

extension JSONValue {
    /// The value as JSON text, keys in the order they are held (so a prevResult comes back in the
    /// order it came), numbers as they were written. `indent` 0 puts everything on one line.
    public func serialized(indent: Int = 0) -> String {
        var out = ""
        write(to: &out, indent: indent, level: 0)
        return out
    }

    private func write(to out: inout String, indent: Int, level: Int) {
        let newline = indent > 0 ? "\n" : ""
        let pad = { (n: Int) in String(repeating: " ", count: indent * n) }
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(_, let literal): out += literal
        case .string(let s): out += JSONValue.quoted(s)
        case .array(let items):
            if items.isEmpty { out += "[]"; return }
            out += "[" + newline
            for (i, item) in items.enumerated() {
                out += pad(level + 1)
                item.write(to: &out, indent: indent, level: level + 1)
                out += (i + 1 < items.count ? "," : "") + newline
            }
            out += pad(level) + "]"
        case .object(let members):
            if members.isEmpty { out += "{}"; return }
            out += "{" + newline
            for (i, m) in members.enumerated() {
                out += pad(level + 1) + JSONValue.quoted(m.key) + (indent > 0 ? ": " : ":")
                m.value.write(to: &out, indent: indent, level: level + 1)
                out += (i + 1 < members.count ? "," : "") + newline
            }
            out += pad(level) + "}"
        }
    }

    /// The member `key` of an object; nil for anything else or a missing key.
    public subscript(member key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first(where: { $0.key == key })?.value
    }

    /// The string value, nil for anything else.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The object with member `key` set to `value`: replaced where it is, appended when new.
    public func setting(_ key: String, to value: JSONValue) -> JSONValue {
        guard case .object(var members) = self else { return self }
        if let i = members.firstIndex(where: { $0.key == key }) {
            members[i].value = value
        } else {
            members.append((key, value))
        }
        return .object(members)
    }

    /// A number written as an integer.
    public static func integer(_ value: Int) -> JSONValue { .number(Double(value), literal: String(value)) }
}
