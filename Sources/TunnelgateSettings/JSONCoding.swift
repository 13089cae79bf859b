/// Codable to and from JSON without Foundation: what the engine–plane channel speaks, so that the
/// packet plane (docs/architecture.md) links no Foundation at all. The encoder builds a `JSONValue`
/// and writes it compactly; the decoder reads what `JSONParser` parsed (strict RFC 8259). Integers
/// keep every digit: they travel as their decimal literal, never through a Double.
public enum JSONCoding {
    /// The compact JSON of `value` (object keys in the order the value encodes them).
    public static func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        Array(try encodeValue(value).serialized().utf8)
    }

    /// `value` as a JSON document tree.
    public static func encodeValue<T: Encodable>(_ value: T) throws -> JSONValue {
        if let json = value as? JSONValue { return json }
        let node = EncodingNode()
        try value.encode(to: TreeEncoder(node: node, codingPath: []))
        guard let result = node.resolved() else {
            throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: "\(T.self) encoded nothing"))
        }
        return result
    }

    /// A `T` from JSON text.
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        let tree: JSONValue
        do { tree = try JSONParser.parse(bytes) } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "not JSON: \(error)"))
        }
        return try decode(type, from: tree)
    }

    /// A `T` from a parsed document.
    public static func decode<T: Decodable>(_ type: T.Type, from tree: JSONValue) throws -> T {
        try TreeDecoder(value: tree, codingPath: []).decodeValue(T.self)
    }
}

extension JSONValue {
    /// The value as JSON text, keys in the order they are held (so a prevResult comes back in the
    /// order it came), numbers as they were written. `indent` 0 puts everything on one line.
    public func serialized(indent: Int = 0) -> String {
        var out = ""
        write(to: &out, indent: indent, level: 0, colon: indent > 0 ? ": " : ":")
        return out
    }

    /// What `tunnelgate status --json` and `list --json` print, as they printed it when Foundation's
    /// JSONEncoder wrote it (`.prettyPrinted, .sortedKeys`): every object's keys sorted, two spaces of
    /// indent, `"key" : value`. Scripts that grep that shape keep working; slashes are not escaped.
    public func prettyPrintedSorted() -> String {
        var out = ""
        sortingKeys().write(to: &out, indent: 2, level: 0, colon: " : ")
        return out
    }

    /// The value with every object's members in ascending order of their keys.
    public func sortingKeys() -> JSONValue {
        switch self {
        case .array(let items): .array(items.map { $0.sortingKeys() })
        case .object(let members): .object(members.map { (key: $0.key, value: $0.value.sortingKeys()) }.sorted { $0.key < $1.key })
        default: self
        }
    }

    private func write(to out: inout String, indent: Int, level: Int, colon: String) {
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
                item.write(to: &out, indent: indent, level: level + 1, colon: colon)
                out += (i + 1 < items.count ? "," : "") + newline
            }
            out += pad(level) + "]"
        case .object(let members):
            if members.isEmpty { out += "{}"; return }
            out += "{" + newline
            for (i, m) in members.enumerated() {
                out += pad(level + 1) + JSONValue.quoted(m.key) + colon
                m.value.write(to: &out, indent: indent, level: level + 1, colon: colon)
                out += (i + 1 < members.count ? "," : "") + newline
            }
            out += pad(level) + "}"
        }
    }
}

// MARK: - Encoding

/// One container of the document being built: an object or an array, whichever the encodable asked
/// for first, or a single value. Primitives are held as values, never as nodes of their own, and
/// members and items are appended in place (a 60,000-byte `[UInt8]` is 60,000 appends, not copies).
private final class EncodingNode {
    enum Kind { case empty, value, object, array }
    enum Slot {
        case value(JSONValue)
        case node(EncodingNode)
        var resolved: JSONValue { switch self { case .value(let v): v; case .node(let n): n.resolved() ?? .object([]) } }
    }
    private(set) var kind = Kind.empty
    private var value = JSONValue.null
    private var members: [(key: String, slot: Slot)] = []
    /// Where each key is in `members`: a key encoded again replaces its value in place.
    private var memberIndex: [String: Int] = [:]
    private var items: [Slot] = []

    var count: Int { kind == .array ? items.count : 0 }

    func resolved() -> JSONValue? {
        switch kind {
        case .empty: nil
        case .value: value
        case .object: .object(members.map { ($0.key, $0.slot.resolved) })
        case .array: .array(items.map(\.resolved))
        }
    }

    func set(_ json: JSONValue) {
        kind = .value
        value = json
    }

    func becomeObject() {
        guard kind != .object else { return }
        kind = .object
        members = []
        memberIndex = [:]
    }

    func becomeArray() {
        guard kind != .array else { return }
        kind = .array
        items = []
    }

