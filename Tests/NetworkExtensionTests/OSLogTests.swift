import Foundation
import Glibc
import LinuxSystem
@testable import os
import os.log
import XCTest

/// The `os` module as providers use it (`import os`, `import os.log`, Logger, os_log, privacy), each test
/// reading the lines it wrote from a file the module's output was pointed at (or, once, from the real
/// standard error).
final class OSLogTests: XCTestCase {
    var path = ""

    override func setUp() {
        path = NSTemporaryDirectory() + "tunnelgate-oslog-\(getpid())-\(UUID().uuidString)"
    }

    override func tearDown() {
        unlink(path)
    }

    /// Runs `body` with the module writing to a fresh file in `mode`; returns the lines written.
    func lines(mode: OSLogOutput.Mode = .debug, _ body: () -> Void) throws -> [String] {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0o600)
        XCTAssertGreaterThanOrEqual(fd, 0)
        let old = OSLogOutput.redirect(to: FileDescriptor(rawValue: fd), mode: mode)
        body()
        OSLogOutput.restore(old)
        close(fd)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        XCTAssertTrue(text.isEmpty || text.hasSuffix("\n"), "every line ends with a newline")
        return text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
    }

    func testLoggerLevelsAndPrefix() throws {
        let log = Logger(subsystem: "com.example.vpn", category: "tunnel")
        let got = try lines {
            log.debug("d"); log.trace("t"); log.info("i"); log.notice("n"); log.log("l")
            log.warning("w"); log.error("e"); log.critical("c"); log.fault("f")
            log.log(level: .info, "li"); log.log(level: .fault, "lf")
            Logger(OSLog(subsystem: "s", category: "")).info("only subsystem")
            Logger(OSLog(subsystem: "", category: "c")).info("only category")
            Logger().notice("default log")
        }
        XCTAssertEqual(got, [
            "[com.example.vpn:tunnel] debug: d", "[com.example.vpn:tunnel] debug: t",
            "[com.example.vpn:tunnel] info: i", "[com.example.vpn:tunnel] notice: n",
            "[com.example.vpn:tunnel] notice: l", "[com.example.vpn:tunnel] error: w",
            "[com.example.vpn:tunnel] error: e", "[com.example.vpn:tunnel] fault: c",
            "[com.example.vpn:tunnel] fault: f", "[com.example.vpn:tunnel] info: li",
            "[com.example.vpn:tunnel] fault: lf", "[s] info: only subsystem", "[c] info: only category",
            "notice: default log",
        ])
    }

    func testPrivacyAsOnIOS() throws {
        let log = Logger(subsystem: "p", category: "c")
        let user = "alice", server = "198.18.0.10", port = 51820, secret = "hunter2-secret"
        let got = try lines {
            log.info("user \(user) at \(server, privacy: .public):\(port)")
            log.info("number \(port, privacy: .private) sensitive \(user, privacy: .sensitive) public \(user, privacy: .public)")
            log.info("flag \(true) ratio \(1.5) \(Float(0.25), format: .fixed(precision: 2)) type \(Int.self)")
            log.info("auto \(secret, privacy: .auto)")
            log.info("object \(NSString(string: secret)) url \(URL(string: "https://198.18.0.1/x")!)")
        }
        XCTAssertEqual(got, [
            "[p:c] info: user <private> at 198.18.0.10:51820",
            "[p:c] info: number <private> sensitive <private> public alice",
            "[p:c] info: flag true ratio 1.500000 0.25 type Int",
            "[p:c] info: auto <private>",
            "[p:c] info: object <private> url <private>",
        ])
        XCTAssertFalse(got.joined().contains(secret))
    }

    /// What Apple's overlay also takes and providers write: `\(error)` (any Error, iOS 14's overload) and
    /// raw bytes; both private by default.
    func testErrorsAndBytesAsOnIOS() throws {
        struct Refused: Error, CustomStringConvertible { var description: String { "refused by hunter2-host" } }
        let log = Logger(subsystem: "p", category: "c")
        let error: any Error = Refused()
        let nsError: any Error = NSError(domain: "VPN", code: 7, userInfo: [NSLocalizedDescriptionKey: "token hunter2 expired"])
        let bytes: [UInt8] = [0xde, 0xad, 0x00, 0x0f]
        let got = try lines {
            log.error("failed: \(error)")
            log.error("failed: \(error, privacy: .public)")
            log.error("ns: \(nsError, privacy: .private(mask: .hash)) then \(nsError, privacy: .public)")
            bytes.withUnsafeBytes { raw in
                log.debug("bytes \(raw) \(raw, privacy: .public) \(raw.baseAddress!, bytes: 2, privacy: .public)")
            }
        }
        XCTAssertEqual(got.count, 4, "\(got)")
        XCTAssertEqual(got[0], "[p:c] error: failed: <private>")
        XCTAssertEqual(got[1], "[p:c] error: failed: refused by hunter2-host")
        XCTAssertTrue(got[2].hasPrefix("[p:c] error: ns: <mask.hash: '"), got[2])
        // The public one is NSError's description (domain, code, userInfo), the hashed one is not there.
        let halves = got[2].components(separatedBy: " then ")
        XCTAssertEqual(halves.count, 2, got[2])
        XCTAssertFalse(halves[0].contains("hunter2"), got[2])
        XCTAssertTrue(halves[1].hasPrefix("Error Domain=VPN Code=7") && halves[1].contains("token hunter2 expired"), got[2])
        XCTAssertEqual(got[3], "[p:c] debug: bytes <private> dead000f dead")
        XCTAssertFalse(got[0].contains("hunter2"))
    }

    func testMaskHash() throws {
        let log = Logger(subsystem: "p", category: "c")
        let got = try lines {
            log.info("\("alice", privacy: .private(mask: .hash))")
            log.info("\("alice", privacy: .private(mask: .hash))")
            log.info("\("bob", privacy: .private(mask: .hash))")
            log.info("\("carol", privacy: .sensitive(mask: .hash))")
            log.info("\(42, privacy: .auto(mask: .hash)) \("dave", privacy: .public)")
        }
        XCTAssertEqual(got.count, 5)
        let hashes = got.prefix(4).map { String($0.dropFirst("[p:c] info: ".count)) }
        for h in hashes { XCTAssertTrue(h.hasPrefix("<mask.hash: '") && h.hasSuffix("'>"), h) }
        XCTAssertEqual(hashes[0], hashes[1], "equal values, equal hashes in one process")
        XCTAssertNotEqual(hashes[0], hashes[2])
        XCTAssertFalse(got.joined().contains("alice") || got.joined().contains("bob") || got.joined().contains("carol"))
        XCTAssertEqual(got[4], "[p:c] info: 42 dave", "a public scalar under .auto(mask:) is shown")
    }

    func testFormatsAndAlignment() throws {
        let log = Logger(subsystem: "f", category: "c")
        let got = try lines {
            log.info("\(255, format: .hex) \(255, format: .hex(includePrefix: true, uppercase: true)) \(8, format: .octal(includePrefix: true))")
            log.info("\(7, format: .decimal(minDigits: 3)) \(5, format: .decimal(explicitPositiveSign: true)) \(-12)")
            log.info("[\("ab", align: .right(columns: 5), privacy: .public)] [\("ab", align: .left(columns: 4), privacy: .public)]")
            log.info("\(UInt8(200)) \(Int64.min) \(true, format: .answer) \(1234.5, format: .exponential(precision: 2))")
        }
        XCTAssertEqual(got, [
            "[f:c] info: ff 0XFF 010",
            "[f:c] info: 007 +5 -12",
            "[f:c] info: [   ab] [ab  ]",
            "[f:c] info: 200 -9223372036854775808 YES 1.23e+03",
        ])
    }

    func testOSLogWithFormatStrings() throws {
        let log = OSLog(subsystem: "com.example.vpn", category: "legacy")
        let name = "tg0"
        let got = try lines {
            os_log("started %{public}@ (%@) pid %d", log: log, type: .info, name, name, 42)
            os_log(.error, log: log, "errno %{errno}d flag %{bool}d %{BOOL}d %{private}d %{public}s", 2, 1, 0, 7, name)
            os_log("%5d|%-5d|%05d|%+d|%x|%#X|%o|%.3d|%hhd|%u", log: log, type: .default, 42, 42, 42, 42, 255, 255, 8, 7, 300, -1)
            os_log("%.2f %e %g %5.1f%% %c", log: log, 3.14159, 1234.5, 0.0001, 99.44, 65)
            os_log("missing %d %@", log: log, 1)
            os_log("%d is not a number", log: log, "text")
            os_log("plain %s", log: log, "a string")
            os_log(.info, log: log, "interpolated \(name, privacy: .public)")
            os_log("default log %{public}d", 5)
        }
        XCTAssertEqual(got, [
            "[com.example.vpn:legacy] info: started tg0 (<private>) pid 42",
            "[com.example.vpn:legacy] error: errno [2: No such file or directory] flag true NO <private> tg0",
            "[com.example.vpn:legacy] notice:    42|42   |00042|+42|ff|0XFF|10|007|44|4294967295",
            "[com.example.vpn:legacy] notice: 3.14 1.234500e+03 0.0001  99.4% A",
            "[com.example.vpn:legacy] notice: missing 1 <missing>",
            "[com.example.vpn:legacy] notice: <private> is not a number",
            "[com.example.vpn:legacy] notice: plain <private>",
            "[com.example.vpn:legacy] info: interpolated tg0",
            "notice: default log 5",
        ])
    }

    func testOneLinePerMessage() throws {
        let log = Logger(subsystem: "l", category: "c")
        let got = try lines {
            log.error("forged\n[l:c] info: fake line\r\u{1B}[31m \("a\nb", privacy: .public)")
        }
        XCTAssertEqual(got, ["[l:c] error: forged\\n[l:c] info: fake line\\r\\u{1B}[31m a\\nb"])
    }

    func testLevelFilterAndLaziness() throws {
        let log = Logger(subsystem: "z", category: "c")
        final class Counter: @unchecked Sendable { var n = 0; func next() -> Int { n += 1; return n } }
        let counter = Counter()
        let standard = try lines(mode: .standard) {
            log.debug("hidden \(counter.next())")
            log.info("shown \(counter.next())")
            os_log("hidden %d", log: OSLog(subsystem: "z", category: "c"), type: .debug, 1)
            XCTAssertFalse(OSLog(subsystem: "z", category: "c").isEnabled(type: .debug))
            XCTAssertTrue(os_log_type_enabled(.default, .info))
        }
        XCTAssertEqual(standard, ["[z:c] info: shown 1"])
        XCTAssertEqual(counter.n, 1, "the argument of a message not written is not evaluated")
        let disabled = try lines(mode: .disabled) { log.fault("nothing") }
        XCTAssertEqual(disabled, [])
        let disabledLog = try lines { Logger(OSLog.disabled).fault("nothing"); os_log("x", log: .disabled) }
        XCTAssertEqual(disabledLog, [])
    }

    func testModeFromEnvironment() {
        for (value, mode) in [("debug", OSLogOutput.Mode.debug), ("disable", .disabled), ("info", .standard)] {
            setenv("OS_ACTIVITY_MODE", value, 1)
            XCTAssertEqual(OSLogOutput.modeFromEnvironment(), mode, value)
        }
        unsetenv("OS_ACTIVITY_MODE")
        XCTAssertEqual(OSLogOutput.modeFromEnvironment(), .standard)
    }

    func testLinesFromManyThreadsStayWhole() throws {
        let log = Logger(subsystem: "t", category: "c")
        let got = try lines {
            DispatchQueue.concurrentPerform(iterations: 8) { thread in
                for i in 0..<250 { log.info("thread \(thread) line \(i) \(String(repeating: "x", count: 100), privacy: .public)") }
            }
        }
        XCTAssertEqual(got.count, 2000)
        let tail = String(repeating: "x", count: 100)
        XCTAssertTrue(got.allSatisfy { $0.hasPrefix("[t:c] info: thread ") && $0.hasSuffix(tail) })
        XCTAssertEqual(Set(got).count, 2000)
    }

    /// The real path: standard error (descriptor 2), replaced by a file for the length of the test.
    func testWritesToStandardError() throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0o600)
        let saved = dup(2)
        XCTAssertGreaterThanOrEqual(saved, 0)
        dup2(fd, 2)
        let old = OSLogOutput.redirect(to: FileDescriptor(rawValue: 2), mode: .standard)
        OSLogOutput.restore(old)  // the default sink, whatever an earlier test left
        Logger(subsystem: "stderr", category: "c").notice("to standard error \(1)")
        os_log("and %{public}s", log: OSLog(subsystem: "stderr", category: "c"), type: .error, "os_log")
        dup2(saved, 2)
        close(saved)
        close(fd)
        XCTAssertEqual(try String(contentsOfFile: path, encoding: .utf8),
                       "[stderr:c] notice: to standard error 1\n[stderr:c] error: and os_log\n")
    }
}
