import Glibc
import LinuxSystem
import Session
import XCTest

/// ServiceNotifier against a datagram socket bound here, as systemd binds $NOTIFY_SOCKET.
final class ServiceNotifierTests: XCTestCase {
    /// A bound AF_UNIX datagram socket at `address` (a path, or "@abstract"), non-blocking.
    private func bind(_ address: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue | SOCK_NONBLOCK.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        var sun = sockaddr_un()
        sun.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(address.utf8)
        let abstract = bytes.first == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        withUnsafeMutableBytes(of: &sun.sun_path) { raw in for (i, b) in bytes.enumerated() { raw[i] = b } }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count + (abstract ? 0 : 1))
        let rc = withUnsafePointer(to: &sun) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) } }
        XCTAssertEqual(rc, 0, "bind(\(address)): errno \(errno)")
        return fd
    }

    private func receive(_ fd: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = recv(fd, &buffer, buffer.count, 0)
        return n < 0 ? nil : String(decoding: buffer[0..<n], as: UTF8.self)
    }

    private func environment(_ values: [String: String?]) {
        for (name, value) in values {
            if let value { setenv(name, value, 1) } else { unsetenv(name) }
        }
    }

    func testMessagesGoToAPathAndTheVariablesAreRemoved() throws {
        let path = "/tmp/tg-notify-test-\(getpid()).sock"
        unlink(path)
        defer { unlink(path) }
        let fd = try bind(path)
        defer { close(fd) }
        environment(["NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000", "WATCHDOG_PID": String(getpid())])
        let notifier = try XCTUnwrap(ServiceNotifier.fromEnvironment(log: { XCTFail($0) }))
        for name in ServiceNotifier.environmentNames { XCTAssertNil(getenv(name), "\(name) is still set") }
        XCTAssertEqual(notifier.watchdogInterval, 1.0)
        notifier.ready(status: "tg0: connected\nsecond line")
        XCTAssertEqual(receive(fd), "READY=1\nSTATUS=tg0: connected second line")
        notifier.status("tg0: connected second line")
        XCTAssertNil(receive(fd), "an unchanged status is not sent again")
        notifier.status("tg0: reasserting")
        XCTAssertEqual(receive(fd), "STATUS=tg0: reasserting")
        let now = ProcessControl.monotonicSeconds()
        notifier.watchdogIfDue(now: now)
        XCTAssertNil(receive(fd), "no ping before half of WATCHDOG_USEC")
        notifier.watchdogIfDue(now: now + 1.1)
        XCTAssertEqual(receive(fd), "WATCHDOG=1")
        notifier.stopping(status: "tg0: disconnecting")
        XCTAssertEqual(receive(fd), "STOPPING=1\nSTATUS=tg0: disconnecting")
    }

    func testAnAbstractNameAndAWatchdogForAnotherProcess() throws {
        let name = "@tg-notify-test-\(getpid())"
        let fd = try bind(name)
        defer { close(fd) }
        environment(["NOTIFY_SOCKET": name, "WATCHDOG_USEC": "2000000", "WATCHDOG_PID": String(getpid() + 1)])
        let notifier = try XCTUnwrap(ServiceNotifier.fromEnvironment(log: { XCTFail($0) }))
        XCTAssertNil(notifier.watchdogInterval, "WATCHDOG_PID names another process: no watchdog")
        XCTAssertNil(notifier.secondsUntilWatchdog(now: 0))
        notifier.ready(status: "x")
        XCTAssertEqual(receive(fd), "READY=1\nSTATUS=x")
    }

    func testNoSocketNoNotifier() {
        environment(["NOTIFY_SOCKET": nil, "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": nil])
        XCTAssertNil(ServiceNotifier.fromEnvironment(log: { XCTFail($0) }))
        XCTAssertNil(getenv("WATCHDOG_USEC"), "removed even without a socket")
        environment(["NOTIFY_SOCKET": "relative/path"])
        var logged: [String] = []
        XCTAssertNil(ServiceNotifier.fromEnvironment(log: { logged.append($0) }))
        XCTAssertEqual(logged.count, 1)
    }
}
