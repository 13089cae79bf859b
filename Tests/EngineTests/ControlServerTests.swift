import Session
import Engine
import LinuxSystem
import XCTest

final class ControlServerTests: XCTestCase {
    /// A server removes its socket file when it goes, but not a file a later server of the same name put
    /// there (settings applied again while the old server was still held).
    func testAServerRemovesOnlyItsOwnSocketFile() {
        inPrivateNetworkNamespace {
            let gateway = try Engine()
            let path = gateway.state.controlPath("tgctl0")
            var first: ControlServer? = try ControlServer(gateway: gateway, name: "tgctl0")
            try expect(first != nil && FileSystem.exists(path), "the first server's socket file exists")
            FileSystem.remove(path)
            var second: ControlServer? = try ControlServer(gateway: gateway, name: "tgctl0")
            first = nil
            try expect(FileSystem.exists(path), "the second server's file outlives the first server")
            let client = try UnixSocket.connect(to: path)  // refused unless a live listener is bound there
            client.close()
            try expect(second != nil, "the second server is still up")
            second = nil
            try expect(!FileSystem.exists(path), "the second server removes its own file when it goes")
        }
    }
}
