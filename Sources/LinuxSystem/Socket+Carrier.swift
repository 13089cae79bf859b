import CTunnelgateShims
import Glibc

/// Address families, for `FileDescriptor.socket(family:type:nonBlocking:)` and the checks below.
public enum SocketFamily {
    /// AF_UNSPEC (0): no family, as rtnetlink requests for every family say.
    public static let unspecified = AF_UNSPEC
    /// AF_INET.
    public static let ipv4 = AF_INET
    /// AF_INET6.
    public static let ipv6 = AF_INET6
    /// AF_UNIX.
    public static let unix = AF_UNIX
}

extension SocketAddress {
    /// sizeof(struct sockaddr_storage): room for any socket address, what a datagram batch keeps per
    /// datagram.
    public static let storageSize = MemoryLayout<sockaddr_storage>.size
}

/// The options a carrier socket (a UDP socket of a packet runtime) is set up with, each one
/// setsockopt or getsockopt whose result is checked: errors name the option and its value.
extension FileDescriptor {
    /// SO_MARK: every packet the socket sends carries `mark` (the routing rules and the kill switch
    /// know the carrier by it). Needs CAP_NET_ADMIN.
    public func setMark(_ mark: UInt32) throws(SystemCallError) {
        var value = Int32(bitPattern: mark)
        _ = try syscall("setsockopt(SO_MARK, 0x\(String(mark, radix: 16)))") {
            setsockopt(rawValue, SOL_SOCKET, SO_MARK, &value, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// SO_MARK as getsockopt reads it: the mark the socket's packets carry (0: none). Needs no privilege.
    public func mark() throws(SystemCallError) -> UInt32 {
        UInt32(bitPattern: try intOption(SOL_SOCKET, SO_MARK, "SO_MARK"))
    }

    /// IPV6_V6ONLY: an IPv6 socket that neither receives nor sends IPv4 (so an IPv4 socket can have
    /// the same port).
    public func setIPv6Only(_ on: Bool) throws(SystemCallError) {
        var value: Int32 = on ? 1 : 0
        _ = try syscall("setsockopt(IPV6_V6ONLY, \(value))") {
            setsockopt(rawValue, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &value, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// SO_REUSEADDR: a listening TCP socket may bind an address whose earlier connections are still
    /// in TIME_WAIT.
    public func setReuseAddress(_ on: Bool) throws(SystemCallError) {
        var value: Int32 = on ? 1 : 0
        _ = try syscall("setsockopt(SO_REUSEADDR, \(value))") {
            setsockopt(rawValue, SOL_SOCKET, SO_REUSEADDR, &value, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// IP_RECVERR (`family` AF_INET) or IPV6_RECVERR (AF_INET6): a datagram socket that is not
    /// connected hears of the ICMP errors for what it sent (port unreachable fails its next call)
    /// only with it.
    public func setReceiveErrors(family: Int32, _ on: Bool) throws(SystemCallError) {
        var value: Int32 = on ? 1 : 0
        let (level, option, name) = family == AF_INET6
            ? (Int32(IPPROTO_IPV6), IPV6_RECVERR, "IPV6_RECVERR") : (Int32(IPPROTO_IP), IP_RECVERR, "IP_RECVERR")
        _ = try syscall("setsockopt(\(name), \(value))") {
            setsockopt(rawValue, level, option, &value, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// Which socket buffer `setBufferSize` sizes.
    public enum SocketBuffer: Sendable {
        /// SO_RCVBUF, or SO_RCVBUFFORCE when forced.
        case receive
        /// SO_SNDBUF, or SO_SNDBUFFORCE when forced.
        case send
    }

    /// Sets a socket buffer's size. `force` (SO_RCVBUFFORCE / SO_SNDBUFFORCE, CAP_NET_ADMIN) goes past
    /// net.core.rmem_max / wmem_max; without it the kernel caps the size there.
    public func setBufferSize(_ buffer: SocketBuffer, bytes: Int32, force: Bool) throws(SystemCallError) {
        let (name, option): (String, Int32) = switch (buffer, force) {
        case (.receive, true): ("SO_RCVBUFFORCE", SO_RCVBUFFORCE)
        case (.receive, false): ("SO_RCVBUF", SO_RCVBUF)
        case (.send, true): ("SO_SNDBUFFORCE", SO_SNDBUFFORCE)
        case (.send, false): ("SO_SNDBUF", SO_SNDBUF)
        }
        var value = bytes
        _ = try syscall("setsockopt(\(name), \(bytes))") {
            setsockopt(rawValue, SOL_SOCKET, option, &value, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// SO_DOMAIN: the socket's address family (`SocketFamily`).
    public func socketFamily() throws(SystemCallError) -> Int32 { try intOption(SOL_SOCKET, SO_DOMAIN, "SO_DOMAIN") }

    /// SO_TYPE is SOCK_DGRAM.
    public func isDatagramSocket() throws(SystemCallError) -> Bool {
        try intOption(SOL_SOCKET, SO_TYPE, "SO_TYPE") == Int32(SOCK_DGRAM.rawValue)
    }

    /// SO_TYPE is SOCK_STREAM and SO_ACCEPTCONN is set: a socket listen(2) was called on.
    public func isListeningStreamSocket() throws(SystemCallError) -> Bool {
        let stream = try intOption(SOL_SOCKET, SO_TYPE, "SO_TYPE") == Int32(SOCK_STREAM.rawValue)
        let listening = try intOption(SOL_SOCKET, SO_ACCEPTCONN, "SO_ACCEPTCONN") != 0
        return stream && listening
    }

    /// SO_RCVTIMEO and SO_SNDTIMEO: how long a blocking read or write on the socket may wait.
    public func setTimeouts(seconds: Double) throws(SystemCallError) {
        var tv = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1e6))
        for (name, option) in [("SO_RCVTIMEO", SO_RCVTIMEO), ("SO_SNDTIMEO", SO_SNDTIMEO)] {
            _ = try syscall("setsockopt(\(name), \(seconds) s)") {
                setsockopt(rawValue, SOL_SOCKET, option, &tv, socklen_t(MemoryLayout<timeval>.size))
            }
        }
    }

    private func intOption(_ level: Int32, _ option: Int32, _ name: String) throws(SystemCallError) -> Int32 {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = try syscall("getsockopt(\(name))") { getsockopt(rawValue, level, option, &value, &length) }
        return value
    }
}

/// Datagrams in batches, for the packet path: no allocation, one system call per batch.
extension FileDescriptor {
    /// sendto(2) of one datagram to the socket address (a struct sockaddr_in or sockaddr_in6 of
    /// `addressLength` bytes) at `address`: the bytes sent.
    public func sendDatagram(_ bytes: UnsafeRawBufferPointer, to address: UnsafeRawPointer, addressLength: Int) throws(SystemCallError) -> Int {
        try syscall("sendto") {
            sendto(rawValue, bytes.baseAddress, bytes.count, 0, address.assumingMemoryBound(to: sockaddr.self), socklen_t(addressLength))
        }
    }

    /// recvmmsg(MSG_DONTWAIT) of up to `count` datagrams (CTunnelgateShims_receive_batch): datagram i
    /// lands at `buffers + i * slotSize` (at most `slotSize` bytes, its length in `lengths[i]`), its
    /// source at `addresses + i * SocketAddress.storageSize`, and with `segmentSizes` its UDP_GRO
    /// segment size (0: one datagram). How many arrived; 0 when none was waiting.
    public func receiveDatagrams(into buffers: UnsafeMutableRawPointer, slotSize: Int, count: Int,
                                 lengths: UnsafeMutablePointer<Int>, addresses: UnsafeMutableRawPointer,
                                 segmentSizes: UnsafeMutablePointer<UInt16>? = nil) throws(SystemCallError) -> Int {
        Int(try syscall("recvmmsg") {
            CTunnelgateShims_receive_batch(rawValue, buffers, slotSize, UInt32(count), lengths, addresses, SocketAddress.storageSize,
                                           segmentSizes)
        })
    }

    /// setsockopt(UDP_GRO): the kernel may hand this UDP socket a run of one sender's datagrams as one
    /// (each receive then says the segment size), instead of one receive per datagram.
    public func setUDPReceiveOffload(_ on: Bool) throws(SystemCallError) {
        var value: Int32 = on ? 1 : 0
        _ = try syscall("setsockopt(UDP_GRO, \(value))") {
            setsockopt(rawValue, Int32(IPPROTO_UDP), 104 /* UDP_GRO */, &value, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// sendmmsg of `count` datagrams (CTunnelgateShims_send_batch): datagram i is `lengths[i]` bytes at
    /// `buffers + i * slotSize`, to the address at `addresses + i * SocketAddress.storageSize` of
    /// `addressLengths[i]` bytes. With `segmentation`, runs to one address of one size (but the last)
    /// go as one message with UDP_SEGMENT; cleared when the kernel refuses it. How many were sent
    /// (some may fail while others go), and how many messages went segmented.
    public func sendDatagrams(from buffers: UnsafeRawPointer, slotSize: Int, lengths: UnsafePointer<Int>, count: Int,
                              addresses: UnsafeRawPointer, addressLengths: UnsafePointer<UInt32>,
                              segmentation: inout Bool) throws(SystemCallError) -> (sent: Int, segmented: Int) {
        var segment: Int32 = segmentation ? 1 : 0
        var segmented: UInt32 = 0
        // Also when nothing was sent: a refused UDP_SEGMENT stays refused.
        defer { segmentation = segment != 0 }
        let sent = try syscall("sendmmsg") {
            CTunnelgateShims_send_batch(rawValue, buffers, slotSize, lengths, UInt32(count), addresses, SocketAddress.storageSize,
                                        addressLengths, &segment, &segmented)
        }
        return (Int(sent), Int(segmented))
    }
}
