import Foundation
import LinuxSystem
import XCTest

/// Runs `body` on a new thread that first enters a new, empty network
/// namespace, so tests change a private kernel state and never the host's.
/// `cleanup` runs on that thread after `body`, also when it threw.
/// Requires root (CAP_SYS_ADMIN); without it the test fails, it is not skipped.
public func inPrivateNetworkNamespace(cleanup: (@Sendable () -> Void)? = nil,
                                      _ body: @escaping @Sendable () throws -> Void,
                                      file: StaticString = #filePath, line: UInt = #line) {
    final class Outcome: @unchecked Sendable { // written by the worker before the semaphore is signalled
        var error: Error?
    }
    let outcome = Outcome()
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        do {
            try ProcessControl.enterNewNetworkNamespace()
            defer { cleanup?() }
            try body()
        } catch {
            outcome.error = error
        }
        done.signal()
    }
    thread.start()
    done.wait()
    if let error = outcome.error { XCTFail("\(error)", file: file, line: line) }
}
