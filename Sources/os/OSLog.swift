/// OSLog: a log handle naming a subsystem and a category, for `os_log(_:log:type:_:)` and
/// `Logger(_:)`. On Linux every message goes to the process's standard error, one line each
/// (`OSLogOutput`); a provider host's standard error is its tunnel's log.
public final class OSLog: Sendable {
    public let subsystem: String
    public let category: String
    /// `OSLog.disabled`: nothing is written.
    let isDisabled: Bool

    public init(subsystem: String, category: String) {
        self.subsystem = subsystem
        self.category = category
        isDisabled = false
    }

    /// As Apple's: a log whose category is one of the system's (the name is kept as the category).
    public convenience init(subsystem: String, category: OSLog.Category) {
        self.init(subsystem: subsystem, category: category.rawValue)
    }

    private init(disabled: Bool) {
        subsystem = ""
        category = ""
        isDisabled = disabled
    }

    /// The default log (no subsystem): OS_LOG_DEFAULT.
    public static let `default` = OSLog(disabled: false)
    /// OS_LOG_DISABLED: writes nothing.
    public static let disabled = OSLog(disabled: true)

    /// Whether a message of this level would be written (the level filter and `.disabled`).
    public func isEnabled(type: OSLogType) -> Bool {
        !isDisabled && OSLogOutput.writes(type)
    }

    public var signpostsEnabled: Bool { false }

    /// Apple's system categories; on Linux only names.
    public struct Category: RawRepresentable, Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public static let pointsOfInterest = Category(rawValue: "PointsOfInterest")
        public static let dynamicTracing = Category(rawValue: "DynamicTracing")
        public static let dynamicStackTracing = Category(rawValue: "DynamicStackTracing")
    }
}

/// os_log_type_enabled(3).
public func os_log_type_enabled(_ log: OSLog, _ type: OSLogType) -> Bool {
    log.isEnabled(type: type)
}
