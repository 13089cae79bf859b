import LinuxSystem
import Synchronization

/// Where os.log messages go on Linux: the process's standard error, one line per message, written
/// with one write(2) under a lock so that lines from several threads never interleave:
///
///     [SUBSYSTEM:CATEGORY] LEVEL: MESSAGE
///
/// (`[CATEGORY]` without a subsystem, nothing for the default log). LEVEL is `debug`, `info`, `notice`
/// (OSLogType.default), `error` or `fault`. Line breaks and other control characters in the message are
/// written escaped (`\n`, `\r`, `\u{1B}`): one message is one line, whatever it holds. A provider
/// host's standard error is its tunnel's log (`NAME.log` in the state directory).
///
/// Which levels are written follows Apple's `OS_ACTIVITY_MODE`: unset (or any other value) writes
/// info and above; `debug` writes debug too; `disable` writes nothing.
enum OSLogOutput {
    enum Mode: Equatable { case standard, debug, disabled }

    struct Sink {
        var descriptor = FileDescriptor(rawValue: 2)
        var mode: Mode = OSLogOutput.modeFromEnvironment()
    }

    private static let sink = Mutex(Sink())

    static func modeFromEnvironment() -> Mode {
        switch ProcessControl.environmentValue("OS_ACTIVITY_MODE") {
        case "debug": .debug
        case "disable": .disabled
        default: .standard
        }
    }

    static func writes(_ type: OSLogType) -> Bool {
        switch sink.withLock({ $0.mode }) {
        case .disabled: false
        case .debug: true
        case .standard: type != .debug
        }
    }

    static func write(_ type: OSLogType, log: OSLog, _ message: String) {
        guard !log.isDisabled else { return }
        var line = ""
        switch (log.subsystem.isEmpty, log.category.isEmpty) {
        case (true, true): break
        case (true, false): line = "[\(escaped(log.category))] "
        case (false, true): line = "[\(escaped(log.subsystem))] "
        case (false, false): line = "[\(escaped(log.subsystem)):\(escaped(log.category))] "
        }
        line += type.name + ": " + escaped(message) + "\n"
        sink.withLock { sink in
            // A log line that cannot be written (standard error closed) is dropped, as os_log's would be.
            try? sink.descriptor.writeAll(Array(line.utf8))
        }
    }

    /// `text` with C0 control characters and DEL escaped, so that it stays on one line.
    static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var out = ""
        out.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out.unicodeScalars.append(scalar)
            case _ where isControl(scalar):
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\u{" + (hex.count < 2 ? "0" + hex : hex) + "}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        (scalar.value < 0x20 && scalar != "\t") || scalar.value == 0x7F
            || (0x80...0x9F).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029
    }

    // MARK: Tests

    /// Sends the lines to `descriptor` with `mode` until `restore` (tests read them from a pipe).
    static func redirect(to descriptor: FileDescriptor, mode: Mode) -> Sink {
        sink.withLock { sink in
            let old = sink
            sink = Sink(descriptor: descriptor, mode: mode)
            return old
        }
    }

    static func restore(_ old: Sink) {
        sink.withLock { $0 = old }
    }
}
