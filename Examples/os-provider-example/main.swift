import NetworkExtension
import os

// os-provider-example: hosts ConfigurationTunnelProvider with its configuration from a manager's
// handoff on descriptor 3 (TunnelgateHostConfiguration.fromManager()), until SIGTERM.
let host: TunnelgateProviderHost
do {
    host = try TunnelgateProviderHost(configuration: .fromManager())
} catch {
    Logger(subsystem: "com.example.tunnelgate.os", category: "main").fault("cannot host the provider: \(error.localizedDescription, privacy: .public)")
    exit(1)
}
exit(host.run(ConfigurationTunnelProvider()))
