/// OSLogMessage: what `Logger`'s methods and `os_log(_:)` take, written as a string literal with
/// interpolations: `"connected to \(server, privacy: .public)"`. Each interpolated value is kept
/// unevaluated (an autoclosure, as on iOS) and is evaluated only when the message is written.
public struct OSLogMessage: ExpressibleByStringInterpolation, ExpressibleByStringLiteral {
    public typealias StringInterpolation = OSLogInterpolation

    let interpolation: OSLogInterpolation

    public init(stringInterpolation: OSLogInterpolation) {
        interpolation = stringInterpolation
    }

    public init(stringLiteral value: String) {
        var i = OSLogInterpolation(literalCapacity: value.utf8.count, interpolationCount: 0)
        i.appendLiteral(value)
        interpolation = i
    }

    /// The message as written: literals as they are, each value as its privacy allows.
    func rendered() -> String {
        var out = ""
        for part in interpolation.parts {
            switch part {
            case .literal(let text): out += text
            case .value(let render): out += render()
            }
        }
        return out
    }
}

/// OSLogInterpolation: the interpolations Apple's os.log offers, with the same labels and defaults.
public struct OSLogInterpolation: StringInterpolationProtocol {
    enum Part {
        case literal(String)
        case value(() -> String)
    }

    var parts: [Part] = []

    public init(literalCapacity: Int, interpolationCount: Int) {
        parts.reserveCapacity(2 * interpolationCount + 1)
    }

    public mutating func appendLiteral(_ literal: String) {
        guard !literal.isEmpty else { return }
        parts.append(.literal(literal))
    }

    private mutating func append(_ privacy: OSLogPrivacy, isScalar: Bool, _ text: @escaping () -> String) {
        parts.append(.value { privacy.apply(text, isScalar: isScalar) })
    }

    // MARK: Strings and descriptions (private under .auto)

    public mutating func appendInterpolation(_ argumentString: @autoclosure @escaping () -> String,
                                             align: OSLogStringAlignment = .none, privacy: OSLogPrivacy = .auto) {
        append(privacy, isScalar: false) { align.pad(argumentString()) }
    }

    public mutating func appendInterpolation<T: CustomStringConvertible>(_ value: @autoclosure @escaping () -> T,
                                                                          align: OSLogStringAlignment = .none,
                                                                          privacy: OSLogPrivacy = .auto) {
        append(privacy, isScalar: false) { align.pad(value().description) }
    }

    /// An error (`logger.error("failed: \(error)")`, as Apple's overlay has it): its description,
    /// private under .auto like any other description.
    public mutating func appendInterpolation(_ error: @autoclosure @escaping () -> any Error, privacy: OSLogPrivacy = .auto,
                                             attributes: String = "") {
        append(privacy, isScalar: false) { String(describing: error()) }
    }

    /// Raw bytes (`format: .none`, the only pointer format offered here): their hex digits, private
    /// under .auto (the bytes may hold anything).
    public mutating func appendInterpolation(_ pointer: @autoclosure @escaping () -> UnsafeRawBufferPointer,
                                             format: OSLogPointerFormat = .none, privacy: OSLogPrivacy = .auto) {
        append(privacy, isScalar: false) { OSLogPointerFormat.hex(pointer()) }
    }

    public mutating func appendInterpolation(_ pointer: @autoclosure @escaping () -> UnsafeRawPointer, bytes: @autoclosure @escaping () -> Int,
                                             format: OSLogPointerFormat = .none, privacy: OSLogPrivacy = .auto) {
        append(privacy, isScalar: false) { OSLogPointerFormat.hex(UnsafeRawBufferPointer(start: pointer(), count: max(0, bytes()))) }
    }

    /// A type, public under .auto.
    public mutating func appendInterpolation(_ value: @autoclosure @escaping () -> Any.Type,
                                             align: OSLogStringAlignment = .none, privacy: OSLogPrivacy = .auto) {
        append(privacy, isScalar: true) { align.pad(String(describing: value())) }
    }

    // MARK: Scalars (public under .auto)

    public mutating func appendInterpolation<T: FixedWidthInteger>(_ number: @autoclosure @escaping () -> T,
                                                                    format: OSLogIntegerFormatting = .decimal,
                                                                    align: OSLogIntegerAlignment = .none,
                                                                    privacy: OSLogPrivacy = .auto) {
        append(privacy, isScalar: true) { align.pad(format.format(number())) }
    }

