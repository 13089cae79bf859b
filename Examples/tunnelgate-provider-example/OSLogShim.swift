import Foundation

/// A stand-in for os.log's Logger (Linux has no os.log): `info`, `error`, `debug`
/// write one line to standard error with the subsystem and category.
struct Logger: Sendable {
    let subsystem: String
    let category: String

    init(subsystem: String, category: String) {
        self.subsystem = subsystem
        self.category = category
    }

    func info(_ message: String) { write("info", message) }
    func debug(_ message: String) { write("debug", message) }
    func error(_ message: String) { write("error", message) }

    private func write(_ level: String, _ message: String) {
        FileHandle.standardError.write(Data("[\(subsystem):\(category)] \(level): \(message)\n".utf8))
    }
}