    func setMember(_ key: String, _ slot: Slot) {
        becomeObject()
        if let i = memberIndex[key] { members[i].slot = slot; return }
        memberIndex[key] = members.count
        members.append((key, slot))
    }

    func append(_ slot: Slot) {
        becomeArray()
        items.append(slot)
    }

    /// A new node as member `key` / as the next item.
    func memberNode(_ key: String) -> EncodingNode {
        let child = EncodingNode()
        setMember(key, .node(child))
        return child
    }

    func itemNode() -> EncodingNode {
        let child = EncodingNode()
        append(.node(child))
        return child
    }
}

private struct IndexKey: CodingKey {
    var intValue: Int?
    var stringValue: String
    init(_ index: Int) { intValue = index; stringValue = String(index) }
    init?(intValue: Int) { self.init(intValue) }
    init?(stringValue: String) { nil }
}

private struct SuperKey: CodingKey {
    var stringValue: String { "super" }
    var intValue: Int? { nil }
    init() {}
    init?(stringValue: String) { nil }
    init?(intValue: Int) { nil }
}

private struct TreeEncoder: Encoder {
    let node: EncodingNode
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        node.becomeObject()
        return KeyedEncodingContainer(KeyedTreeEncoder<Key>(node: node, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        node.becomeArray()
        return UnkeyedTreeEncoder(node: node, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleTreeEncoder(node: node, codingPath: codingPath)
    }
}

/// The JSON of a primitive, or nil when `value` is not one (then it encodes itself).
private func primitive<T: Encodable>(_ value: T, at path: [any CodingKey]) throws -> JSONValue? {
    switch value {
    case let v as JSONValue: return v
    case let v as Bool: return .bool(v)
    case let v as String: return .string(v)
    case let v as Double: return try number(v, at: path)
    case let v as Float: return try number(Double(v), at: path)
    case let v as any FixedWidthInteger: return .number(Double(v), literal: String(describing: v))
    default: return nil
    }
}

private func number(_ d: Double, at path: [any CodingKey]) throws -> JSONValue {
    guard d.isFinite else {
        throw EncodingError.invalidValue(d, .init(codingPath: path, debugDescription: "\(d) is not a JSON number"))
    }
    // Swift prints the shortest form that reads back as the same Double: valid JSON when finite.
    if d == d.rounded(), abs(d) < 1e15 { return .number(d, literal: String(Int64(d))) }
    return .number(d, literal: String(d))
}

/// `value` as one slot: a primitive's JSON, or a node it encoded itself into.
private func slot<T: Encodable>(_ value: T, at path: [any CodingKey]) throws -> EncodingNode.Slot {
    if let json = try primitive(value, at: path) { return .value(json) }
    let node = EncodingNode()
    try value.encode(to: TreeEncoder(node: node, codingPath: path))
    return .node(node)
}

private struct KeyedTreeEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: EncodingNode
    let codingPath: [any CodingKey]

    mutating func encodeNil(forKey key: Key) throws { node.setMember(key.stringValue, .value(.null)) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        node.setMember(key.stringValue, try slot(value, at: codingPath + [key]))
    }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type,
                                                       forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let child = node.memberNode(key.stringValue)
        child.becomeObject()
        return KeyedEncodingContainer(KeyedTreeEncoder<NestedKey>(node: child, codingPath: codingPath + [key]))
    }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let child = node.memberNode(key.stringValue)
        child.becomeArray()
        return UnkeyedTreeEncoder(node: child, codingPath: codingPath + [key])
    }
    mutating func superEncoder() -> any Encoder {
        TreeEncoder(node: node.memberNode("super"), codingPath: codingPath + [SuperKey()])
    }
    mutating func superEncoder(forKey key: Key) -> any Encoder {
        TreeEncoder(node: node.memberNode(key.stringValue), codingPath: codingPath + [key])
    }
}

private struct UnkeyedTreeEncoder: UnkeyedEncodingContainer {
    let node: EncodingNode
    let codingPath: [any CodingKey]
    var count: Int { node.count }

    mutating func encodeNil() throws { node.append(.value(.null)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        node.append(try slot(value, at: codingPath + [IndexKey(count)]))
    }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let path = codingPath + [IndexKey(count)]
        let child = node.itemNode()
        child.becomeObject()
        return KeyedEncodingContainer(KeyedTreeEncoder<NestedKey>(node: child, codingPath: path))
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let path = codingPath + [IndexKey(count)]
        let child = node.itemNode()
        child.becomeArray()
        return UnkeyedTreeEncoder(node: child, codingPath: path)
    }
    mutating func superEncoder() -> any Encoder {
        let path = codingPath + [IndexKey(count)]
        return TreeEncoder(node: node.itemNode(), codingPath: path)
    }
}

