@testable import Lab
import Nftables
import TunnelgateSettings
import XCTest

/// The leak counters' pure logic: carriers declared by source port and address, first-seen times, and
/// verdicts over a window of them.
final class LeakTests: XCTestCase {
    func flow(_ src: String, _ sport: UInt16, _ dst: String, _ dport: UInt16, proto: UInt8 = 17, packets: UInt64 = 1,
              firstSeen: UInt64? = nil) -> ObservedFlow {
        ObservedFlow(uid: nil, proto: proto, source: IPAddress(src)!, sourcePort: sport, destination: IPAddress(dst)!,
                     destinationPort: dport, packets: packets, observedAt: "r", firstSeenMilliseconds: firstSeen)
    }

    func testCarrierBySourcePort() throws {
        let c = try XCTUnwrap(CarrierSpec("198.18.0.10:51820/udp@51821"))
        XCTAssertEqual(c.sourcePort, 51821)
        XCTAssertNil(c.sourceAddress)
        XCTAssertEqual(c.description, "198.18.0.10:51820/udp@51821")
        XCTAssertTrue(c.matches(flow("10.231.0.2", 51821, "198.18.0.10", 51820)))
        XCTAssertTrue(c.matches(flow("10.232.0.2", 51821, "198.18.0.10", 51820)), "any source address of the client")
        XCTAssertFalse(c.matches(flow("10.231.0.2", 40000, "198.18.0.10", 51820)), "another source port is not the carrier")
        XCTAssertFalse(c.matches(flow("10.231.0.2", 51821, "198.18.0.10", 51820, proto: 6)))
        XCTAssertFalse(c.matches(flow("10.231.0.2", 51821, "198.18.0.10", 51821)))
    }

    func testCarrierBySourceAddressAndPort() throws {
        let c = try XCTUnwrap(CarrierSpec("198.18.0.10:5400/udp@10.231.0.2:5400"))
        XCTAssertEqual(c.sourceAddress, IPAddress("10.231.0.2"))
        XCTAssertEqual(c.description, "198.18.0.10:5400/udp@10.231.0.2:5400")
        XCTAssertTrue(c.matches(flow("10.231.0.2", 5400, "198.18.0.10", 5400)))
        XCTAssertFalse(c.matches(flow("10.232.0.2", 5400, "198.18.0.10", 5400)), "from another address of the client")
        XCTAssertFalse(c.matches(flow("10.231.0.2", 5401, "198.18.0.10", 5400)))

        let six = try XCTUnwrap(CarrierSpec("[2001:db8:18::10]:5400/udp@[fd00:231::2]:5400"))
        XCTAssertEqual(six.description, "[2001:db8:18::10]:5400/udp@[fd00:231::2]:5400")
        XCTAssertTrue(six.matches(flow("fd00:231::2", 5400, "2001:db8:18::10", 5400)))
        XCTAssertFalse(six.matches(flow("fd00:232::2", 5400, "2001:db8:18::10", 5400)))
        XCTAssertEqual(CarrierSpec("[2001:db8:18::10]:51820/udp@51821")?.sourcePort, 51821)
    }

    func testCarrierSpecsRefused() {
        for text in ["198.18.0.10:51820/udp@", "198.18.0.10:51820/udp@0", "198.18.0.10:51820/udp@70000",
                     "198.18.0.10:51820/udp@10.231.0.2", "198.18.0.10:51820/udp@[fd00::2]:5400",
                     "[2001:db8::1]:51820/udp@10.231.0.2:5400", "[2001:db8::1]:51820/udp@fd00::2:5400",
                     "198.18.0.10:51820@51821/udp", "198.18.0.10:51820/udp@10.231.0.2:0"] {
            XCTAssertNil(CarrierSpec(text), text)
        }
        // Without a source, as before.
        XCTAssertNil(CarrierSpec("198.18.0.10:51820/udp")?.sourcePort)
        XCTAssertTrue(CarrierSpec("198.18.0.10:51820/udp")!.matches(flow("10.231.0.2", 40000, "198.18.0.10", 51820)))
    }

    func testFirstSeenArithmetic() {
        let day: UInt64 = 86_400_000
        // Added 1500 ms before the listing returned at t = 10_000_000: 1500 ms of a 1-day timeout gone.
        XCTAssertEqual(LeakTime.firstSeen(readAt: 10_000_000, timeout: day, expiresIn: day - 1500),
                       10_000_000 - 1500 + LeakTime.tickMilliseconds)
        // Just added: the read's moment plus a tick (never earlier than the packet).
        XCTAssertEqual(LeakTime.firstSeen(readAt: 5000, timeout: day, expiresIn: day), 5000 + LeakTime.tickMilliseconds)
        // A kernel rounding that reports more than the timeout left is taken as "just now".
        XCTAssertEqual(LeakTime.firstSeen(readAt: 5000, timeout: day, expiresIn: day + 3), 5000 + LeakTime.tickMilliseconds)
        XCTAssertNil(LeakTime.firstSeen(readAt: 5000, timeout: day, expiresIn: nil))
        XCTAssertEqual(LeakTime.clock(1_796_190_213_539), "05:43:33.539Z")
        XCTAssertEqual(LeakTime.clock(7), "00:00:00.007Z")
    }

    func testDescriptionWithTime() {
        XCTAssertEqual(flow("10.231.0.2", 40000, "198.18.0.30", 53, firstSeen: 1_796_190_213_539).descriptionWithTime,
                       "udp 10.231.0.2:40000 -> 198.18.0.30:53 packets 1 (at r) first-seen 1796190213539 (05:43:33.539Z)")
        XCTAssertEqual(flow("10.231.0.2", 40000, "198.18.0.30", 53).descriptionWithTime,
                       "udp 10.231.0.2:40000 -> 198.18.0.30:53 packets 1 (at r)")
    }

