import Engine
import TunnelgateTestSupport
import XCTest

/// A private namespace whose Tunnelgate state directory is removed afterwards.
func inPrivateNetworkNamespace(_ body: @escaping @Sendable () throws -> Void,
                               file: StaticString = #filePath, line: UInt = #line) {
    TunnelgateTestSupport.inPrivateNetworkNamespace(cleanup: { (try? StateDirectory(create: false))?.removeAll() },
                                                    body, file: file, line: line)
}
