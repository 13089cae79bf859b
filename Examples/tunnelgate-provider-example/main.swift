import Foundation
import NetworkExtension

// tunnelgate-provider-example [--provider counting|seed] [--name IFNAME] [--carrier ENDPOINT]... [--include-all-networks]
//                             [--start-timeout SECONDS]
//
// Runs one NEPacketTunnelProvider in this network namespace until SIGTERM/SIGINT
// (or `tunnelgate down IFNAME`), then calls its stopTunnel once and removes
// everything. Exit status 0 after a clean stop, 1 when start or teardown failed.

let usage = "usage: tunnelgate-provider-example [--provider counting|seed] [--name IFNAME] [--carrier ENDPOINT]... [--include-all-networks] [--start-timeout SECONDS]"
var providerName = "counting"
var configuration = TunnelgateHostConfiguration()
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--provider": providerName = arguments.popFirst() ?? ""
    case "--name": configuration.interfaceName = arguments.popFirst() ?? ""
    case "--carrier": configuration.carrierEndpoints.append(arguments.popFirst() ?? "")
    case "--include-all-networks": configuration.includeAllNetworks = true  // the kill switch
    case "--start-timeout":
        let text = arguments.popFirst() ?? ""
        // Only parsed here: the host itself refuses a timeout it cannot follow.
        guard let seconds = Double(text) else {
            FileHandle.standardError.write(Data("Error: --start-timeout wants a number of seconds, not '\(text)'\n\(usage)\n".utf8))
            exit(64)
        }
        configuration.startTimeout = seconds
    case "-h", "--help": print(usage); exit(0)
    default:
        FileHandle.standardError.write(Data("Error: unknown argument '\(argument)'\n\(usage)\n".utf8))
        exit(64)
    }
}

let provider: NEPacketTunnelProvider
switch providerName {
case "counting": provider = CountingTunnelProvider()
case "seed": provider = PacketTunnelProvider()
default:
    FileHandle.standardError.write(Data("Error: unknown provider '\(providerName)'\n\(usage)\n".utf8))
    exit(64)
}

// The host blocks the termination signals before anything else starts a thread.
let host: TunnelgateProviderHost
do {
    host = try TunnelgateProviderHost(configuration: configuration)
} catch {
    FileHandle.standardError.write(Data("tunnelgate-provider-example: \(error)\n".utf8))
    exit(1)
}
exit(host.run(provider))
