import Foundation

/// A property-list value: what NETunnelProviderProtocol.providerConfiguration may hold on iOS (a
/// plist dictionary), kept with its type through the preferences file and the host's handoff.
///
/// Written as JSON with each value tagged by its type, so that nothing JSON cannot say is lost (a
/// Data, a Date, a real that happens to be whole, a Bool that is not a number):
///
///     {"string": "…"}  {"integer": 42}  {"integer": "-9223372036854775808"}  {"unsigned": "18446744073709551615"}  {"real": "0.1"}
///     {"bool": true}  {"data": "BASE64"}  {"date": "SECONDS SINCE 2001-01-01"}
///     {"array": [TAGGED, …]}  {"dictionary": {"KEY": TAGGED, …}}
///
/// Reals and dates are written as the shortest decimal text that reads back to the same Double
/// (so also nan, inf, -0.0), integers as JSON numbers up to ±2^53 and as text beyond.
enum PropertyListValue: Equatable {
    case string(String)
    case integer(Int64)
    /// An unsigned integer above Int64.max (binary plists hold them; NSNumber(value: UInt64)).
    case unsigned(UInt64)
    case real(Double)
    case bool(Bool)
    case data(Data)
    case date(Date)
    case array([PropertyListValue])
    case dictionary([String: PropertyListValue])

    struct Failure: Error, CustomStringConvertible {
        let keyPath: String
        let problem: String
        var description: String { "\(keyPath): \(problem)" }
    }

    // MARK: From and to Swift values

    /// A value as iOS code puts it in a `[String: Any]`: Swift's String, Bool, integers, Double, Float,
    /// Data, Date, arrays and String-keyed dictionaries, or their Foundation classes (NSString,
    /// NSNumber, NSData, NSDate, NSArray, NSDictionary). Anything else (a URL, NSNull, a custom type,
    /// a dictionary with other keys) fails, naming `keyPath`.
    init(_ value: Any, keyPath: String) throws(Failure) {
        func fail(_ what: String) -> Failure { Failure(keyPath: keyPath, problem: what) }
        let type = Swift.type(of: value)
        // Swift's own types first, by their exact type: `as?` would bridge between them (1 as? Bool).
        if type == Bool.self { self = .bool(value as! Bool); return }
        if type == String.self { self = .string(value as! String); return }
        if type == Double.self { self = .real(value as! Double); return }
        if type == Float.self { self = .real(Double(value as! Float)); return }
        if type == Data.self { self = .data(value as! Data); return }
        if type == Date.self { self = .date(value as! Date); return }
        if type is any FixedWidthInteger.Type, let i = value as? any FixedWidthInteger {
            if let n = Int64(exactly: i) { self = .integer(n) } else { self = .unsigned(UInt64(i)) }
            return
        }
        if let n = value as? NSNumber {
            switch String(cString: n.objCType) {
            case "c", "B": self = .bool(n.boolValue)
            case "f", "d": self = .real(n.doubleValue)
            case "Q", "L", "I", "S", "C":
                let u = n.uint64Value
                if let s = Int64(exactly: u) { self = .integer(s) } else { self = .unsigned(u) }
            default: self = .integer(n.int64Value)
            }
            return
        }
        if let s = value as? NSString { self = .string(s as String); return }
        if let d = value as? NSData { self = .data(d as Data); return }
        if let d = value as? NSDate { self = .date(d as Date); return }
        if let dict = value as? [String: Any] {
            var out: [String: PropertyListValue] = [:]
            for (k, v) in dict { out[k] = try PropertyListValue(v, keyPath: keyPath + "." + k) }
            self = .dictionary(out)
            return
        }
        if value is [AnyHashable: Any] || value is NSDictionary {
            throw fail("a dictionary whose keys are not all strings (a property list's keys are strings)")
        }
        if let array = value as? [Any] {
            var out: [PropertyListValue] = []
            for (i, v) in array.enumerated() { out.append(try PropertyListValue(v, keyPath: "\(keyPath)[\(i)]")) }
            self = .array(out)
            return
        }
        throw fail("a \(type) is not a property-list value (string, number, boolean, data, date, array, dictionary)")
    }

    /// The value as iOS hands a decoded property list to Swift: strings as String, numbers and booleans
    /// as NSNumber (so `as? Int`, `as? Double`, `as? Bool` behave as they do with iOS's NSNumber),
    /// Data, Date, [Any], [String: Any].
    var any: Any {
        switch self {
        case .string(let s): s
        case .integer(let n): NSNumber(value: n)
        case .unsigned(let n): NSNumber(value: n)
        case .real(let d): NSNumber(value: d)
        case .bool(let b): NSNumber(value: b)
        case .data(let d): d
        case .date(let d): d
        case .array(let a): a.map(\.any)
        case .dictionary(let d): d.mapValues(\.any)
        }
    }

