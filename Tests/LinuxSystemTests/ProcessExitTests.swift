import Glibc
import LinuxSystem
import XCTest

/// The watches that end a tunnel when its namespace goes: a real child's pidfd, real inotify on a
/// directory, and `capture` of a real command.
final class ProcessExitTests: XCTestCase {
    func testPidfdBecomesReadableWhenTheProcessExits() throws {
        let pid = try ProcessControl.spawn("/bin/sleep", ["sleep", "30"])
        let exit = try ProcessExit(pid: pid)
        defer { exit.close() }
        XCTAssertFalse(exit.hasExited)
        XCTAssertFalse(try Poll.readable(exit.descriptor, timeoutMilliseconds: 0))
        try ProcessControl.signal(pid, SIGTERM)
        XCTAssertTrue(try Poll.readable(exit.descriptor, timeoutMilliseconds: 5000))
        XCTAssertTrue(exit.hasExited)
        XCTAssertEqual(try ProcessControl.wait(for: pid), .signalled(SIGTERM))
    }

    func testPidfdOfNoProcess() throws {
        let pid = try ProcessControl.spawn("/bin/true", ["true"])
        _ = try ProcessControl.wait(for: pid)
        XCTAssertThrowsError(try ProcessExit(pid: pid)) { error in
            XCTAssertEqual((error as? SystemCallError)?.errno, .noSuchProcess)
        }
    }

    func testEntryRemovalsWakeOnRemovalOnly() throws {
        var template = Array("/tmp/tg-entry-removals-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw SystemCallError("mkdtemp", .current) }
        let directory = String(cString: made)
        defer { FileSystem.removeDirectory(directory) }
        let file = directory + "/ns", other = directory + "/other"
        try FileSystem.writeAtomically(file, [1])
        let removals = try EntryRemovals(inDirectoryOf: file)
        defer { removals.close() }
        // A new entry is no removal (made in place: writeAtomically's rename would be a move from its
        // temporary name, which wakes the watch, whose owner then looks again).
        try FileDescriptor.open(other, O_WRONLY | O_CREAT, mode: 0o600).close()
        XCTAssertFalse(try Poll.readable(removals.descriptor, timeoutMilliseconds: 50))
        FileSystem.remove(file)
        XCTAssertTrue(try Poll.readable(removals.descriptor, timeoutMilliseconds: 2000))
        removals.drain()
        XCTAssertFalse(try Poll.readable(removals.descriptor, timeoutMilliseconds: 0))
        FileSystem.remove(other)
        XCTAssertTrue(try Poll.readable(removals.descriptor, timeoutMilliseconds: 2000))
    }

    func testCapture() throws {
        let result = try ProcessControl.capture(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout: 10)
        XCTAssertEqual(result.termination, .exited(3))
        XCTAssertEqual(String(decoding: result.standardOutput, as: UTF8.self), "out\n")
        XCTAssertEqual(String(decoding: result.standardError, as: UTF8.self), "err\n")
        XCTAssertThrowsError(try ProcessControl.capture(["tg-no-such-command-\(getpid())"], timeout: 10)) { error in
            XCTAssertEqual((error as? SystemCallError)?.errno, .noSuchEntry)
        }
        XCTAssertThrowsError(try ProcessControl.capture(["sleep", "30"], timeout: 0.2)) { error in
            XCTAssertEqual((error as? SystemCallError)?.errno, .timedOut)
        }
    }

    func testUserLookups() {
        XCTAssertEqual(ProcessControl.user(named: "root"), ProcessControl.UserAccount(name: "root", uid: 0, gid: 0))
        XCTAssertEqual(ProcessControl.user(id: 0)?.name, "root")
        XCTAssertNil(ProcessControl.user(named: "tg-no-such-user"))
    }
}
