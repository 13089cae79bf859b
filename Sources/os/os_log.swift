import LinuxSystem

/// os_log(3) with a printf-style format, as Apple's Swift overlay declares it:
///
///     os_log("connected to %{public}@ in %d ms", log: log, type: .info, server, elapsed)
///
/// Conversions: `d i u o x X c s @ f F e E g G a A p %`, with flags, width, precision (also `*`) and
/// length modifiers (`hh h l ll q j z t L`) as printf has them. Privacy as on iOS: `%@` and `%s` are
/// `<private>` unless written `%{public}@`; numbers are shown unless written `%{private}d`; also
/// `%{sensitive}`, `%{private, mask.hash}`, `%{bool}d` (true/false), `%{BOOL}d` (YES/NO) and
/// `%{errno}d` (`[2: No such file or directory]`); other `{…}` annotations are accepted and ignored.
/// A conversion whose argument is missing writes `<missing>`; one whose argument has another type
/// writes the argument's description (redacted unless public).
public func os_log(_ message: StaticString, dso: UnsafeRawPointer? = #dsohandle, log: OSLog = .default,
                   type: OSLogType = .default, _ args: CVarArg...) {
    guard log.isEnabled(type: type) else { return }
    OSLogOutput.write(type, log: log, OSLogFormat.render(message.description, args))
}

/// os_log(_:dso:log:_:_:), the level first.
public func os_log(_ type: OSLogType, dso: UnsafeRawPointer? = #dsohandle, log: OSLog = .default,
                   _ message: StaticString, _ args: CVarArg...) {
    guard log.isEnabled(type: type) else { return }
    OSLogOutput.write(type, log: log, OSLogFormat.render(message.description, args))
}

/// os_log with an interpolated message (iOS 14): `os_log("x \(value, privacy: .public)")`.
public func os_log(_ message: OSLogMessage) {
    guard OSLog.default.isEnabled(type: .default) else { return }
    OSLogOutput.write(.default, log: .default, message.rendered())
}

public func os_log(_ logLevel: OSLogType, log: OSLog = .default, _ message: OSLogMessage) {
    guard log.isEnabled(type: logLevel) else { return }
    OSLogOutput.write(logLevel, log: log, message.rendered())
}

/// The printf-style formats of os_log.
enum OSLogFormat {
    struct Specification {
        var privacy: OSLogPrivacy?
        var annotation: Set<String> = []
        var leftAlign = false, plus = false, space = false, alternate = false, zero = false
        var width: Int?
        var precision: Int?
        var length = ""
        var conversion: Character = "d"
    }

    static func render(_ format: String, _ args: [CVarArg]) -> String {
        var out = ""
        var next = 0
        func take() -> CVarArg? {
            guard next < args.count else { return nil }
            defer { next += 1 }
            return args[next]
        }
        var chars = Array(format)[...]
        while let c = chars.popFirst() {
            guard c == "%" else { out.append(c); continue }
            if chars.first == "%" { chars.removeFirst(); out.append("%"); continue }
            let start = chars
            guard var spec = parse(&chars) else {
                // Not a conversion: written as it is.
                out.append("%")
                chars = start
                continue
            }
            if spec.width == -1 {
                spec.width = take().flatMap(integer).map { Int(truncatingIfNeeded: $0) }
                if let w = spec.width, w < 0 { spec.leftAlign = true; spec.width = -w }
            }
            if spec.precision == -1 {
                spec.precision = take().flatMap(integer).map { Int(truncatingIfNeeded: $0) }
                if let p = spec.precision, p < 0 { spec.precision = nil }
            }
            guard let arg = take() else { out += "<missing>"; continue }
            out += convert(spec, arg)
        }
        return out
    }

