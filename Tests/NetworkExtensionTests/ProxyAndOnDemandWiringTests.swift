import Foundation
import Glibc
@testable import NetworkExtension
import TunnelgateSettings
import XCTest

/// Issue 18's wiring: a provider's proxySettings through the channel and the translation (checked by
/// key path with the rest, no credential crossing), what `tunnelgate down` changes in the preferences
/// (on-demand off for that tunnel only, nothing written when nothing changes), and the watcher's
/// interface types.
final class ProxyAndOnDemandWiringTests: XCTestCase {
    func packetSettings(proxyPort: Int) -> NEPacketTunnelNetworkSettings {
        let s = NEPacketTunnelNetworkSettings(tunnelRemoteAddress: "198.18.0.10")
        s.ipv4Settings = NEIPv4Settings(addresses: ["10.8.0.2"], subnetMasks: ["255.255.255.0"])
        let proxy = NEProxySettings()
        let server = NEProxyServer(address: "198.18.0.30", port: proxyPort)
        server.authenticationRequired = true
        server.username = "alice"
        server.password = "hunter2-secret"
        proxy.httpEnabled = true
        proxy.httpServer = server
        proxy.exceptionList = ["*.internal.example"]
        s.proxySettings = proxy
        return s
    }

    func testProxySettingsBecomeTheModelsFiles() throws {
        let model = try packetSettings(proxyPort: 3128).tunnelgateSettings()
        let proxy = try XCTUnwrap(model.proxy)
        XCTAssertEqual(proxy.environment, "http_proxy=http://198.18.0.30:3128\nno_proxy=.internal.example\nNO_PROXY=.internal.example\n")
        XCTAssertTrue(try XCTUnwrap(proxy.pac).contains("FindProxyForURL"))
        XCTAssertTrue(proxy.notes.contains { $0.contains("requires authentication") }, "\(proxy.notes)")
        for text in [proxy.environment ?? "", proxy.pac ?? ""] + proxy.notes {
            XCTAssertFalse(text.contains("hunter2"))
            XCTAssertFalse(text.contains("alice"))
        }
        let without = NEPacketTunnelNetworkSettings(tunnelRemoteAddress: "198.18.0.10")
        XCTAssertNil(try without.tunnelgateSettings().proxy)
    }

    func testBadProxyIsRefusedByKeyPathWithTheOtherProblems() {
        let s = packetSettings(proxyPort: 0)
        s.ipv4Settings = NEIPv4Settings(addresses: ["10.8.0.300"], subnetMasks: ["255.255.255.0"])
        XCTAssertThrowsError(try s.tunnelgateSettings()) { error in
            let lines = "\(error)".split(separator: "\n").map(String.init)
            XCTAssertTrue(lines.contains { $0.hasPrefix("ipv4Settings.addresses[0]: ") }, "\(lines)")
            XCTAssertTrue(lines.contains("proxySettings.httpServer.port: 0 is not a port (1-65535)"), "\(lines)")
            XCTAssertFalse("\(error)".contains("hunter2"))
        }
        // The proxy alone wrong: refused too, nothing else to say.
        XCTAssertThrowsError(try packetSettings(proxyPort: 70000).tunnelgateSettings()) { error in
            XCTAssertEqual("\(error)", "proxySettings.httpServer.port: 70000 is not a port (1-65535)")
        }
    }

