import Foundation
import LinuxSystem
import XCTest

/// Runs `body` on a new thread that first enters a new, empty network
/// namespace, so tests change a private kernel state and never the host's.
/// Requires root (CAP_SYS_ADMIN); without it the test fails, it is not skipped.
func inPrivateNetworkNamespace(_ body: @escaping @Sendable () throws -> Void,
                               file: StaticString = #filePath, line: UInt = #line) {
    final class Outcome: @unchecked Sendable { // written by the worker before the semaphore is signalled
        var error: Error?
    }
    let outcome = Outcome()
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        do {
            try ProcessControl.enterNewNetworkNamespace()
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
