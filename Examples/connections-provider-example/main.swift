import Foundation
import NetworkExtension

// connections-provider-example [--name IFNAME] [--carrier ENDPOINT]... [--include-all-networks]: hosts
// ConnectionsTunnelProvider in this namespace until SIGTERM.
var configuration = TunnelgateHostConfiguration(interfaceName: "tgc")
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--name": configuration.interfaceName = arguments.popFirst() ?? ""
    case "--carrier": configuration.carrierEndpoints.append(arguments.popFirst() ?? "")
    case "--include-all-networks": configuration.includeAllNetworks = true
    default:
        FileHandle.standardError.write(Data("Error: unknown argument '\(argument)'\nusage: connections-provider-example [--name IFNAME] [--carrier ENDPOINT]... [--include-all-networks]\n".utf8))
        exit(64)
    }
}
let host: TunnelgateProviderHost
do {
    host = try TunnelgateProviderHost(configuration: configuration)
} catch {
    FileHandle.standardError.write(Data("connections-provider-example: \(error)\n".utf8))
    exit(1)
}
exit(host.run(ConnectionsTunnelProvider()))
