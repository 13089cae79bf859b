@_exported import os  // the Clang module of the same name (Sources/COSLog): gives `import os.log` its submodule

/// OSLogType: a message's level, with Apple's raw values (OS_LOG_TYPE_*).
public struct OSLogType: RawRepresentable, Hashable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(_ rawValue: UInt8) { self.rawValue = rawValue }

    /// OS_LOG_TYPE_DEFAULT (`Logger.notice`, `Logger.log`): written as `notice`.
    public static let `default` = OSLogType(rawValue: 0x00)
    /// OS_LOG_TYPE_INFO.
    public static let info = OSLogType(rawValue: 0x01)
    /// OS_LOG_TYPE_DEBUG: written only with `OS_ACTIVITY_MODE=debug` (docs/networkextension.md, Logging).
    public static let debug = OSLogType(rawValue: 0x02)
    /// OS_LOG_TYPE_ERROR (`Logger.error`, `Logger.warning`).
    public static let error = OSLogType(rawValue: 0x10)
    /// OS_LOG_TYPE_FAULT (`Logger.fault`, `Logger.critical`).
    public static let fault = OSLogType(rawValue: 0x11)

    /// The word a line carries for this level.
    var name: String {
        switch self {
        case .debug: "debug"
        case .info: "info"
        case .error: "error"
        case .fault: "fault"
        case .default: "notice"
        default: "level \(rawValue)"
        }
    }
}
