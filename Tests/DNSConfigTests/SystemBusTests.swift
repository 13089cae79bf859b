import Glibc
import LinuxSystem
import TunnelgateSettings
import XCTest
@testable import DNSConfig

/// sd-bus through `SystemBus`, against a real dbus-daemon: connection
/// errors, calls to the daemon, values that travel there and back, and the
/// exact calls `ResolvedClient` makes (members, signatures, arguments as the
/// other end reads them) against org.freedesktop.resolve1(5).
final class SystemBusTests: XCTestCase {
    var root: TemporaryRoot!
    var daemon: TestBusDaemon!

    override func setUpWithError() throws {
        root = try TemporaryRoot()
        daemon = try TestBusDaemon(socketPath: root.path + "/bus")
    }

    override func tearDown() {
        daemon = nil
        root = nil
    }

    func testConnectingToNothingSaysWhereAndWhy() throws {
        let address = "unix:path=" + root.path + "/no-bus-here"
        XCTAssertThrowsError(try SystemBus(address: address)) { error in
            guard let error = error as? SystemBusError else { return XCTFail("\(error)") }
            XCTAssertEqual(error.reason, .local(.noSuchEntry))
            XCTAssertEqual(error.description, "connect to the D-Bus bus \(address) failed: \(Errno.noSuchEntry)")
        }
        // A socket nobody listens on any more.
        let path = root.path + "/stale"
        let listener = try FileDescriptor.socket(family: AF_UNIX, type: .stream, nonBlocking: false)
        try listener.bind(to: .unix(path))
        listener.close()
        XCTAssertThrowsError(try SystemBus(address: "unix:path=" + path)) { error in
            XCTAssertEqual((error as? SystemBusError)?.reason, .local(.connectionRefused))
        }
    }

    func testTheBusDaemonAnswers() throws {
        let bus = try SystemBus(address: daemon.address)
        let id = try bus.callBus("GetId")
        guard case .string(let text)? = id.first else { return XCTFail("GetId: \(id)") }
        XCTAssertEqual(text.count, 32)
        let unique = try XCTUnwrap(bus.uniqueName)
        XCTAssertTrue(unique.hasPrefix(":"), unique)
        // Our own connection, as the daemon lists it, with our pid.
        guard case .array("s", let names)? = try bus.callBus("ListNames").first else { return XCTFail("ListNames") }
        XCTAssertTrue(names.contains(.string(unique)))
        XCTAssertEqual(try bus.callBus("GetConnectionUnixProcessID", [.string(unique)]), [.uint32(UInt32(getpid()))])
        // An error reply carries the error's name and message.
        XCTAssertThrowsError(try bus.callBus("GetNameOwner", [.string("org.example.nobody")])) { error in
            guard let error = error as? SystemBusError else { return XCTFail("\(error)") }
            XCTAssertEqual(error.errorName, SystemBusError.nameHasNoOwner)
            XCTAssertTrue(error.description.hasPrefix(
                "org.freedesktop.DBus.GetNameOwner(\"org.example.nobody\") failed: org.freedesktop.DBus.Error.NameHasNoOwner: "),
                error.description)
        }
        XCTAssertThrowsError(try bus.call("org.example.nobody", "/", "org.example.X", "Y")) { error in
            XCTAssertEqual((error as? SystemBusError)?.errorName, SystemBusError.serviceUnknown)
        }
    }

    func testValuesTravelThereAndBackUnchanged() throws {
        let peer = try TestPeer(address: daemon.address, name: "org.tunnelgate.Test", objects: ["/echo"])
        defer { peer.close() }
        let values: [DBusValue] = [
            .byte(0xfe), .boolean(true), .boolean(false), .int16(-2), .uint16(65535), .int32(Int32.min),
            .uint32(UInt32.max), .int64(Int64.min), .uint64(UInt64.max), .double(-0.5),
            .string(""), .string("ünïcode ✓"), .objectPath("/org/freedesktop/resolve1/link/_37"), .signature("a(iay)"),
            .bytes([]), .bytes([0, 10, 255]),
            .array(element: "(iay)", [.structure([.int32(AF_INET), .bytes([10, 8, 0, 1])]),
                                      .structure([.int32(AF_INET6), .bytes(Array(repeating: 0xfd, count: 16))])]),
            .array(element: "(sb)", []),
            .array(element: "{sv}", [.dictionaryEntry(.string("DefaultRoute"), .variant(.boolean(true))),
                                     .dictionaryEntry(.string("Domains"), .variant(.array(element: "(sb)", [
                                         .structure([.string("."), .boolean(true)])])))]),
            .array(element: "as", [.array(element: "s", [.string("a")]), .array(element: "s", [])]),
            .variant(.variant(.int32(7))),
            .structure([.string("x"), .structure([.uint64(1), .bytes([1])])]),
        ]
        let bus = try SystemBus(address: daemon.address)
        let reply = try bus.call("org.tunnelgate.Test", "/echo", "org.tunnelgate.Test", "Echo", values)
        XCTAssertEqual(reply, values)
        XCTAssertEqual(peer.calls.count, 1)
        XCTAssertEqual(peer.calls.first?.signature, DBusValue.signature(of: values))
        XCTAssertEqual(peer.calls.first?.arguments, values)
    }

