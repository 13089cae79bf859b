import Foundation
@testable import NetworkExtension
import XCTest

/// NEPacketTunnelFlow at stop: an async read still waiting returns an empty batch (its continuation is
/// resumed, never leaked), as does one made after the close; a completion-handler read is never
/// delivered, as on iOS.
final class PacketFlowStopTests: XCTestCase {
    func testAsyncReadWaitingAtCloseReturnsAnEmptyBatch() async {
        let flow = NEPacketTunnelFlow()
        let handlerCalled = expectation(description: "a completion handler read is never delivered")
        handlerCalled.isInverted = true
        flow.readPackets { _, _ in handlerCalled.fulfill() }
        let returned = expectation(description: "the async read returns once the flow closes")
        Task {
            let (packets, protocols) = await flow.readPackets()
            XCTAssertTrue(packets.isEmpty && protocols.isEmpty)
            returned.fulfill()
        }
        // The read is armed (no TUN: it waits); then the tunnel stops. (Bounded: before the fix it never
        // returned, and this wait fails after 2 s instead of hanging.)
        try? await Task.sleep(nanoseconds: 50_000_000)
        flow.close()
        await fulfillment(of: [returned], timeout: 2)
        let late = expectation(description: "a read after the close returns at once")
        Task {
            let after = await flow.readPackets()
            XCTAssertTrue(after.0.isEmpty)
            late.fulfill()
        }
        await fulfillment(of: [late, handlerCalled], timeout: 2)
    }
}
