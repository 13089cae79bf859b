/// `struct virtio_net_hdr` (linux/virtio_net.h), which a TUN made with IFF_VNET_HDR puts before
/// every packet it gives and expects before every packet it is given: 10 bytes, its 16-bit fields
/// in the machine's byte order (a TUN's "legacy" virtio endianness is the host's unless
/// TUNSETVNETLE/BE says otherwise; Tunnelgate never does). The C shim asserts the layout.
public struct VirtioNetHeader: Equatable, Sendable {
    /// sizeof(struct virtio_net_hdr), also what TUNSETVNETHDRSZ is set to.
    public static let size = 10

    /// The largest packet a TUN with TSO gives after its header: an IPv6 header and a 65,535-byte
    /// payload (an IPv4 packet is at most 65,535 bytes in all).
    public static let largestPacket = 40 + 65_535

    /// VIRTIO_NET_HDR_F_NEEDS_CSUM: the checksum at `checksumStart + checksumOffset` holds only
    /// the pseudo-header's sum; the sum of everything from `checksumStart` on must complete it.
    public static let needsChecksum: UInt8 = 1
    /// VIRTIO_NET_HDR_F_DATA_VALID: the checksum was already verified.
    public static let dataValid: UInt8 = 2

    /// VIRTIO_NET_HDR_GSO_*: what kind of super-packet follows, if any.
    public enum GSOType: UInt8, Sendable {
        /// VIRTIO_NET_HDR_GSO_NONE: one packet.
        case none = 0
        /// VIRTIO_NET_HDR_GSO_TCPV4: IPv4 TCP, cut into `gsoSize`-byte segments (TSO).
        case tcpv4 = 1
        /// VIRTIO_NET_HDR_GSO_UDP: IP fragmentation offload of UDP (UFO); never asked for.
        case udp = 3
        /// VIRTIO_NET_HDR_GSO_TCPV6: IPv6 TCP, cut into `gsoSize`-byte segments (TSO).
        case tcpv6 = 4
        /// VIRTIO_NET_HDR_GSO_UDP_L4: UDP segmentation (USO); never asked for.
        case udpL4 = 5
    }
    /// VIRTIO_NET_HDR_GSO_ECN, or-ed into the type: the TCP stream uses ECN (TUN_F_TSO_ECN, never asked for).
    public static let ecnBit: UInt8 = 0x80

    /// flags: `needsChecksum`, `dataValid`.
    public var flags: UInt8
    /// gso_type, with `ecnBit` possibly set.
    public var gsoType: UInt8
    /// hdr_len: a hint of the length of the headers (a TUN reports its whole linear part, which
    /// may be longer); never trusted beyond checking that it lies within the packet.
    public var headerLength: UInt16
    /// gso_size: payload bytes per segment (the TCP MSS).
    public var gsoSize: UInt16
    /// csum_start: where the checksummed part (the TCP or UDP header) starts.
    public var checksumStart: UInt16
    /// csum_offset: where the checksum lies, from `checksumStart` (16 for TCP, 6 for UDP).
    public var checksumOffset: UInt16

    public init(flags: UInt8 = 0, gsoType: UInt8 = GSOType.none.rawValue, headerLength: UInt16 = 0, gsoSize: UInt16 = 0,
                checksumStart: UInt16 = 0, checksumOffset: UInt16 = 0) {
        self.flags = flags
        self.gsoType = gsoType
        self.headerLength = headerLength
        self.gsoSize = gsoSize
        self.checksumStart = checksumStart
        self.checksumOffset = checksumOffset
    }

    /// The header in the first 10 bytes at `bytes`.
    public init(loadingFrom bytes: UnsafeRawPointer) {
        flags = bytes.load(fromByteOffset: 0, as: UInt8.self)
        gsoType = bytes.load(fromByteOffset: 1, as: UInt8.self)
        headerLength = bytes.loadUnaligned(fromByteOffset: 2, as: UInt16.self)
        gsoSize = bytes.loadUnaligned(fromByteOffset: 4, as: UInt16.self)
        checksumStart = bytes.loadUnaligned(fromByteOffset: 6, as: UInt16.self)
        checksumOffset = bytes.loadUnaligned(fromByteOffset: 8, as: UInt16.self)
    }

    /// Writes the header's 10 bytes at `bytes`.
    public func store(to bytes: UnsafeMutableRawPointer) {
        bytes.storeBytes(of: flags, toByteOffset: 0, as: UInt8.self)
        bytes.storeBytes(of: gsoType, toByteOffset: 1, as: UInt8.self)
        bytes.storeBytes(of: headerLength, toByteOffset: 2, as: UInt16.self)
        bytes.storeBytes(of: gsoSize, toByteOffset: 4, as: UInt16.self)
        bytes.storeBytes(of: checksumStart, toByteOffset: 6, as: UInt16.self)
        bytes.storeBytes(of: checksumOffset, toByteOffset: 8, as: UInt16.self)
    }
}
