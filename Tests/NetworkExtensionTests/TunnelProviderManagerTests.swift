import CTunnelgateShims
import Foundation
import Glibc
import LinuxSystem
@testable import NetworkExtension
import XCTest

/// The manager side without root: preferences in a temporary file, errors, status from an empty state
/// directory, notifications, and the configuration a manager hands the provider host (a sealed file, not the environment). Starting a real
/// provider host is netns/tests/networkextension-manager.sh.
final class TunnelProviderManagerTests: XCTestCase {
    var directory = ""
    /// A tunnel name no test run uses for a real tunnel: its state file never exists.
    let tunnelName = "tgut\(getpid() % 10000)"

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "tunnelgate-manager-tests-\(getpid())-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        NEVPNManager.tunnelgateSetPreferencesPath(directory + "/preferences.json")
    }

    override func tearDown() {
        NEVPNManager.tunnelgateSetPreferencesPath(nil)
        try? FileManager.default.removeItem(atPath: directory)
    }

    func configured(_ executable: String = "/bin/true") -> NETunnelProviderManager {
        let m = NETunnelProviderManager()
        let p = NETunnelProviderProtocol()
        p.providerBundleIdentifier = executable
        p.serverAddress = "198.18.0.10"
        p.providerConfiguration = ["mtu": 1400, "peers": ["a", "b"], "nested": ["on": true]]
        p.tunnelgateInterfaceName = tunnelName
        p.tunnelgateArguments = ["--provider", "counting"]
        p.includeAllNetworks = true
        m.protocolConfiguration = p
        m.localizedDescription = "Test VPN"
        m.isEnabled = true
        return m
    }

    func testNothingSavedLoadsEmpty() async throws {
        let all = try await NETunnelProviderManager.loadAllFromPreferences()
        XCTAssertTrue(all.isEmpty)
    }

    func testSaveAndLoadAllRoundTrip() async throws {
        let first = configured()
        try await first.saveToPreferences()
        let second = configured("/bin/false")
        second.isEnabled = false
        try await second.saveToPreferences()
        // Saving again replaces, it does not add.
        first.localizedDescription = "Renamed"
        try await first.saveToPreferences()

        let all = try await NETunnelProviderManager.loadAllFromPreferences()
        XCTAssertEqual(all.count, 2)
        XCTAssertEqual(all.map(\.localizedDescription), ["Renamed", "Test VPN"])
        XCTAssertEqual(all.map(\.isEnabled), [true, false])
        let p = try XCTUnwrap(all[0].protocolConfiguration as? NETunnelProviderProtocol)
        XCTAssertEqual(p.providerBundleIdentifier, "/bin/true")
        XCTAssertEqual(p.serverAddress, "198.18.0.10")
        XCTAssertEqual(p.tunnelgateInterfaceName, tunnelName)
        XCTAssertEqual(p.tunnelgateArguments, ["--provider", "counting"])
        XCTAssertTrue(p.includeAllNetworks)
        XCTAssertFalse(p.excludeLocalNetworks)
        XCTAssertEqual(p.providerConfiguration?["mtu"] as? Int, 1400)
        XCTAssertEqual(p.providerConfiguration?["peers"] as? [String], ["a", "b"])
        XCTAssertEqual((p.providerConfiguration?["nested"] as? [String: Any])?["on"] as? Bool, true)
        // Managers are new objects on each load, as on iOS.
        XCTAssertFalse(all[0] === first)
    }

    func testLoadFromPreferencesReplacesUnsavedChanges() async throws {
        let m = configured()
        try await m.saveToPreferences()
        m.localizedDescription = "unsaved"
        m.isEnabled = false
        try await m.loadFromPreferences()
        XCTAssertEqual(m.localizedDescription, "Test VPN")
        XCTAssertTrue(m.isEnabled)
    }

    func testSaveWithoutProtocolIsInvalid() async {
        let m = NETunnelProviderManager()
        do {
            try await m.saveToPreferences()
            XCTFail("saved without a protocolConfiguration")
        } catch NEVPNError.configurationInvalid {
            // Apple's code in Apple's domain.
        } catch {
            XCTFail("unexpected \(error)")
        }
    }

    func testProviderConfigurationMustBeAPropertyList() async {
        let m = configured()
        // A Date is a property-list value and is saved (ProtocolConfigurationTests); a URL is not.
        (m.protocolConfiguration as? NETunnelProviderProtocol)?.providerConfiguration = ["url": URL(string: "https://198.18.0.1/")!]
        do {
            try await m.saveToPreferences()
            XCTFail("saved a configuration a property list cannot hold")
        } catch {
            let e = error as NSError
            XCTAssertEqual(e.domain, NEVPNErrorDomain)
            XCTAssertEqual(e.code, NEVPNError.Code.configurationInvalid.rawValue)
            XCTAssertTrue(e.localizedDescription.contains("providerConfiguration"), e.localizedDescription)
        }
    }

    func testAnUnreadablePreferencesFileFails() async throws {
        try Data("not json".utf8).write(to: URL(fileURLWithPath: directory + "/preferences.json"))
        do {
            _ = try await NETunnelProviderManager.loadAllFromPreferences()
            XCTFail("loaded garbage")
        } catch NEVPNError.configurationReadWriteFailed {
        } catch {
            XCTFail("unexpected \(error)")
        }
    }

    func testStatusInvalidUntilSavedThenDisconnectedWithANotification() async throws {
        let m = configured()
        let connection = m.connection
        XCTAssertTrue(connection is NETunnelProviderSession, "an NETunnelProviderManager's connection is a session")
        XCTAssertEqual(connection.status, .invalid)
        let changed = expectation(forNotification: .NEVPNStatusDidChange, object: connection) { _ in
            connection.status == .disconnected
        }
        try await m.saveToPreferences()
        await fulfillment(of: [changed], timeout: 5)
        XCTAssertEqual(connection.status, .disconnected)
        XCTAssertNil(connection.connectedDate)

        let removed = expectation(forNotification: .NEVPNStatusDidChange, object: connection) { _ in
            connection.status == .invalid
        }
        try await m.removeFromPreferences()
        await fulfillment(of: [removed], timeout: 5)
        let all = try await NETunnelProviderManager.loadAllFromPreferences()
        XCTAssertTrue(all.isEmpty)
    }

    func testConnectionOutlivesItsManager() async throws {
        var m: NETunnelProviderManager? = configured()
        try await m!.saveToPreferences()
        let connection = m!.connection
        m = nil
        // Still the saved configuration: disconnected, not invalid; a start is checked against it.
        XCTAssertEqual(connection.status, .disconnected)
        XCTAssertThrowsError(try (connection as! NETunnelProviderSession).sendProviderMessage(Data("x".utf8)))
    }

    func testStartRefusals() async throws {
        // Not saved: invalid.
        XCTAssertThrowsError(try configured().connection.startVPNTunnel()) { error in
            XCTAssertEqual((error as? NEVPNError)?.code, .configurationInvalid)
        }
        // Saved but disabled.
        let disabled = configured()
        disabled.isEnabled = false
        try await disabled.saveToPreferences()
        XCTAssertThrowsError(try disabled.connection.startVPNTunnel()) { error in
            XCTAssertEqual((error as? NEVPNError)?.code, .configurationDisabled)
        }
        // No executable at providerBundleIdentifier.
        let missing = configured(directory + "/no-such-host")
        try await missing.saveToPreferences()
        XCTAssertThrowsError(try missing.connection.startVPNTunnel()) { error in
            XCTAssertEqual((error as? NEVPNError)?.code, .configurationInvalid)
            XCTAssertTrue("\(error)".contains("no-such-host"), "\(error)")
        }
        XCTAssertEqual(missing.connection.status, .disconnected)
    }

    func testSendProviderMessageThrowsWhenNotConnected() async throws {
        let m = configured()
        try await m.saveToPreferences()
        let session = try XCTUnwrap(m.connection as? NETunnelProviderSession)
        XCTAssertThrowsError(try session.sendProviderMessage(Data("hello".utf8)) { _ in XCTFail("no reply expected") }) { error in
            XCTAssertEqual((error as NSError).domain, NEVPNErrorDomain)
            XCTAssertEqual((error as? NEVPNError)?.code, .connectionFailed)
        }
    }

    func testStopWhenNothingRunsStaysDisconnected() async throws {
        let m = configured()
        try await m.saveToPreferences()
        m.connection.stopVPNTunnel()
        XCTAssertEqual(m.connection.status, .disconnected)
    }

    /// The manager's handoff to the host: a sealed memfd, read whole and closed by the host; anything
    /// else at that descriptor (a file, an unsealed memfd) is not taken, and left open.
    func testHostHandoffThroughASealedFile() throws {
        let json = NEVPNConnection.encodeOptions(["user": NSString(string: "alice"), "retries": NSNumber(value: 3)])
        XCTAssertEqual(json, #"{"retries":3,"user":"alice"}"#)
        let handoff = TunnelgateHostHandoff(
            configuration: TunnelgateHostConfiguration(interfaceName: "tgx", includeAllNetworks: true),
            serverAddress: "198.18.0.10", providerConfigurationJSON: #"{"mtu":1400,"token":"s3cret"}"#, startOptionsJSON: json)
        let fd = try handoff.makeDescriptor()
        XCTAssertEqual(fd.rawValue >= 0, true)
        // Sealed: nobody, not even its maker, can change it.
        XCTAssertThrowsError(try fd.writeAll([0x20]))
        let taken = try XCTUnwrap(TunnelgateHostHandoff.take(from: fd))
        XCTAssertEqual(taken.configuration.interfaceName, "tgx")
        XCTAssertTrue(taken.configuration.includeAllNetworks)
        XCTAssertFalse(taken.configuration.excludeLocalNetworks)
        XCTAssertEqual(taken.serverAddress, "198.18.0.10")
        XCTAssertEqual(taken.providerConfiguration?["mtu"] as? Int, 1400)
        XCTAssertEqual(taken.startOptions?["user"] as? NSString, "alice")
        XCTAssertEqual((taken.startOptions?["retries"] as? NSNumber)?.intValue, 3)
        XCTAssertEqual(fcntl(fd.rawValue, F_GETFD), -1, "the host closed the descriptor once read")

        // A regular file with the same JSON is not a handoff (anyone who can open a file could plant one).
        let path = NSTemporaryDirectory() + "handoff-\(getpid()).json"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(handoff.encoded())))
        defer { unlink(path) }
        let plain = open(path, O_RDONLY | O_CLOEXEC)
        XCTAssertNil(TunnelgateHostHandoff.take(from: FileDescriptor(rawValue: plain)))
        XCTAssertNotEqual(fcntl(plain, F_GETFD), -1, "not ours: left open")
        close(plain)
        // Nor is an unsealed memfd of that name.
        let unsealed = CTunnelgateShims_memfd_create(TunnelgateHostHandoff.fileName)
        _ = handoff.encoded().withUnsafeBytes { write(unsealed, $0.baseAddress, $0.count) }
        XCTAssertNil(TunnelgateHostHandoff.take(from: FileDescriptor(rawValue: unsealed)))
        close(unsealed)
    }
}
