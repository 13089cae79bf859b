import LinuxSystem
import TunnelgateSettings

/// How tunnelgate writes its log lines (everything that goes to standard error through printError):
/// `text`, as always, or `json`, one object per event and line for log shippers:
///
///     {"time":"2026-12-01T20:35:32.123456Z","level":"info","message":"tg0: connected (table 7460, …)"}
///
/// `level` is `error` for the line a failed command ends with (and a usage error, which carries
/// `usage` too), `warning` for a warning, `info` otherwise. A message of several lines stays one event.
/// `journal` is text with each line's syslog priority in front (`<3>` error, `<4>` warning, `<6>` info,
/// sd-daemon(3)'s prefixes), which journald strips and records as the entry's PRIORITY: it is chosen
/// by itself when standard error is the journal's stream (JOURNAL_STREAM names its device and inode, as
/// systemd sets it for a unit's output), so `journalctl -p err -u tunnelgate@NAME` finds the errors.
/// Chosen with `--log-format FORMAT` anywhere on the command line, or TUNNELGATE_LOG_FORMAT; the option
/// sets the variable, so a process tunnelgate starts (`up --detach`'s owner, whose standard error is
/// NAME.log) logs the same way. The journal's own detection is not passed on: a child's standard error
/// is another file. (In Session because tunnelgate-on-demand, which tunnelgate execs, logs the same way.)
public enum LogFormat: String, Sendable {
    case text, json, journal

    public static let variable = "TUNNELGATE_LOG_FORMAT"

    /// Set once, in `take`, before any thread starts; read by printError on any thread after that.
    nonisolated(unsafe) public static var current = LogFormat.text

    /// A `--log-format` or TUNNELGATE_LOG_FORMAT that names no format (the command line's usage error).
    public struct Unknown: Error {
        public let message: String
    }

    /// Takes `--log-format FORMAT` out of the arguments (or reads the variable) and sets `current`.
    public static func take(from arguments: inout [String]) throws(Unknown) {
        var chosen = ProcessControl.environmentValue(variable).map { ($0, "\(variable)=\($0)") }
        if let i = arguments.firstIndex(of: "--log-format") {
            guard i + 1 < arguments.count else {
                throw Unknown(message: "--log-format needs a value (text, json or journal)")
            }
            chosen = (arguments[i + 1], "--log-format \(arguments[i + 1])")
            arguments.removeSubrange(i...(i + 1))
        }
        guard let (value, origin) = chosen else {
            if standardErrorIsTheJournal() { current = .journal }
            return
        }
        guard let format = LogFormat(rawValue: value) else {
            throw Unknown(message: "\(origin): the log format is text, json or journal")
        }
        current = format
        // Children log the same way (a detached owner's NAME.log). Not a secret.
        try? ProcessControl.setEnvironmentValue(variable, format.rawValue)
    }

    /// True when standard error is the stream JOURNAL_STREAM names ("DEVICE:INODE", decimal).
    public static func standardErrorIsTheJournal() -> Bool {
        guard let value = ProcessControl.environmentValue("JOURNAL_STREAM"),
              case let parts = value.split(separator: ":", omittingEmptySubsequences: false), parts.count == 2,
              let device = UInt64(parts[0]), let inode = UInt64(parts[1]),
              let status = try? FileDescriptor.standardError.status()
        else { return false }
        return status.device == device && status.inode == inode
    }

    /// A line's level: its name in JSON and its syslog priority prefix (sd-daemon(3)).
    enum Level: String {
        case error, warning, info
        var priorityPrefix: String {
            switch self {
            case .error: "<3>"
            case .warning: "<4>"
            case .info: "<6>"
            }
        }
    }

    /// A line's level, from how it is written (`Error:`, `tunnelgate: warning:`), and its message.
    static func level(of text: String) -> (level: Level, message: String) {
        if let rest = text.strip("Error: ") { return (.error, rest) }
        if let rest = text.strip("tunnelgate: warning: ") { return (.warning, rest) }
        return (.info, text.strip("tunnelgate: ") ?? text)
    }

    /// `text` as this format writes it, ending in a newline.
    public func line(_ text: String, usage: String? = nil) -> String {
        let trimmed = text.hasSuffix("\n") ? String(text.dropLast()) : text
        switch self {
        case .text:
            return trimmed + "\n"
        case .journal:
            // journald makes an entry of each line: each carries the event's priority.
            let priority = Self.level(of: trimmed).level.priorityPrefix
            return trimmed.split(separator: "\n", omittingEmptySubsequences: false).map { priority + $0 + "\n" }.joined()
        case .json:
            let (level, message) = Self.level(of: trimmed)
            var object = "{\"time\":\(JSONValue.quoted(Self.timestamp(ProcessControl.realtimeSeconds()))),"
            object += "\"level\":\"\(level.rawValue)\",\"message\":\(JSONValue.quoted(message))"
            if let usage { object += ",\"usage\":\(JSONValue.quoted(usage))" }
            return object + "}\n"
        }
    }

    /// RFC 3339 in UTC with microseconds: 2026-12-01T20:35:32.123456Z.
    static func timestamp(_ seconds: Double) -> String {
        let whole = Int(seconds.rounded(.down))
        let micros = min(999_999, Int(((seconds - Double(whole)) * 1_000_000).rounded()))
        let (days, secondOfDay) = (whole / 86_400, whole % 86_400)
        // The civil date of a day count since 1970-01-01 (the proleptic Gregorian calendar).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let fraction = String(micros)
        return "\(year)-\(two(month))-\(two(day))T\(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60))."
            + String(repeating: "0", count: 6 - fraction.count) + fraction + "Z"
    }
}

extension String {
    fileprivate func strip(_ prefix: String) -> String? { hasPrefix(prefix) ? String(dropFirst(prefix.count)) : nil }
}
