@testable import Metrics
import TunnelgateSettings
import XCTest

final class ListenAddressTests: XCTestCase {
    func address(_ text: String) -> ListenAddress? { try? ListenAddress.parse(text).get() }
    func reason(_ text: String) -> String? {
        if case .failure(let e) = ListenAddress.parse(text) { return e.description }
        return nil
    }

    func testAddressesAndPorts() {
        XCTAssertEqual(address("127.0.0.1:9587")?.description, "127.0.0.1:9587")
        XCTAssertEqual(address("[::1]:80")?.description, "[::1]:80")
        XCTAssertEqual(address("localhost:1234")?.description, "127.0.0.1:1234")
        XCTAssertEqual(ListenAddress.defaultValue.description, "127.0.0.1:9587")
        XCTAssertEqual(reason("9587"), "--listen 9587: expected ADDRESS:PORT")
        XCTAssertEqual(reason(":9587"), "--listen :9587: no address: give one, e.g. 127.0.0.1:9587")
        XCTAssertEqual(reason("::1:9587"), "--listen ::1:9587: an IPv6 address is written [ADDRESS]:PORT")
        XCTAssertEqual(reason("127.0.0.1:0"), "--listen 127.0.0.1:0: the port must be a number from 1 to 65535")
        XCTAssertEqual(reason("127.0.0.1:65536"), "--listen 127.0.0.1:65536: the port must be a number from 1 to 65535")
        XCTAssertEqual(reason("metrics.example:80"),
                       "--listen metrics.example:80: metrics.example is not an IPv4 or IPv6 address (host names other than localhost are not resolved)")
    }

    func testOnlyLoopbackIsLoopback() {
        for text in ["127.0.0.1:1", "127.9.8.7:1", "[::1]:1", "[::ffff:127.0.0.1]:1", "localhost:1"] {
            XCTAssertEqual(address(text)?.isLoopback, true, text)
        }
        for text in ["0.0.0.0:1", "[::]:1", "10.0.0.1:1", "198.18.0.1:1", "[fe80::1]:1", "[::ffff:10.0.0.1]:1", "[::2]:1"] {
            XCTAssertEqual(address(text)?.isLoopback, false, text)
        }
    }
}
