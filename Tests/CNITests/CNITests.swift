@testable import CNI
import TunnelgateSettings
import XCTest

/// The CNI specification's types and the plugin's pure decisions: versions, the environment, the
/// network configuration, the choice of tunnel, names, results and errors. What needs the kernel
/// (ADD, DEL, CHECK against real namespaces and tunnels) is in netns/tests/cni-contract.sh and
/// cni-podman.sh.
final class CNITests: XCTestCase {
    func json(_ text: String) throws -> JSONValue { try JSONParser.parse(Array(text.utf8)) }

    func config(_ text: String) throws -> PluginConfiguration { try PluginConfiguration.parse(Array(text.utf8)) }

    func error<T>(_ body: () throws -> T) -> CNIError? {
        do { _ = try body(); return nil } catch { return error as? CNIError }
    }

    // MARK: Versions

    func testVersionsAreParsedAndOrdered() {
        XCTAssertEqual(CNIVersion("1.0.0"), CNIVersion(1, 0, 0))
        XCTAssertNil(CNIVersion("1.0"))
        XCTAssertNil(CNIVersion("1.0.0-rc1"))
        XCTAssertNil(CNIVersion("v1.0.0"))
        XCTAssertLessThan(CNIVersion(0, 4, 0), CNIVersion(1, 0, 0))
        XCTAssertLessThan(CNIVersion(0, 3, 1), CNIVersion(0, 4, 0))
        XCTAssertTrue(CNIVersion(0, 4, 0).hasCheck)
        XCTAssertFalse(CNIVersion(0, 3, 1).hasCheck)
        XCTAssertTrue(CNIVersion(0, 4, 0).ipsCarryVersion)
        XCTAssertFalse(CNIVersion(1, 0, 0).ipsCarryVersion)
    }