    func testAnErrorReplyOfThePeer() throws {
        let peer = try TestPeer(address: daemon.address, name: "org.tunnelgate.Test", objects: ["/x"],
                                errors: ["Fail": "org.tunnelgate.Error.Nope"])
        defer { peer.close() }
        let bus = try SystemBus(address: daemon.address)
        XCTAssertThrowsError(try bus.call("org.tunnelgate.Test", "/x", "org.tunnelgate.Test", "Fail", [.int32(3)])) { error in
            XCTAssertEqual((error as? SystemBusError)?.description,
                           "org.tunnelgate.Test.Fail(3) failed: org.tunnelgate.Error.Nope: test peer: Fail fails")
        }
    }

    /// The calls of ResolvedClient as the other end reads them: the members
    /// and signatures of org.freedesktop.resolve1.Manager (SetLinkDNS ia(iay),
    /// SetLinkDomains ia(sb), SetLinkDefaultRoute ib, the string setters is,
    /// RevertLink i), AF_INET/AF_INET6 with 4 or 16 address bytes.
    func testResolvedClientCallsWhatResolve1Documents() throws {
        let linkPath = "/org/freedesktop/resolve1/link/_37"
        let servers: DBusValue = .array(element: "(iay)", [
            .structure([.int32(2), .bytes([10, 50, 0, 2])]),
            .structure([.int32(10), .bytes([0xfd, 0, 0, 0x50] + Array(repeating: 0, count: 11) + [2])]),
        ])
        let domains: DBusValue = .array(element: "(sb)", [
            .structure([.string("search.example"), .boolean(false)]),
            .structure([.string("corp.example"), .boolean(true)]),
        ])
        let peer = try TestPeer(address: daemon.address, name: ResolvedClient.service,
                                objects: [ResolvedClient.managerPath, linkPath],
                                replies: ["GetLink": [.objectPath(linkPath)],
                                          "Get DNS": [.variant(servers)], "Get Domains": [.variant(domains)],
                                          "Get DefaultRoute": [.variant(.boolean(false))]])
        defer { peer.close() }
        let client = ResolvedClient(bus: try SystemBus(address: daemon.address))
        let settings = ResolvedLinkSettings(DNSSettings(
            servers: [IPAddress("10.50.0.2")!, IPAddress("fd00:50::2")!], searchDomains: ["Search.Example."],
            matchDomains: ["corp.example"], matchDomainsNoSearch: true))
        try client.apply(settings, index: 7)
        try client.revert(index: 7)
        XCTAssertEqual(try client.settings(index: 7), settings)

        let manager = peer.calls.filter { $0.interface == ResolvedClient.manager }
        XCTAssertEqual(manager.map { "\($0.member) \($0.signature)" }, [
            "SetLinkDNS ia(iay)", "SetLinkDomains ia(sb)", "SetLinkDefaultRoute ib", "SetLinkLLMNR is",
            "SetLinkMulticastDNS is", "SetLinkDNSOverTLS is", "RevertLink i", "GetLink i",
        ])
        XCTAssertTrue(manager.allSatisfy { $0.path == ResolvedClient.managerPath && $0.arguments.first == .int32(7) })
        XCTAssertEqual(manager[0].arguments, [.int32(7), servers])
        XCTAssertEqual(manager[1].arguments, [.int32(7), domains])
        XCTAssertEqual(manager[2].arguments, [.int32(7), .boolean(false)])
        XCTAssertEqual(manager[3...5].map { $0.arguments[1] }, [.string("no"), .string("no"), .string("no")])
        let reads = peer.calls.filter { $0.interface == "org.freedesktop.DBus.Properties" }
        XCTAssertEqual(reads.map(\.path), [linkPath, linkPath, linkPath])
        XCTAssertEqual(reads.map(\.arguments), ["DNS", "Domains", "DefaultRoute"].map { [.string(ResolvedClient.link), .string($0)] })
    }

    func testResolvedOwnerIsPingedAndNamed() throws {
        let bus = try SystemBus(address: daemon.address)
        XCTAssertThrowsError(try ResolvedClient(bus: bus).owner()) { error in
            XCTAssertEqual((error as? SystemBusError)?.errorName, SystemBusError.serviceUnknown)
        }
        let peer = try TestPeer(address: daemon.address, name: ResolvedClient.service)
        defer { peer.close() }
        let owner = try ResolvedClient(bus: bus).owner()
        XCTAssertEqual(owner.name, peer.uniqueName)
        XCTAssertEqual(owner.pid, UInt32(getpid()))
    }

    func testAddressEscaping() {
        XCTAssertEqual(SystemBus.escaped("/run/dbus/system_bus_socket"), "/run/dbus/system_bus_socket")
        XCTAssertEqual(SystemBus.escaped("/tmp/a b,c=d;é"), "/tmp/a%20b%2cc%3dd%3b%c3%a9")
    }
}