    // The integer types one by one, as Apple's overlay has them: a concrete overload is chosen over the
    // generic CustomStringConvertible one above (a generic FixedWidthInteger one would not be).
    public mutating func appendInterpolation(_ number: @autoclosure @escaping () -> Int, format: OSLogIntegerFormatting = .decimal,
                                             align: OSLogIntegerAlignment = .none, privacy: OSLogPrivacy = .auto) {
        append(privacy, isScalar: true) { align.pad(format.format(number())) }
    }
    public mutating func appendInterpolation(_ number: @autoclosure @escaping () -> Int8, format: OSLogIntegerFormatting = .decimal,
                                             align: OSLogIntegerAlignment = .none, privacy: OSLogPrivacy = .auto) {
        append(privacy, isScalar: true) { align.pad(format.format(number())) }
    }
    public mutating func appendInterpolation(_ number: @autoclosure @escaping () -> Int16, format: OSLogIntegerFormatting = .decimal,
                                             align: OSLogIntegerAlignment = .none, privacy: OSLogPrivacy = .auto) {
        append(privacy, isScalar: true) { align.pad(format.format(number())) }
    }
    public mutating func appendInterpolation(_ number: @autoclosure @escaping () -> Int32, format: OSLogIntegerFormatting = .decimal,
                                             align: OSLogIntegerAlignment = .none, privacy: OSLogPrivacy = .auto) {
        append(privacy, isScalar: true) { align.pad(format.format(number())) }
    }
    public mutating func appendInterpolation(_ number: @autoclosure @escaping () -> Int64, format: OSLogIntegerFormatting = .decimal,
                                             align: OSLogIntegerAlignment = .none, privacy: OSLogPrivacy = .auto) {
        append(privacy, isScalar: true) { align.pad(format.format(number())) }
    }
    public mutating func appendInterpolation(_ number: @autoclosure @escaping () -> UInt, format: OSLogIntegerFormatting = .decimal,
                                             align: OSLogIntegerAlignment = .none, privacy: OSLogPrivacy = .auto) {
        append(privacy, isScalar: true) { align.pad(format.format(number())) }
    }
    public mutating func appendInterpolation(_ number: @autoclosure @escaping () -> UInt8, format: OSLogIntegerFormatting = .decimal,
                                             align: OSLogIntegerAlignment = .none, privacy: OSLogPrivacy = .auto) {
        append(privacy, isScalar: true) { align.pad(format.format(number())) }
    }
    public mutating func appendInterpolation(_ number: @autoclosure @escaping () -> UInt16, format: OSLogIntegerFormatting = .decimal,
                                             align: OSLogIntegerAlignment = .none, privacy: OSLogPrivacy = .auto) {
        append(privacy, isScalar: true) { align.pad(format.format(number())) }
    }
    public mutating func appendInterpolation(_ number: @autoclosure @escaping () -> UInt32, format: OSLogIntegerFormatting = .decimal,
                                             align: OSLogIntegerAlignment = .none, privacy: OSLogPrivacy = .auto) {
        append(privacy, isScalar: true) { align.pad(format.format(number())) }
    }
    public mutating func appendInterpolation(_ number: @autoclosure @escaping () -> UInt64, format: OSLogIntegerFormatting = .decimal,
                                             align: OSLogIntegerAlignment = .none, privacy: OSLogPrivacy = .auto) {
        append(privacy, isScalar: true) { align.pad(format.format(number())) }
    }

    public mutating func appendInterpolation(_ number: @autoclosure @escaping () -> Double,
                                             format: OSLogFloatFormatting = .fixed,
                                             align: OSLogStringAlignment = .none, privacy: OSLogPrivacy = .auto) {
        append(privacy, isScalar: true) { align.pad(format.format(number())) }
    }

    public mutating func appendInterpolation(_ number: @autoclosure @escaping () -> Float,
                                             format: OSLogFloatFormatting = .fixed,
                                             align: OSLogStringAlignment = .none, privacy: OSLogPrivacy = .auto) {
        append(privacy, isScalar: true) { align.pad(format.format(Double(number()))) }
    }

    public mutating func appendInterpolation(_ boolean: @autoclosure @escaping () -> Bool,
                                             format: OSLogBoolFormat = .truth, privacy: OSLogPrivacy = .auto) {
        append(privacy, isScalar: true) {
            switch format {
            case .truth: boolean() ? "true" : "false"
            case .answer: boolean() ? "YES" : "NO"
            }
        }
    }
}

/// OSLogPointerFormat: how pointed-to bytes are written. Only `.none` (hex digits) is offered on Linux;
/// Apple's decoders of addresses, times and UUIDs are not.
public struct OSLogPointerFormat: Equatable, Sendable {
    let kind: Int
    public static var none: OSLogPointerFormat { OSLogPointerFormat(kind: 0) }

    static func hex(_ bytes: UnsafeRawBufferPointer) -> String {
        let digits = Array("0123456789abcdef")
        var out = ""
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return out
    }
}