    /// After a `%`: `{annotations}`, flags, width, precision, length and the conversion character.
    static func parse(_ chars: inout ArraySlice<Character>) -> Specification? {
        var spec = Specification()
        if chars.first == "{" {
            guard let close = chars.firstIndex(of: "}") else { return nil }
            let words = String(chars[chars.index(after: chars.startIndex)..<close])
                .split(separator: ",").map { $0.trimmingSpaces() }
            chars = chars[chars.index(after: close)...]
            let hashed = words.contains("mask.hash")
            for word in words {
                switch word {
                case "public": spec.privacy = .public
                case "private": spec.privacy = hashed ? .private(mask: .hash) : .private
                case "sensitive": spec.privacy = hashed ? .sensitive(mask: .hash) : .sensitive
                default: spec.annotation.insert(word)
                }
            }
            if hashed, spec.privacy == nil { spec.privacy = .auto(mask: .hash) }
        }
        while let c = chars.first, "-+ #0".contains(c) {
            switch c {
            case "-": spec.leftAlign = true
            case "+": spec.plus = true
            case " ": spec.space = true
            case "#": spec.alternate = true
            default: spec.zero = true
            }
            chars.removeFirst()
        }
        if chars.first == "*" { chars.removeFirst(); spec.width = -1 } else { spec.width = number(&chars) }
        if chars.first == "." {
            chars.removeFirst()
            if chars.first == "*" { chars.removeFirst(); spec.precision = -1 } else { spec.precision = number(&chars) ?? 0 }
        }
        while let c = chars.first, "hlqjztL".contains(c) { spec.length.append(c); chars.removeFirst() }
        guard let c = chars.popFirst(), "diuoxXcs@fFeEgGaAp".contains(c) else { return nil }
        spec.conversion = c
        return spec
    }

    static func number(_ chars: inout ArraySlice<Character>) -> Int? {
        var value: Int?
        while let c = chars.first, let d = c.wholeNumberValue, c.isASCII {
            value = min((value ?? 0) * 10 + d, 4096)
            chars.removeFirst()
        }
        return value
    }

    static func integer(_ arg: CVarArg) -> Int64? {
        if let b = arg as? Bool { return b ? 1 : 0 }
        if let i = arg as? any BinaryInteger { return Int64(truncatingIfNeeded: i) }
        return nil
    }

