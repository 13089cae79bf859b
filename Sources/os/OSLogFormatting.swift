import LinuxSystem

/// OSLogIntegerFormatting: how `\(n, format: …)` writes an integer.
public struct OSLogIntegerFormatting {
    enum Radix: Sendable { case decimal, hex, octal }
    let radix: Radix
    let explicitPositiveSign: Bool
    let includePrefix: Bool
    let uppercase: Bool
    let minDigits: () -> Int

    public static var decimal: OSLogIntegerFormatting { .decimal(explicitPositiveSign: false) }
    public static func decimal(explicitPositiveSign: Bool = false) -> OSLogIntegerFormatting {
        OSLogIntegerFormatting(radix: .decimal, explicitPositiveSign: explicitPositiveSign, includePrefix: false,
                               uppercase: false, minDigits: { 0 })
    }
    public static func decimal(explicitPositiveSign: Bool = false,
                               minDigits: @autoclosure @escaping () -> Int) -> OSLogIntegerFormatting {
        OSLogIntegerFormatting(radix: .decimal, explicitPositiveSign: explicitPositiveSign, includePrefix: false,
                               uppercase: false, minDigits: minDigits)
    }

    public static var hex: OSLogIntegerFormatting { .hex(explicitPositiveSign: false) }
    public static func hex(explicitPositiveSign: Bool = false, includePrefix: Bool = false,
                           uppercase: Bool = false) -> OSLogIntegerFormatting {
        OSLogIntegerFormatting(radix: .hex, explicitPositiveSign: explicitPositiveSign, includePrefix: includePrefix,
                               uppercase: uppercase, minDigits: { 0 })
    }
    public static func hex(explicitPositiveSign: Bool = false, includePrefix: Bool = false, uppercase: Bool = false,
                           minDigits: @autoclosure @escaping () -> Int) -> OSLogIntegerFormatting {
        OSLogIntegerFormatting(radix: .hex, explicitPositiveSign: explicitPositiveSign, includePrefix: includePrefix,
                               uppercase: uppercase, minDigits: minDigits)
    }

    public static var octal: OSLogIntegerFormatting { .octal(explicitPositiveSign: false) }
    public static func octal(explicitPositiveSign: Bool = false, includePrefix: Bool = false,
                             uppercase: Bool = false) -> OSLogIntegerFormatting {
        OSLogIntegerFormatting(radix: .octal, explicitPositiveSign: explicitPositiveSign, includePrefix: includePrefix,
                               uppercase: uppercase, minDigits: { 0 })
    }
    public static func octal(explicitPositiveSign: Bool = false, includePrefix: Bool = false, uppercase: Bool = false,
                             minDigits: @autoclosure @escaping () -> Int) -> OSLogIntegerFormatting {
        OSLogIntegerFormatting(radix: .octal, explicitPositiveSign: explicitPositiveSign, includePrefix: includePrefix,
                               uppercase: uppercase, minDigits: minDigits)
    }

    func format<T: BinaryInteger>(_ value: T) -> String {
        let negative = value < 0
        let magnitude = value.magnitude
        var digits: String
        switch radix {
        case .decimal: digits = String(magnitude)
        case .hex: digits = String(magnitude, radix: 16, uppercase: uppercase)
        case .octal: digits = String(magnitude, radix: 8)
        }
        let minimum = min(max(minDigits(), 0), 1024)
        if digits.count < minimum { digits = String(repeating: "0", count: minimum - digits.count) + digits }
        if includePrefix {
            switch radix {
            case .hex: digits = (uppercase ? "0X" : "0x") + digits
            case .octal where !digits.hasPrefix("0"): digits = "0" + digits
            default: break
            }
        }
        if negative { return "-" + digits }
        return explicitPositiveSign ? "+" + digits : digits
    }
}

/// OSLogFloatFormatting: how `\(x, format: …)` writes a floating-point number. The default, `.fixed`,
/// is printf's `%f` (six decimals), as on iOS.
public struct OSLogFloatFormatting {
    let conversion: Character
    let explicitPositiveSign: Bool
    let uppercase: Bool
    let precision: (() -> Int)?

    private static func make(_ c: Character, _ sign: Bool, _ upper: Bool, _ p: (() -> Int)?) -> OSLogFloatFormatting {
        OSLogFloatFormatting(conversion: c, explicitPositiveSign: sign, uppercase: upper, precision: p)
    }

    public static var fixed: OSLogFloatFormatting { make("f", false, false, nil) }
    public static func fixed(explicitPositiveSign: Bool = false, uppercase: Bool = false) -> OSLogFloatFormatting {
        make("f", explicitPositiveSign, uppercase, nil)
    }
    public static func fixed(precision: @autoclosure @escaping () -> Int, explicitPositiveSign: Bool = false,
                             uppercase: Bool = false) -> OSLogFloatFormatting {
        make("f", explicitPositiveSign, uppercase, precision)
    }
    public static var exponential: OSLogFloatFormatting { make("e", false, false, nil) }
    public static func exponential(explicitPositiveSign: Bool = false, uppercase: Bool = false) -> OSLogFloatFormatting {
        make("e", explicitPositiveSign, uppercase, nil)
    }
    public static func exponential(precision: @autoclosure @escaping () -> Int, explicitPositiveSign: Bool = false,
                                   uppercase: Bool = false) -> OSLogFloatFormatting {
        make("e", explicitPositiveSign, uppercase, precision)
    }
    public static var hybrid: OSLogFloatFormatting { make("g", false, false, nil) }
    public static func hybrid(explicitPositiveSign: Bool = false, uppercase: Bool = false) -> OSLogFloatFormatting {
        make("g", explicitPositiveSign, uppercase, nil)
    }
    public static func hybrid(precision: @autoclosure @escaping () -> Int, explicitPositiveSign: Bool = false,
                              uppercase: Bool = false) -> OSLogFloatFormatting {
        make("g", explicitPositiveSign, uppercase, precision)
    }
    public static var hex: OSLogFloatFormatting { make("a", false, false, nil) }
    public static func hex(explicitPositiveSign: Bool = false, uppercase: Bool = false) -> OSLogFloatFormatting {
        make("a", explicitPositiveSign, uppercase, nil)
    }

    func format(_ value: Double) -> String {
        var spec = "%"
        if explicitPositiveSign { spec += "+" }
        if let precision { spec += ".\(min(max(precision(), 0), 1024))" }
        spec += uppercase ? conversion.uppercased() : String(conversion)
        return CFormat.double(value, spec) ?? String(value)
    }
}

/// OSLogBoolFormat: `.truth` (true/false, the default) or `.answer` (YES/NO).
public enum OSLogBoolFormat: Sendable {
    case truth
    case answer
}

/// OSLogStringAlignment / OSLogIntegerAlignment: padding with spaces to a number of columns.
public struct OSLogStringAlignment {
    let columns: () -> Int
    let left: Bool

    public static var none: OSLogStringAlignment { OSLogStringAlignment(columns: { 0 }, left: false) }
    public static func right(columns: @autoclosure @escaping () -> Int) -> OSLogStringAlignment {
        OSLogStringAlignment(columns: columns, left: false)
    }
    public static func left(columns: @autoclosure @escaping () -> Int) -> OSLogStringAlignment {
        OSLogStringAlignment(columns: columns, left: true)
    }

    func pad(_ text: String) -> String {
        let width = min(max(columns(), 0), 1024)
        guard text.count < width else { return text }
        let padding = String(repeating: " ", count: width - text.count)
        return left ? text + padding : padding + text
    }
}

public typealias OSLogIntegerAlignment = OSLogStringAlignment
