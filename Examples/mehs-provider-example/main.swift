import Foundation
import NetworkExtension

// mehs-provider-example [--name IFNAME]
//
// Runs the MEHS guide's MehsPacketTunnelProvider in this network namespace until
// SIGTERM/SIGINT (or a stop on its control socket), then calls stopTunnel once
// and removes everything. The runtime's arguments and secret come from
// TG_MEHS_ARGS and TG_MEHS_SECRET_FILE, the server from TG_MEHS_SERVER.
var configuration = TunnelgateHostConfiguration()
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--name": configuration.interfaceName = arguments.popFirst() ?? ""
    default:
        FileHandle.standardError.write(Data("Error: unknown argument '\(argument)'\nusage: mehs-provider-example [--name IFNAME]\n".utf8))
        exit(64)
    }
}
let host: TunnelgateProviderHost
do {
    host = try TunnelgateProviderHost(configuration: configuration)
} catch {
    FileHandle.standardError.write(Data("mehs-provider-example: \(error)\n".utf8))
    exit(1)
}
exit(host.run(MehsPacketTunnelProvider()))