    func testProxyCrossesTheChannelWithoutCredentials() throws {
        let wire = NetworkSettingsWire(packetSettings(proxyPort: 3128))
        let json = String(decoding: try JSONEncoder().encode(wire), as: UTF8.self)
        XCTAssertFalse(json.contains("hunter2"), json)
        XCTAssertFalse(json.contains("alice"), json)
        let back = try JSONDecoder().decode(NetworkSettingsWire.self, from: Data(json.utf8)).settings
        let proxy = try XCTUnwrap(back.proxySettings)
        XCTAssertEqual(proxy.httpServer?.address, "198.18.0.30")
        XCTAssertEqual(proxy.httpServer?.port, 3128)
        XCTAssertEqual(proxy.httpServer?.authenticationRequired, true)
        XCTAssertNil(proxy.httpServer?.password)
        XCTAssertEqual(proxy.exceptionList, ["*.internal.example"])
        // The engine's translation of what crossed gives the same files as the provider's objects.
        XCTAssertEqual(try back.tunnelgateSettings().proxy, try packetSettings(proxyPort: 3128).tunnelgateSettings().proxy)
    }

    // MARK: The user's disconnect

    var directory = ""
    var file: String { directory + "/preferences.json" }

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "tunnelgate-ondemand-wiring-\(getpid())-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        NEVPNManager.tunnelgateSetPreferencesPath(file)
    }

    override func tearDown() {
        NEVPNManager.tunnelgateSetPreferencesPath(nil)
        try? FileManager.default.removeItem(atPath: directory)
    }

    func save(_ name: String, onDemand: Bool) throws {
        let m = NETunnelProviderManager()
        let p = NETunnelProviderProtocol()
        p.providerBundleIdentifier = "/usr/bin/true"
        p.tunnelgateInterfaceName = name
        m.protocolConfiguration = p
        m.localizedDescription = "VPN \(name)"
        m.isEnabled = true
        m.isOnDemandEnabled = onDemand
        m.onDemandRules = [NEOnDemandRuleConnect()]
        try m.saveToPreferencesNow()
    }

    func onDemand() throws -> [String: Bool] {
        var out: [String: Bool] = [:]
        for m in try NETunnelProviderManager.loadAllFromPreferencesNow() {
            out[(m.protocolConfiguration as? NETunnelProviderProtocol)?.tunnelgateInterfaceName ?? "?"] = m.isOnDemandEnabled
        }
        return out
    }

    func testUserDisconnectTurnsOnDemandOffForThatTunnelOnly() throws {
        XCTAssertEqual(try TunnelgateOnDemandWatcher.userDisconnected(name: "tg5"), [])
        XCTAssertFalse(FileManager.default.fileExists(atPath: file), "no preferences file is made when there is nothing to change")
        try save("tg5", onDemand: true)
        try save("tg6", onDemand: true)
        try save("tg7", onDemand: false)
        let before = try Data(contentsOf: URL(fileURLWithPath: file))
        XCTAssertEqual(try TunnelgateOnDemandWatcher.userDisconnected(name: "tg7"), [], "tg7 has on demand off already")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: file)), before, "nothing changed: the file is not rewritten")
        XCTAssertEqual(try TunnelgateOnDemandWatcher.userDisconnected(name: "tg5"), ["VPN tg5"])
        XCTAssertEqual(try onDemand(), ["tg5": false, "tg6": true, "tg7": false])
        XCTAssertEqual(try TunnelgateOnDemandWatcher.userDisconnected(name: "tg5"), [], "a second down changes nothing")
    }

    func testInterfaceTypesFromTheLinkKind() {
        // A name sysfs does not show: judged by the link's kind.
        func type(_ kind: String?) -> TunnelgateOnDemand.Network.InterfaceType {
            TunnelgateOnDemandWatcher.interfaceType(name: "tgnone\(getpid())", index: 999_999, kind: kind)
        }
        XCTAssertEqual(type(nil), .wired)
        XCTAssertEqual(type("veth"), .wired)
        XCTAssertEqual(type("bridge"), .other)
        XCTAssertEqual(type("tun"), .other)
        XCTAssertEqual(type("wireguard"), .other)
        // lo, as sysfs shows it here (ARPHRD_LOOPBACK, not Ethernet): other.
        XCTAssertEqual(TunnelgateOnDemandWatcher.interfaceType(name: "lo", index: 1, kind: nil), .other)
    }
}
