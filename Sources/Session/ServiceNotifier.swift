import LinuxSystem

/// The service manager's side of a tunnel (sd_notify(3)'s protocol, spoken here over
/// ServiceManagerSocket): READY=1 once the settings are applied and verified, STATUS= at every status
/// change, WATCHDOG=1 from the session's own loop, STOPPING=1 when a stop begins. Messages that cannot be
/// sent are logged once and never stop the tunnel.
public final class ServiceNotifier {
    /// The variables of the protocol; none of them reaches a process this one starts.
    public static let environmentNames = ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"]

    private let socket: ServiceManagerSocket
    /// How often WATCHDOG=1 is sent: half of WATCHDOG_USEC; nil without a watchdog (or one for another pid).
    public let watchdogInterval: Double?
    private var nextWatchdog: Double
    private var lastStatus: String?
    private var failed = false
    private let log: (String) -> Void

    /// The notifier $NOTIFY_SOCKET asks for, nil when it is unset or empty. Either way the variables are
    /// removed from the environment first, so that nothing started later (the packet plane, a detached
    /// `up`) gets them.
    public static func fromEnvironment(log: @escaping (String) -> Void) -> ServiceNotifier? {
        let values = environmentNames.map { ProcessControl.environmentValue($0) }
        for name in environmentNames { ProcessControl.removeEnvironmentValue(name) }
        guard let path = values[0], !path.isEmpty else { return nil }
        var interval: Double?
        if let text = values[1], let usec = UInt64(text), usec > 0,
           values[2].map({ Int32($0) == ProcessControl.id }) ?? true {
            interval = Double(usec) / 2e6
        }
        do { return try ServiceNotifier(socket: ServiceManagerSocket(path), watchdogInterval: interval, log: log) } catch {
            log("warning: not notifying the service manager: \(error)")
            return nil
        }
    }

    init(socket: ServiceManagerSocket, watchdogInterval: Double?, log: @escaping (String) -> Void) {
        self.socket = socket
        self.watchdogInterval = watchdogInterval
        self.log = log
        nextWatchdog = ProcessControl.monotonicSeconds() + (watchdogInterval ?? 0)
    }

    /// READY=1 with the status line: the settings are applied and verified.
    public func ready(status text: String) {
        let line = Self.oneLine(text)
        lastStatus = line
        send("READY=1\nSTATUS=\(line)")
    }

    /// STATUS=line, when it differs from the last one sent.
    public func status(_ text: String) {
        let line = Self.oneLine(text)
        guard line != lastStatus else { return }
        lastStatus = line
        send("STATUS=\(line)")
    }

    /// STOPPING=1 (and the status line): a stop has begun.
    public func stopping(status text: String) {
        let line = Self.oneLine(text)
        lastStatus = line
        send("STOPPING=1\nSTATUS=\(line)")
    }

    /// Seconds until the next WATCHDOG=1 is due (at most a poll's wait), nil without a watchdog.
    public func secondsUntilWatchdog(now: Double) -> Double? {
        watchdogInterval.map { _ in max(0, nextWatchdog - now) }
    }

    /// WATCHDOG=1 when it is due. Called from the session's loop only: a loop that hangs sends none.
    public func watchdogIfDue(now: Double) {
        guard let watchdogInterval, now >= nextWatchdog else { return }
        nextWatchdog = now + watchdogInterval
        send("WATCHDOG=1")
    }

    /// A status on one line: a newline would start another assignment of the message.
    static func oneLine(_ text: String) -> String {
        String(text.map { $0.isNewline ? " " : $0 })
    }

    private func send(_ text: String) {
        do throws(SystemCallError) { try socket.send(Array(text.utf8)) } catch {
            if !failed { log("warning: notifying the service manager failed: \(error)") }
            failed = true
            return
        }
        failed = false
    }
}