    func testVersionAnswersInTheVersionAsked() throws {
        let out = CNIPlugin().run(environment: ["CNI_COMMAND": "VERSION"], input: Array(#"{"cniVersion": "0.4.0"}"#.utf8))
        XCTAssertEqual(out.exitStatus, 0)
        let v = try json(out.standardOutput)
        XCTAssertEqual(v[member: "cniVersion"], .string("0.4.0"))
        XCTAssertEqual(v[member: "supportedVersions"], .array(["0.3.0", "0.3.1", "0.4.0", "1.0.0"].map { .string($0) }))
        // No input at all (some runtimes send nothing): the latest.
        let bare = CNIPlugin().run(environment: ["CNI_COMMAND": "VERSION"], input: [])
        XCTAssertEqual(try json(bare.standardOutput)[member: "cniVersion"], .string("1.0.0"))
    }

    func testAnUnsupportedVersionIsCode1() {
        XCTAssertEqual(error { try config(#"{"cniVersion": "0.2.0", "name": "n"}"#) }?.code, 1)
        XCTAssertEqual(error { try config(#"{"cniVersion": "2.0.0", "name": "n"}"#) }?.code, 1)
        XCTAssertEqual(error { try config(#"{"name": "n"}"#) }?.code, 1)
    }

    // MARK: Environment

    let addEnvironment = ["CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c0ffee", "CNI_NETNS": "/run/netns/x", "CNI_IFNAME": "eth0",
                          "CNI_PATH": "/opt/cni/bin", "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0"]

    func testTheEnvironmentIsRead() throws {
        let inv = try CNIInvocation.parse(addEnvironment)
        XCTAssertEqual(inv.command, .add)
        XCTAssertEqual(inv.containerID, "c0ffee")
        XCTAssertEqual(inv.netns, "/run/netns/x")
        XCTAssertEqual(inv.ifname, "eth0")
        XCTAssertEqual(inv.argument("K8S_POD_NAME"), "web-0")
        XCTAssertEqual(inv.argument("IgnoreUnknown"), "1")
        XCTAssertNil(inv.argument("K8S_POD_UID"))
    }

    func testEveryInvalidVariableIsNamedInOneCode4Error() {
        var env = addEnvironment
        env["CNI_CONTAINERID"] = "-bad"
        env["CNI_IFNAME"] = "an-interface-name-too-long"
        env["CNI_NETNS"] = "relative/path"
        env["CNI_ARGS"] = "IgnoreUnknown=1;garbage"
        let e = error { try CNIInvocation.parse(env) }
        XCTAssertEqual(e?.code, 4)
        for name in ["CNI_CONTAINERID", "CNI_IFNAME", "CNI_NETNS", "CNI_ARGS"] {
            XCTAssertTrue(e?.message.contains(name) == true, "\(name) in \(e?.message ?? "")")
        }
        XCTAssertEqual(error { try CNIInvocation.parse(["CNI_COMMAND": "GC"]) }?.code, 4)
        XCTAssertEqual(error { try CNIInvocation.parse([:]) }?.code, 4)
    }

    func testDelMayComeWithoutANamespace() throws {
        var env = addEnvironment
        env["CNI_COMMAND"] = "DEL"
        env["CNI_NETNS"] = ""
        XCTAssertNil(try CNIInvocation.parse(env).netns)
        env["CNI_COMMAND"] = "CHECK"
        XCTAssertEqual(error { try CNIInvocation.parse(env) }?.code, 4)
    }

    // MARK: The network configuration

    func testTheTunnelIsNamedFourWays() throws {
        XCTAssertEqual(try config(#"{"cniVersion": "1.0.0", "name": "n", "tunnel": "corp"}"#).tunnel, .configured("corp"))
        XCTAssertEqual(try config(#"{"cniVersion": "1.0.0", "name": "n", "tunnel": {"name": "corp"}}"#).tunnel, .configured("corp"))
        XCTAssertEqual(try config(#"{"cniVersion": "1.0.0", "name": "n", "tunnel": {"path": "/etc/wg/wg0.conf"}}"#).tunnel,
                       .path("/etc/wg/wg0.conf"))
        XCTAssertEqual(try config(#"{"cniVersion": "1.0.0", "name": "n", "tunnel": {"podName": true}}"#).tunnel, .podName)
        let inline = try config(#"{"cniVersion": "1.0.0", "name": "n", "tunnel": {"settings": {"mtu": 1400}}}"#)
        XCTAssertEqual(inline.tunnel, .settings(try json(#"{"mtu": 1400}"#)))
        XCTAssertNil(try config(#"{"cniVersion": "1.0.0", "name": "n"}"#).tunnel)
    }

    func testAWrongTunnelIsRefusedWithItsKey() {
        let both = error { try config(#"{"cniVersion": "1.0.0", "name": "n", "tunnel": {"name": "a", "path": "/b"}}"#) }
        XCTAssertEqual(both?.code, 7)
        XCTAssertEqual(error { try config(#"{"cniVersion": "1.0.0", "name": "n", "tunnel": {}}"#) }?.code, 7)
        let traversal = error { try config(#"{"cniVersion": "1.0.0", "name": "n", "tunnel": "../../etc/shadow"}"#) }
        XCTAssertEqual(traversal?.code, 7)
        XCTAssertTrue(traversal?.message.contains("tunnel") == true)
        XCTAssertEqual(error { try config(#"{"cniVersion": "1.0.0", "name": "n", "tunnel": {"path": "relative.conf"}}"#) }?.code, 7)
        let unknown = error { try config(#"{"cniVersion": "1.0.0", "name": "n", "tunnel": {"nmae": "a"}}"#) }
        XCTAssertEqual(unknown?.code, 2)
        XCTAssertTrue(unknown?.message.contains("tunnel.nmae") == true)
        XCTAssertTrue(unknown?.message.contains("\"a\"") == true, "the value is named: \(unknown?.message ?? "")")
        XCTAssertEqual(error { try config(#"{"cniVersion": "1.0.0", "name": "n", "mode": "gateway"}"#) }?.code, 2)
        XCTAssertEqual(error { try config(#"{"cniVersion": "1.0.0", "name": "n", "timeoutSeconds": 0}"#) }?.code, 7)
    }

    func testUnknownKeysAreCode2ButTheSpecificationsAreAccepted() throws {
        let e = error { try config(#"{"cniVersion": "1.0.0", "name": "n", "tunel": "corp"}"#) }
        XCTAssertEqual(e?.code, 2)
        XCTAssertTrue(e?.message.contains("tunel") == true)
        _ = try config(#"{"cniVersion": "1.0.0", "name": "n", "type": "tunnelgate-cni", "args": {}, "dns": {}, "ipam": {},"#
                       + #" "capabilities": {"io.kubernetes.cri.pod-annotations": true}, "cni.dev/foo": 1}"#)
    }

    func testTheValueOfAFieldNamedLikeASecretIsNotShown() {
        let e = error { try config(#"{"cniVersion": "1.0.0", "name": "n", "privateKey": "oKeutbzDytHY3+bt9PsCCRAXHiUsMzpBSE9WXWRrcnk="}"#) }
        XCTAssertEqual(e?.code, 2)
        XCTAssertTrue(e?.message.contains("privateKey") == true)
        XCTAssertFalse(e?.json(cniVersion: "1.0.0").contains("oKeutbz") == true)
    }

    func testNotJSONIsCode6() {
        XCTAssertEqual(error { try config("{cniVersion") }?.code, 6)
        XCTAssertEqual(error { try config("[]") }?.code, 6)
    }

    // MARK: Which tunnel

    func testTheAnnotationThenTheArgumentThenTheNetworkChoose() throws {
        let network = #"{"cniVersion": "1.0.0", "name": "n", "tunnel": "corp""#
        var env = addEnvironment
        let plain = try config(network + "}")
        XCTAssertEqual(try TunnelSelection.select(plain, CNIInvocation.parse(env))?.source, .configured("corp"))
        env["CNI_ARGS"] = "IgnoreUnknown=1;TUNNELGATE_TUNNEL=eu"
        XCTAssertEqual(try TunnelSelection.select(plain, CNIInvocation.parse(env))?.source, .configured("eu"))
        let annotated = try config(network + #", "runtimeConfig": {"io.kubernetes.cri.pod-annotations": {"tunnelgate.io/tunnel": "us"}}}"#)
        XCTAssertEqual(try TunnelSelection.select(annotated, CNIInvocation.parse(env))?.source, .configured("us"))
        // A pod cannot name a path, nor escape the network's tunnel with an empty name.
        let sneaky = try config(network + #", "runtimeConfig": {"io.kubernetes.cri.pod-annotations": {"tunnelgate.io/tunnel": "/etc/x"}}}"#)
        XCTAssertEqual(error { try TunnelSelection.select(sneaky, CNIInvocation.parse(env)) }?.code, 7)
        let empty = try config(network + #", "runtimeConfig": {"io.kubernetes.cri.pod-annotations": {"tunnelgate.io/tunnel": ""}}}"#)
        XCTAssertEqual(error { try TunnelSelection.select(empty, CNIInvocation.parse(env)) }?.code, 7)
    }

    func testWithoutATunnelNamedTheContainerIsLeftAlone() throws {
        let c = try config(#"{"cniVersion": "1.0.0", "name": "n", "runtimeConfig": {"io.kubernetes.cri.pod-annotations": {"other": "x"}}}"#)
        XCTAssertNil(try TunnelSelection.select(c, CNIInvocation.parse(addEnvironment)))
    }

    func testThePodNameNamesTheTunnel() throws {
        let c = try config(#"{"cniVersion": "1.0.0", "name": "n", "tunnel": {"podName": true}}"#)
        XCTAssertEqual(try TunnelSelection.select(c, CNIInvocation.parse(addEnvironment))?.source, .configured("web-0"))
        var env = addEnvironment
        env["CNI_ARGS"] = "IgnoreUnknown=1"
        XCTAssertEqual(error { try TunnelSelection.select(c, CNIInvocation.parse(env)) }?.code, 4)
    }

    // MARK: Names

    func testNamesAreStableShortAndDistinct() {
        let a = AttachmentName(network: "vpn", containerID: "c0ffee", ifname: "eth0")
        XCTAssertEqual(a, AttachmentName(network: "vpn", containerID: "c0ffee", ifname: "eth0"))
        XCTAssertEqual(a.tunnel.utf8.count, 15)
        XCTAssertNil(InterfaceName.problem(a.tunnel))
        XCTAssertTrue(a.tunnel.hasPrefix("tgc"))
        XCTAssertEqual(a.namespace, "tgcni-" + a.tunnel)
        var seen: Set<String> = [a.tunnel]
        for other in [AttachmentName(network: "vpn", containerID: "c0ffee", ifname: "eth1"),
                      AttachmentName(network: "vpn2", containerID: "c0ffee", ifname: "eth0"),
                      AttachmentName(network: "vpn", containerID: "c0ffef", ifname: "eth0"),
                      // The separator keeps "ab"+"c" and "a"+"bc" apart.
                      AttachmentName(network: "vp", containerID: "nc0ffee", ifname: "eth0")] {
            XCTAssertTrue(seen.insert(other.tunnel).inserted, other.tunnel)
        }
        // A thousand containers of one network: no two alike.
        let many = Set((0..<1000).map { AttachmentName(network: "vpn", containerID: "container-\($0)", ifname: "eth0").tunnel })
        XCTAssertEqual(many.count, 1000)
    }

    // MARK: Results

    /// The bridge's result from the specification's ADD example.
    let bridgeResult = """
    {"cniVersion": "1.0.0",
     "ips": [{"address": "10.1.0.5/16", "gateway": "10.1.0.1", "interface": 2}],
     "routes": [{"dst": "0.0.0.0/0"}],
     "interfaces": [{"name": "cni0", "mac": "00:11:22:33:44:55"}, {"name": "veth3243", "mac": "55:44:33:22:11:11"},
                    {"name": "eth0", "mac": "99:88:77:66:55:44", "sandbox": "/var/run/netns/blue"}],
     "dns": {"nameservers": ["10.1.0.1"]}}
    """

    func testTheResultIsThePreviousOneWithTheTunnelAdded() throws {
        let result = CNIResult.adding(tunnel: "tgc0123456789ab", addresses: ["10.8.0.2/24", "fd00:8::2/64"],
                                      dns: ResolverSettings(nameservers: ["10.8.0.1"], search: ["corp.example"]),
                                      sandbox: "/var/run/netns/blue", to: try json(bridgeResult),
                                      version: CNIVersion(1, 0, 0), versionText: "1.0.0")
        let expected = try json("""
        {"cniVersion": "1.0.0",
         "ips": [{"address": "10.1.0.5/16", "gateway": "10.1.0.1", "interface": 2},
                 {"interface": 3, "address": "10.8.0.2/24"}, {"interface": 3, "address": "fd00:8::2/64"}],
         "routes": [{"dst": "0.0.0.0/0"}],
         "interfaces": [{"name": "cni0", "mac": "00:11:22:33:44:55"}, {"name": "veth3243", "mac": "55:44:33:22:11:11"},
                        {"name": "eth0", "mac": "99:88:77:66:55:44", "sandbox": "/var/run/netns/blue"},
                        {"name": "tgc0123456789ab", "mac": "00:00:00:00:00:00", "sandbox": "/var/run/netns/blue"}],
         "dns": {"nameservers": ["10.8.0.1"], "search": ["corp.example"]}}
        """)
        XCTAssertEqual(result, expected)
        XCTAssertEqual(CNIResult.interfaces(of: result, in: "/var/run/netns/blue"), ["eth0", "tgc0123456789ab"])
    }

    func testBefore100IPsSayTheirVersion() throws {
        let result = CNIResult.adding(tunnel: "tgc0", addresses: ["10.8.0.2/24", "fd00:8::2/64"], dns: nil, sandbox: "/run/netns/x",
                                      to: nil, version: CNIVersion(0, 4, 0), versionText: "0.4.0")
        guard case .array(let ips)? = result[member: "ips"] else { return XCTFail("no ips") }
        XCTAssertEqual(ips.map { $0[member: "version"] }, [.string("4"), .string("6")])
        XCTAssertEqual(ips.map { $0[member: "interface"] }, [.integer(0), .integer(0)])
        XCTAssertEqual(result[member: "cniVersion"], .string("0.4.0"))
        // Without DNS of its own, the tunnel leaves dns alone (here: none).
        XCTAssertNil(result[member: "dns"])
    }

    func testTheResultKeepsKeyOrderAndUnknownFields() throws {
        let prev = try json(#"{"cniVersion": "1.0.0", "zeta": {"b": 1, "a": [1.50, "x"]}, "interfaces": []}"#)
        let text = CNIResult.adding(tunnel: "t", addresses: [], dns: nil, sandbox: "/s", to: prev,
                                    version: CNIVersion(1, 0, 0), versionText: "1.0.0").serialized()
        XCTAssertEqual(text, #"{"cniVersion":"1.0.0","zeta":{"b":1,"a":[1.50,"x"]},"interfaces":[{"name":"t","mac":"00:00:00:00:00:00","sandbox":"/s"}],"ips":[]}"#)
    }

    func testResolvConfLines() {
        let r = ResolverSettings(resolvConf: "# comment\nnameserver 10.8.0.1\nnameserver fd00:8::1\nsearch a.example b.example\noptions ndots:2\n")
        XCTAssertEqual(r.nameservers, ["10.8.0.1", "fd00:8::1"])
        XCTAssertEqual(r.search, ["a.example", "b.example"])
    }

    // MARK: Errors

    func testTheErrorResultHasTheSpecificationsKeys() throws {
        let e = CNIError(.invalidConfiguration, "Invalid Configuration", details: "Network 192.168.0.0/31 too small to allocate from.")
        let v = try json(e.json(cniVersion: "1.0.0"))
        XCTAssertEqual(v, try json(#"{"cniVersion": "1.0.0", "code": 7, "msg": "Invalid Configuration", "#
                                   + #""details": "Network 192.168.0.0/31 too small to allocate from."}"#))
    }

    func testTheStatusReportSaysWhatIsWrong() throws {
        let up = try TunnelStatusReport(json: """
        {"status": "connected", "pid": 42, "interface": "tgc1", "interfaceIndex": 7, "addresses": ["10.8.0.2/24"],
         "killSwitch": true, "firewall": "as planned", "residue": false, "dns": "netns resolv.conf (/etc/netns/netns-1/resolv.conf)"}
        """)
        XCTAssertNil(up.problem())
        XCTAssertEqual(up.resolvConfPath, "/etc/netns/netns-1/resolv.conf")
        XCTAssertFalse(up.isGone)
        var tampered = up
        tampered.killSwitch = false
        tampered.firewall = "tampered with"
        XCTAssertEqual(tampered.problem()?.transient, false)
        var reasserting = up
        reasserting.status = "reasserting"
        XCTAssertEqual(reasserting.problem()?.transient, true)
        let gone = try TunnelStatusReport(json: #"{"status": "disconnected", "residue": false, "killSwitch": false}"#)
        XCTAssertTrue(gone.isGone)
        XCTAssertEqual(gone.problem()?.transient, false)
        let dead = try TunnelStatusReport(json: #"{"status": "disconnected", "residue": true, "killSwitch": true, "firewall": "as planned"}"#)
        XCTAssertFalse(dead.isGone)
        XCTAssertNil(try TunnelStatusReport(json: #"{"status": "x", "dns": "netns resolv.conf (/etc/netns/../../etc/resolv.conf)"}"#).resolvConfPath)
    }
}