    // MARK: Tagged JSON

    var tagged: Any {
        switch self {
        case .string(let s): ["string": s]
        // Beyond ±2^53 JSON readers may go through a Double: such integers are written as text.
        case .integer(let n): ["integer": n.magnitude <= 1 << 53 ? NSNumber(value: n) : String(n) as Any]
        case .unsigned(let n): ["unsigned": String(n)]
        case .real(let d): ["real": d.description]
        case .bool(let b): ["bool": b]
        case .data(let d): ["data": d.base64EncodedString()]
        case .date(let d): ["date": d.timeIntervalSinceReferenceDate.description]
        case .array(let a): ["array": a.map(\.tagged)]
        case .dictionary(let d): ["dictionary": d.mapValues(\.tagged)]
        }
    }

    init(tagged object: Any, keyPath: String) throws(Failure) {
        func fail(_ what: String) -> Failure { Failure(keyPath: keyPath, problem: what) }
        guard let o = object as? [String: Any], o.count == 1, let (tag, v) = o.first else {
            throw fail("not a tagged property-list value ({\"TYPE\": VALUE})")
        }
        switch tag {
        case "string":
            guard let s = v as? String else { throw fail("a string value that is not a string") }
            self = .string(s)
        case "integer":
            if let text = v as? String, let n = Int64(text) { self = .integer(n); return }
            guard let n = v as? NSNumber, !["c", "B"].contains(String(cString: n.objCType)) else {
                throw fail("an integer value that is not an integer")
            }
            if ["f", "d"].contains(String(cString: n.objCType)) {
                guard let exact = Int64(exactly: n.doubleValue), exact.magnitude <= 1 << 53 else {
                    throw fail("an integer value that is not an integer")
                }
                self = .integer(exact)
            } else {
                self = .integer(n.int64Value)
            }
        case "unsigned":
            guard let s = v as? String, let n = UInt64(s) else { throw fail("an unsigned value that is not one") }
            self = .unsigned(n)
        case "real":
            guard let s = v as? String, let d = Double(s) else { throw fail("a real value that is not a number") }
            self = .real(d)
        case "bool":
            guard let n = v as? NSNumber, ["c", "B"].contains(String(cString: n.objCType)) else {
                throw fail("a bool value that is not true or false")
            }
            self = .bool(n.boolValue)
        case "data":
            guard let s = v as? String, let d = Data(base64Encoded: s) else { throw fail("a data value that is not base64") }
            self = .data(d)
        case "date":
            guard let s = v as? String, let t = Double(s) else { throw fail("a date value that is not seconds since 2001") }
            self = .date(Date(timeIntervalSinceReferenceDate: t))
        case "array":
            guard let a = v as? [Any] else { throw fail("an array value that is not an array") }
            var out: [PropertyListValue] = []
            for (i, e) in a.enumerated() { out.append(try PropertyListValue(tagged: e, keyPath: "\(keyPath)[\(i)]")) }
            self = .array(out)
        case "dictionary":
            guard let d = v as? [String: Any] else { throw fail("a dictionary value that is not an object") }
            var out: [String: PropertyListValue] = [:]
            for (k, e) in d { out[k] = try PropertyListValue(tagged: e, keyPath: keyPath + "." + k) }
            self = .dictionary(out)
        default:
            throw fail("'\(tag)' is not a property-list type")
        }
    }

    static func == (a: PropertyListValue, b: PropertyListValue) -> Bool {
        switch (a, b) {
        case (.string(let x), .string(let y)): x == y
        case (.integer(let x), .integer(let y)): x == y
        case (.unsigned(let x), .unsigned(let y)): x == y
        // Bit for bit: nan equals nan, 0.0 does not equal -0.0.
        case (.real(let x), .real(let y)): x.bitPattern == y.bitPattern
        case (.bool(let x), .bool(let y)): x == y
        case (.data(let x), .data(let y)): x == y
        case (.date(let x), .date(let y)): x.timeIntervalSinceReferenceDate.bitPattern == y.timeIntervalSinceReferenceDate.bitPattern
        case (.array(let x), .array(let y)): x == y
        case (.dictionary(let x), .dictionary(let y)): x == y
        default: false
        }
    }
}
