import LinuxSystem

// Invoked as tunnelgate-wireguard (a link to this binary), it is the drop-in for wireguard-go that
// wg-quick's WG_QUICK_USERSPACE_IMPLEMENTATION names: `tunnelgate-wireguard IFACE` is
// `tunnelgate wireguard IFACE` (Commands+WireGuard.swift).
let invokedAs = CommandLine.arguments.first.map { $0.split(separator: "/").last.map(String.init) ?? $0 } ?? ""
let arguments = Array(CommandLine.arguments.dropFirst())
ProcessControl.exit(CommandLine.run(invokedAs == "tunnelgate-wireguard" ? ["wireguard"] + arguments : arguments))
