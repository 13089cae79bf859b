/// Logger (os.log, iOS 14): one value per subsystem and category; each call writes one line with its
/// level to standard error (`OSLogOutput`). Interpolated values follow their `privacy:` as on iOS:
/// strings and objects are `<private>` unless marked `.public`, numbers and booleans are shown.
///
///     let log = Logger(subsystem: "com.example.vpn", category: "tunnel")
///     log.info("connected to \(server, privacy: .public) as \(user)")
///     // [com.example.vpn:tunnel] info: connected to 198.18.0.10 as <private>
public struct Logger: Sendable {
    let log: OSLog

    public init(subsystem: String, category: String) {
        log = OSLog(subsystem: subsystem, category: category)
    }

    public init(_ log: OSLog) {
        self.log = log
    }

    /// The default log (no subsystem or category).
    public init() {
        log = .default
    }

    public func log(_ message: OSLogMessage) { write(.default, message) }
    public func log(level: OSLogType, _ message: OSLogMessage) { write(level, message) }

    public func trace(_ message: OSLogMessage) { write(.debug, message) }
    public func debug(_ message: OSLogMessage) { write(.debug, message) }
    public func info(_ message: OSLogMessage) { write(.info, message) }
    public func notice(_ message: OSLogMessage) { write(.default, message) }
    public func warning(_ message: OSLogMessage) { write(.error, message) }
    public func error(_ message: OSLogMessage) { write(.error, message) }
    public func critical(_ message: OSLogMessage) { write(.fault, message) }
    public func fault(_ message: OSLogMessage) { write(.fault, message) }

    private func write(_ type: OSLogType, _ message: OSLogMessage) {
        // Arguments are evaluated only for a message that is written, as on iOS.
        guard log.isEnabled(type: type) else { return }
        OSLogOutput.write(type, log: log, message.rendered())
    }
}
