import TunnelgateSettings

extension JSONValue {
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
