import NetworkExtension

// echo-provider: hosts EchoTunnelProvider in this network namespace until SIGTERM (or the control
// socket's `stop`: `tunnelgate down NAME`, NEVPNConnection.stopVPNTunnel()). The interface name and
// options come from what a manager's startVPNTunnel hands over on descriptor 3 (default tg0), so this
// executable can be an NETunnelProviderProtocol's providerBundleIdentifier as it is.

let host: TunnelgateProviderHost
do {
    // First: the host blocks the termination signals before anything starts a thread.
    host = try TunnelgateProviderHost(configuration: .fromManager())
} catch {
    FileHandle.standardError.write(Data("echo-provider: \(error)\n".utf8))
    exit(1)
}
exit(host.run(EchoTunnelProvider(), options: TunnelgateHostConfiguration.startOptionsFromManager()))