    static func convert(_ spec: Specification, _ arg: CVarArg) -> String {
        let c = spec.conversion
        switch c {
        case "d", "i", "u", "o", "x", "X", "c":
            guard let raw = integer(arg) else { return mismatch(spec, arg) }
            if spec.annotation.contains("bool") { return apply(spec, true) { raw != 0 ? "true" : "false" } }
            if spec.annotation.contains("BOOL") { return apply(spec, true) { raw != 0 ? "YES" : "NO" } }
            if spec.annotation.contains("errno") {
                return apply(spec, true) {
                    let code = Int32(truncatingIfNeeded: raw)
                    let text = Errno(rawValue: code).description  // "No such file or directory (2)"
                    let suffix = " (\(code))"
                    return "[\(code): \(text.hasSuffix(suffix) ? String(text.dropLast(suffix.count)) : text)]"
                }
            }
            return apply(spec, true) { pad(spec, formatInteger(spec, raw)) }
        case "f", "F", "e", "E", "g", "G", "a", "A":
            let value: Double
            if let d = arg as? Double { value = d } else if let f = arg as? Float { value = Double(f) }
            else if let i = arg as? any BinaryInteger { value = Double(Int64(truncatingIfNeeded: i)) }
            else { return mismatch(spec, arg) }
            var printf = "%"
            if spec.leftAlign { printf += "-" }
            if spec.plus { printf += "+" }
            if spec.space { printf += " " }
            if spec.alternate { printf += "#" }
            if spec.zero { printf += "0" }
            if let w = spec.width { printf += String(w) }
            if let p = spec.precision { printf += "." + String(p) }
            printf.append(c)
            return apply(spec, true) { CFormat.double(value, printf) ?? String(value) }
        case "s":
            let text: String
            if let s = (arg as Any) as? String { text = s }  // String is a CVarArg where Foundation is imported
            else if let p = arg as? UnsafePointer<CChar> { text = String(cString: p) }
            else if let p = arg as? UnsafeMutablePointer<CChar> { text = String(cString: p) }
            else if let p = arg as? UnsafePointer<UInt8> { text = String(cString: p) }
            else if let p = arg as? UnsafeMutablePointer<UInt8> { text = String(cString: p) }
            else { return mismatch(spec, arg) }
            return apply(spec, false) { pad(spec, spec.precision.map { String(text.prefix($0)) } ?? text) }
        case "@":
            return apply(spec, false) { pad(spec, String(describing: arg)) }
        case "p":
            let address: UInt64
            if let i = arg as? any BinaryInteger { address = UInt64(truncatingIfNeeded: i) }
            else if let p = arg as? OpaquePointer { address = UInt64(UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(p)))) }
            else if let p = (arg as Any) as? UnsafeRawPointer { address = UInt64(UInt(bitPattern: Int(bitPattern: p))) }
            else if let p = (arg as Any) as? UnsafeMutableRawPointer { address = UInt64(UInt(bitPattern: Int(bitPattern: p))) }
            else { return mismatch(spec, arg) }
            // Addresses are private under .auto (they locate memory, as iOS treats them).
            return apply(spec, false) { pad(spec, "0x" + String(address, radix: 16)) }
        default:
            return mismatch(spec, arg)
        }
    }

    static func apply(_ spec: Specification, _ isScalar: Bool, _ text: @escaping () -> String) -> String {
        (spec.privacy ?? .auto).apply(text, isScalar: isScalar)
    }

    /// An argument of another type than the conversion says: its description, private unless public.
    static func mismatch(_ spec: Specification, _ arg: CVarArg) -> String {
        apply(spec, false) { String(describing: arg) }
    }

    static func pad(_ spec: Specification, _ text: String) -> String {
        guard let width = spec.width, text.count < width else { return text }
        let fill = String(repeating: " ", count: width - text.count)
        return spec.leftAlign ? text + fill : fill + text
    }

    /// An integer as printf writes it: the length modifier's width and signedness, sign flags,
    /// precision as minimum digits, `#` prefixes and zero padding.
    static func formatInteger(_ spec: Specification, _ raw: Int64) -> String {
        let bits: Int
        switch spec.length {
        case "hh": bits = 8
        case "h": bits = 16
        case "": bits = 32
        default: bits = 64
        }
        let c = spec.conversion
        if c == "c" {
            // %c: an unsigned char; %lc: a wide character.
            let code = spec.length == "l" ? UInt32(truncatingIfNeeded: raw) : UInt32(UInt8(truncatingIfNeeded: raw))
            return Unicode.Scalar(code).map { String(Character($0)) } ?? "?"
        }
        let signed = c == "d" || c == "i"
        let mask: UInt64 = bits == 64 ? .max : (1 << UInt64(bits)) - 1
        var negative = false
        var magnitude: UInt64
        if signed {
            let shift = UInt64(64 - bits)
            let value = (raw << Int64(shift)) >> Int64(shift)  // sign-extended from `bits`
            negative = value < 0
            magnitude = value.magnitude
        } else {
            magnitude = UInt64(bitPattern: raw) & mask
        }
        var digits: String
        switch c {
        case "o": digits = String(magnitude, radix: 8)
        case "x": digits = String(magnitude, radix: 16)
        case "X": digits = String(magnitude, radix: 16, uppercase: true)
        default: digits = String(magnitude)
        }
        if let p = spec.precision {
            if p == 0 && magnitude == 0 { digits = "" }
            if digits.count < p { digits = String(repeating: "0", count: p - digits.count) + digits }
        }
        var prefix = ""
        if negative { prefix = "-" } else if signed && spec.plus { prefix = "+" } else if signed && spec.space { prefix = " " }
        if spec.alternate {
            if c == "o", !digits.hasPrefix("0") { digits = "0" + digits }
            if (c == "x" || c == "X"), magnitude != 0 { prefix += c == "x" ? "0x" : "0X" }
        }
        if spec.zero, !spec.leftAlign, spec.precision == nil, let width = spec.width, prefix.count + digits.count < width {
            digits = String(repeating: "0", count: width - prefix.count - digits.count) + digits
        }
        return prefix + digits
    }
}

extension Substring {
    func trimmingSpaces() -> String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}