private struct SingleTreeEncoder: SingleValueEncodingContainer {
    let node: EncodingNode
    let codingPath: [any CodingKey]

    mutating func encodeNil() throws { node.set(.null) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        if let json = try primitive(value, at: codingPath) {
            node.set(json)
        } else {
            try value.encode(to: TreeEncoder(node: node, codingPath: codingPath))
        }
    }
}

// MARK: - Decoding

private struct TreeDecoder: Decoder {
    let value: JSONValue
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func mismatch<T>(_ type: T.Type, _ expected: String) -> DecodingError {
        .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "expected \(expected), found \(value.typeName)"))
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let members) = value else { throw mismatch([String: JSONValue].self, "an object") }
        return KeyedDecodingContainer(KeyedTreeDecoder<Key>(members: members, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let items) = value else { throw mismatch([JSONValue].self, "an array") }
        return UnkeyedTreeDecoder(items: items, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleTreeDecoder(decoder: self)
    }

    /// A `T` from this value: primitives read directly, everything else through `init(from:)`.
    func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        if T.self == JSONValue.self { return value as! T }
        if T.self == Bool.self {
            guard case .bool(let b) = value else { throw mismatch(T.self, "a boolean") }
            return b as! T
        }
        if T.self == String.self {
            guard case .string(let s) = value else { throw mismatch(T.self, "a string") }
            return s as! T
        }
        if T.self == Double.self { return try double() as! T }
        if T.self == Float.self {
            let d = try double()
            guard let f = Float(exactly: d) ?? (d.magnitude <= Double(Float.greatestFiniteMagnitude) ? Float(d) : nil) else {
                throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "\(d) does not fit a Float"))
            }
            return f as! T
        }
        if let integer = T.self as? any FixedWidthInteger.Type { return try self.integer(integer) as! T }
        return try T(from: self)
    }

    private func double() throws -> Double {
        guard case .number(let d, _) = value else { throw mismatch(Double.self, "a number") }
        return d
    }

    private func integer<I: FixedWidthInteger>(_ type: I.Type) throws -> I {
        guard case .number(let d, let literal) = value else { throw mismatch(I.self, "a number") }
        if let exact = I(literal) { return exact }
        // 1.0 or 1e3: an integer written another way; anything else is not an I.
        if let exact = I(exactly: d) { return exact }
        throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "\(literal) is not a \(I.self)"))
    }
}

private struct KeyedTreeDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let members: [(key: String, value: JSONValue)]
    let codingPath: [any CodingKey]

    var allKeys: [Key] { members.compactMap { Key(stringValue: $0.key) } }
    func contains(_ key: Key) -> Bool { members.contains { $0.key == key.stringValue } }

    private func child(_ key: Key) throws -> TreeDecoder {
        guard let member = members.first(where: { $0.key == key.stringValue }) else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no member \"\(key.stringValue)\""))
        }
        return TreeDecoder(value: member.value, codingPath: codingPath + [key])
    }

    func decodeNil(forKey key: Key) throws -> Bool { try child(key).value == .null }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try child(key).decodeValue(T.self) }
    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try child(key).container(keyedBy: type)
    }
    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try child(key).unkeyedContainer()
    }
    func superDecoder() throws -> any Decoder {
        TreeDecoder(value: members.first { $0.key == "super" }?.value ?? .null, codingPath: codingPath + [SuperKey()])
    }
    func superDecoder(forKey key: Key) throws -> any Decoder {
        TreeDecoder(value: members.first { $0.key == key.stringValue }?.value ?? .null, codingPath: codingPath + [key])
    }
}

private struct UnkeyedTreeDecoder: UnkeyedDecodingContainer {
    let items: [JSONValue]
    let codingPath: [any CodingKey]
    var currentIndex = 0

    init(items: [JSONValue], codingPath: [any CodingKey]) {
        self.items = items
        self.codingPath = codingPath
    }

    var count: Int? { items.count }
    var isAtEnd: Bool { currentIndex >= items.count }

    private mutating func next() throws -> TreeDecoder {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(JSONValue.self, .init(codingPath: codingPath + [IndexKey(currentIndex)],
                                                                    debugDescription: "the array has \(items.count) items"))
        }
        defer { currentIndex += 1 }
        return TreeDecoder(value: items[currentIndex], codingPath: codingPath + [IndexKey(currentIndex)])
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else { return false }
        if items[currentIndex] == .null { currentIndex += 1; return true }
        return false
    }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next().decodeValue(T.self) }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next().container(keyedBy: type)
    }
    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try next().unkeyedContainer() }
    mutating func superDecoder() throws -> any Decoder { try next() }
}

private struct SingleTreeDecoder: SingleValueDecodingContainer {
    let decoder: TreeDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }
    func decodeNil() -> Bool { decoder.value == .null }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.decodeValue(T.self) }
}
