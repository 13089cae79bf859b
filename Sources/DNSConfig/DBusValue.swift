/// One value of the D-Bus type system, as a method call's argument or a
/// reply's result. Each case stands for one type code of the D-Bus
/// specification ("Type System"); `signature` is that code.
///
/// `ay` (an array of bytes) is always `.bytes`, never `.array("y", …)`, so
/// that a value read back from a message compares equal to the one sent.
public indirect enum DBusValue: Hashable, Sendable {
    /// `y`
    case byte(UInt8)
    /// `b` (four bytes on the wire; only 0 and 1 are valid)
    case boolean(Bool)
    /// `n`
    case int16(Int16)
    /// `q`
    case uint16(UInt16)
    /// `i`
    case int32(Int32)
    /// `u`
    case uint32(UInt32)
    /// `x`
    case int64(Int64)
    /// `t`
    case uint64(UInt64)
    /// `d`
    case double(Double)
    /// `s`: UTF-8 without NUL.
    case string(String)
    /// `o`: an object path, `/` or `/a/b_c`.
    case objectPath(String)
    /// `g`: a type signature.
    case signature(String)
    /// `ay`
    case bytes([UInt8])
    /// `aT`: every element has the signature `element` (given, so that an empty array has a type).
    case array(element: String, [DBusValue])
    /// `(…)`
    case structure([DBusValue])
    /// `{KV}`: only as the element of an array (a dictionary).
    case dictionaryEntry(DBusValue, DBusValue)
    /// `v`: a value that carries its own signature.
    case variant(DBusValue)

    /// The value's D-Bus type signature: "i", "a(iay)", "a{sv}" …
    public var signature: String {
        switch self {
        case .byte: "y"
        case .boolean: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .bytes: "ay"
        case .array(let element, _): "a" + element
        case .structure(let fields): "(" + fields.map(\.signature).joined() + ")"
        case .dictionaryEntry(let key, let value): "{" + key.signature + value.signature + "}"
        case .variant: "v"
        }
    }

    /// The signature of several values one after the other (a message body).
    public static func signature(of values: [DBusValue]) -> String {
        values.map(\.signature).joined()
    }

    /// The problem with this value, if any, that would make a message
    /// carrying it invalid: an array element whose signature is not the
    /// array's, an empty structure, a dictionary entry outside an array or
    /// with a key that is not a basic type, a string with a NUL.
    public var problem: String? {
        switch self {
        case .string(let text), .objectPath(let text), .signature(let text):
            return text.utf8.contains(0) ? "\(signature) value contains a NUL byte" : nil
        case .array(let element, let elements):
            if element.isEmpty { return "array without an element signature" }
            if element == "y" { return "an array of bytes is .bytes" }
            for value in elements {
                if case .dictionaryEntry(let key, let item) = value {
                    if !key.isBasic { return "dictionary key \(key.signature) is not a basic type" }
                    if let problem = key.problem ?? item.problem { return problem }
                } else if let problem = value.problem {
                    return problem
                }
                if value.signature != element {
                    return "array element \(value.signature) in an array of \(element)"
                }
            }
            return nil
        case .structure(let fields):
            if fields.isEmpty { return "empty structure" }
            return fields.lazy.compactMap(\.problem).first
        case .dictionaryEntry:
            return "dictionary entry outside an array"
        case .variant(let inner):
            return inner.problem
        default:
            return nil
        }
    }

    /// Basic types: the only ones a dictionary key may have.
    var isBasic: Bool {
        switch self {
        case .byte, .boolean, .int16, .uint16, .int32, .uint32, .int64, .uint64, .double, .string, .objectPath, .signature:
            true
        case .bytes, .array, .structure, .dictionaryEntry, .variant:
            false
        }
    }
}

extension DBusValue: CustomStringConvertible {
    /// busctl's notation: `a(iay) 1 2 4 10 8 0 1` reads as `[(2, [10, 8, 0, 1])]` here.
    public var description: String {
        switch self {
        case .byte(let v): "\(v)"
        case .boolean(let v): "\(v)"
        case .int16(let v): "\(v)"
        case .uint16(let v): "\(v)"
        case .int32(let v): "\(v)"
        case .uint32(let v): "\(v)"
        case .int64(let v): "\(v)"
        case .uint64(let v): "\(v)"
        case .double(let v): "\(v)"
        case .string(let v), .objectPath(let v), .signature(let v): "\"\(v)\""
        case .bytes(let v): "[" + v.map(String.init).joined(separator: ", ") + "]"
        case .array(_, let v): "[" + v.map(\.description).joined(separator: ", ") + "]"
        case .structure(let v): "(" + v.map(\.description).joined(separator: ", ") + ")"
        case .dictionaryEntry(let k, let v): "\(k): \(v)"
        case .variant(let v): "<\(v.signature) \(v)>"
        }
    }
}