    func testVerdictWindow() {
        let carrier = CarrierSpec("198.18.0.10:51820/udp@51821")!
        let reading = LeakReading(flows: [
            flow("10.231.0.2", 51821, "198.18.0.10", 51820, packets: 9, firstSeen: 1000),   // the carrier
            flow("10.231.0.2", 40000, "198.18.0.10", 51820, packets: 2, firstSeen: 2000),   // ServerIP: wrong source port
            flow("10.231.0.2", 40001, "198.18.0.30", 8080, proto: 6, packets: 3, firstSeen: 3000),
            flow("10.231.0.2", 40002, "198.18.0.30", 53, packets: 1, firstSeen: 4000),       // DNS
            flow("10.231.0.2", 40003, "198.18.0.20", 8080, proto: 6, packets: 5),            // no time known
        ], flowsByUID: [], unitemised: 0)
        let all = LeakVerdict(reading: reading, carriers: [carrier], allowed: [], uid: nil)
        XCTAssertEqual(all.carrierPackets, 9)
        XCTAssertEqual(all.leaks.map(\.sourcePort), [40003, 40000, 40001], "oldest first, an undated flow first")
        XCTAssertEqual(all.dnsLeaks.map(\.sourcePort), [40002])
        XCTAssertEqual(all.leakedPackets, 11)

        let before = LeakVerdict(reading: reading, carriers: [carrier], allowed: [], uid: nil, window: LeakWindow(before: 3000))
        XCTAssertEqual(before.leaks.map(\.sourcePort), [40003, 40000], "first seen before 3000, and the undated one")
        XCTAssertTrue(before.dnsLeaks.isEmpty)
        let after = LeakVerdict(reading: reading, carriers: [carrier], allowed: [], uid: nil, window: LeakWindow(after: 3000))
        XCTAssertEqual(after.leaks.map(\.sourcePort), [40003, 40001])
        XCTAssertEqual(after.dnsLeaks.map(\.sourcePort), [40002])
        let between = LeakVerdict(reading: reading, carriers: [carrier], allowed: [], uid: nil, window: LeakWindow(after: 2001, before: 3000))
        XCTAssertEqual(between.leaks.map(\.sourcePort), [40003])

        let serverIP = LeakVerdict(reading: reading, carriers: [carrier], allowed: [], uid: nil, window: LeakWindow(only: .carrierAddresses))
        XCTAssertEqual(serverIP.leaks.map(\.sourcePort), [40000])
        XCTAssertTrue(serverIP.dnsLeaks.isEmpty)
        let other = LeakVerdict(reading: reading, carriers: [carrier], allowed: [], uid: nil, window: LeakWindow(only: .otherAddresses))
        XCTAssertEqual(other.leaks.map(\.sourcePort), [40003, 40001])
        XCTAssertEqual(other.dnsLeaks.map(\.sourcePort), [40002])

        // Nothing in the window: passes; packets no flow holds fail every window.
        XCTAssertTrue(LeakVerdict(reading: LeakReading(flows: Array(reading.flows.prefix(1)), flowsByUID: [], unitemised: 0),
                                  carriers: [carrier], allowed: [], uid: nil, window: LeakWindow(before: 1500)).passed)
        XCTAssertFalse(LeakVerdict(reading: LeakReading(flows: [], flowsByUID: [], unitemised: 1),
                                   carriers: [carrier], allowed: [], uid: nil, window: LeakWindow(after: 10, before: 20)).passed)
        XCTAssertEqual(LeakWindow(after: 1_796_190_213_539, only: .carrierAddresses).description,
                       " (first seen at or after 1796190213539 (05:43:33.539Z), to carrier addresses only)")
        XCTAssertEqual(LeakWindow().description, "")
    }

    func testWrongUIDBySourcePort() {
        let carrier = CarrierSpec("198.18.0.10:51820/udp@51821")!
        var mine = flow("10.231.0.2", 51821, "198.18.0.10", 51820)
        mine.uid = 1000
        var other = flow("10.231.0.2", 40000, "198.18.0.10", 51820)
        other.uid = 0
        let v = LeakVerdict(reading: LeakReading(flows: [], flowsByUID: [mine, other], unitemised: 0), carriers: [carrier], allowed: [], uid: 1000)
        XCTAssertTrue(v.wrongUID.isEmpty, "uid 0's packet from another port is not the carrier, so not the carrier from another uid")
        mine.uid = 0
        XCTAssertEqual(LeakVerdict(reading: LeakReading(flows: [], flowsByUID: [mine], unitemised: 0), carriers: [carrier], allowed: [],
                                   uid: 1000).wrongUID.count, 1)
    }

    /// The counters' sets expire (so their elements carry a first-seen time) and are filled with
    /// `add`, which leaves an element's expiry alone: `update` would make the time a last-seen one.
    func testProgramsDateTheirElements() {
        for program in [LeakWatch.farProgram(interfaces: ["c0", "c1"]), LeakWatch.clientProgram(interfaces: ["eth0"])] {
            XCTAssertFalse(program.sets.isEmpty)
            for set in program.sets { XCTAssertEqual(set.timeoutMilliseconds, LeakWatch.elementTimeout, set.name) }
            var adds = 0
            for rule in program.chains.flatMap(\.rules) {
                for e in rule.expressions {
                    if case .updateSet = e { XCTFail("\(rule.comment): update refreshes the expiry") }
                    if case .addToSet = e { adds += 1 }
                }
            }
            XCTAssertGreaterThan(adds, 0)
        }
    }
}
