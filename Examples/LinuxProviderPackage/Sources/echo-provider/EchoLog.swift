import os.log

// os.log from a package of its own that depends on Tunnelgate by path (product NetworkExtension, which
// carries the os module): `import os.log` resolves across the package boundary. Not called by the echo
// provider; netns/tests/linux-provider-package.sh builds it, netns/tests/networkextension-os.sh runs a
// provider that logs with it.
let echoLog = Logger(subsystem: "com.example.echo", category: "provider")

func logEchoReply(to address: String, count: Int) {
    echoLog.debug("answered \(address, privacy: .public) (\(count) so far)")
    os_log("answered %{public}@", log: OSLog(subsystem: "com.example.echo", category: "legacy"), type: .debug, address)
}
