import PlaneProtocol
import RuntimeABI
import TunnelgateSettings
import XCTest

/// The engine–plane channel's frames, as both processes build and read them (JSONCoding: no Foundation
/// in the plane): every kind of message comes back equal, a tail stays after the JSON, and a datagram
/// that is not a message is garbage with the reason.
final class ChannelFrameTests: XCTestCase {
    func roundTrip<M: Codable & Equatable>(_ message: M, tail: [UInt8] = [], file: StaticString = #filePath, line: UInt = #line) throws {
        let bytes = try tail.withUnsafeBytes { try ChannelFrame.encode(message, tail: tail.isEmpty ? nil : $0) }
        let (decoded, at) = try bytes.withUnsafeBytes { try ChannelFrame.decode(M.self, $0) }
        XCTAssertEqual(decoded, message, file: file, line: line)
        XCTAssertEqual(Array(bytes[at...]), tail, "the tail follows the JSON", file: file, line: line)
    }

    func testEngineMessages() throws {
        let peer = WireGuardPlan.Peer(publicKey: Array(0..<32), hasPresharedKey: true, endpointHost: "vpn.example",
                                      endpointPort: 51820, allowedIPs: [IPPrefix("0.0.0.0/0")!, IPPrefix("::/0")!],
                                      persistentKeepalive: 25)
        let plan = WireGuardPlan(listenPort: nil, fwMark: 0x1234_5678, peers: [peer], offloads: true, timerScale: 0.25)
        let load = PlaneLoad(runtime: .wireguard(plan), descriptors: [.udp4, .udp6, .uapi],
                             secrets: [.init(role: .privateKey, count: 32), .init(role: .presharedKey, count: 32, peer: 0)],
                             tunnelName: "wg0")
        try roundTrip(EngineMessage.load(load), tail: Array(repeating: 0xa5, count: 64))
        try roundTrip(EngineMessage.load(PlaneLoad(runtime: .none, descriptors: [], secrets: [], tunnelName: "t")))
        try roundTrip(EngineMessage.start(PlaneStart(context: RuntimeContext(interfaceName: "wg0", mtu: 1420, carrierMark: 7),
                                                     tunOffloads: true, descriptors: [.tun])))
        try roundTrip(EngineMessage.message(id: .max, data: Array(0...255)))
        try roundTrip(EngineMessage.provider(handoff: JSONText(#"{"a": "\"quoted\""}"#), secrets: [ProviderSecret(reference: [1, 2], count: 3)]))
        try roundTrip(EngineMessage.applied(id: 1, error: nil, code: nil))
        try roundTrip(EngineMessage.applied(id: 2, error: "no", code: -5))
        for message in [EngineMessage.stop, .path(satisfied: false), .sleep(true), .stopTunnel(reason: 3)] {
            try roundTrip(message)
        }
    }

    func testPlaneMessages() throws {
        var counters = PacketCounters()
        counters.packetsFromHost = .max
        counters.handOffSeconds = 1.25
        counters.lastRepair = "route"
        let report = PlaneReport(state: RuntimeState(phase: .ready, interface: "wg0", json: #"{"peers":[]}"#), counters: counters)
        try roundTrip(PlaneMessage.state(report))
        try roundTrip(PlaneMessage.loaded(error: nil, summary: "built-in WireGuard"))
        try roundTrip(PlaneMessage.reply(id: 9, data: nil, error: "unknown"))
        try roundTrip(PlaneMessage.started(error: ProviderError(message: "x", domain: "NEVPNErrorDomain", code: 1)))
        try roundTrip(PlaneMessage.apply(id: 3, settings: nil))
    }

    func testGarbage() {
        func garbage(_ bytes: [UInt8]) -> String {
            var outcome = "decoded"
            bytes.withUnsafeBytes { raw in
                do throws(ChannelFrame.Garbage) { _ = try ChannelFrame.decode(EngineMessage.self, raw) } catch { outcome = error.description }
            }
            return outcome
        }
        XCTAssertEqual(garbage([0, 0]), "a datagram of 2 bytes, shorter than its header")
        XCTAssertEqual(garbage([0, 0, 0, 9, 0x7b]), "a JSON length of 9 beyond the datagram")
        let notAMessage = Array(#"{"launch":{}}"#.utf8)
        XCTAssertTrue(garbage([0, 0, 0, UInt8(notAMessage.count)] + notAMessage).hasPrefix("a message that does not decode: "))
    }
}
