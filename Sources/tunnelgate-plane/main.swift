// tunnelgate-plane: the packet plane's executable (docs/architecture.md). The engine starts it into the
// plane's sandbox with the channel as descriptor 3; nobody else runs it. It links the runtimes, the TUN
// and the channel's protocol and nothing else: neither Foundation nor the engine's netlink, nftables and
// DNS code is mapped into the process that parses what the network sends.
import LinuxSystem
import PacketPlane

ProcessControl.exit(PacketPlane.main(Array(CommandLine.arguments.dropFirst())))
