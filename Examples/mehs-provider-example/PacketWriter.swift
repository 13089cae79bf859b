import Foundation // Linux: the guide also has `import Darwin`; Foundation brings AF_INET here too
import MEHSClient
import NetworkExtension

// Linux: the guide declares this as `@_cdecl("mehs_packet_write") func …`. The
// same body is a C-convention closure here: SwiftPM links an executable target's
// objects twice on Linux, and a second exported C symbol does not link.
let mehs_packet_write: MehsPacketWriteCallback = { context, packet, packetLen in
    guard let context, let packet, packetLen > 0 else { return 0 }
    let provider = Unmanaged<MehsPacketTunnelProvider>
        .fromOpaque(context).takeUnretainedValue()
    let data = Data(bytes: packet, count: packetLen)
    let version = data[ data.startIndex ] >> 4
    let family = version == 4 ? AF_INET : (version == 6 ? AF_INET6 : 0)
    guard family != 0 else { return 0 }
    return provider.packetFlow.writePackets(
        [data], withProtocols: [NSNumber(value: family)]
    ) ? 1 : 0
}
