import CTunnelgateShims
import Glibc

/// Transport messages to one endpoint laid back to back in one buffer and sent with one sendmsg
/// carrying UDP_SEGMENT (UDP GSO): the kernel looks the route up once and takes one buffer down
/// the stack, cutting it into datagrams of `segmentSize` bytes only at the end. The segments of
/// a TCP super-packet seal to messages of one size (only the last may be shorter), which is
/// exactly what UDP_SEGMENT takes.
///
/// If the kernel refuses UDP_SEGMENT (an old kernel, a path MTU below a message: EIO, EINVAL,
/// ENOPROTOOPT, EOPNOTSUPP), the train is sent one datagram per sendto instead, and every later
/// one too. No allocation after init; the device thread owns it.
final class DatagramTrain {
    /// UDP_MAX_SEGMENTS of the kernels that allow the fewest.
    static let maximumSegments = 64
    /// Under the 65,507-byte UDP payload limit of IPv4.
    static let maximumLength = 65_000

    /// The room a message needs while it is sealed (the MTU plus the transport overhead).
    let messageCapacity: Int
    private let buffer: UnsafeMutableRawBufferPointer
    private(set) var length = 0
    private(set) var count = 0
    /// The size of every message but the last, which may be shorter.
    private(set) var segmentSize = 0
    /// A message shorter than `segmentSize` has been added: it must be the last.
    private var closed = false
    /// False once the kernel refused UDP_SEGMENT.
    private(set) var segmentationWorks = true
    /// sendmsg(UDP_SEGMENT) calls made.
    private(set) var segmentedSends: UInt64 = 0

    init(messageCapacity: Int) {
        self.messageCapacity = messageCapacity
        buffer = .allocate(byteCount: Self.maximumLength + messageCapacity, alignment: 16)
    }

    deinit { buffer.deallocate() }

    var isEmpty: Bool { count == 0 }

    /// Whether another message may join the train.
    var hasRoom: Bool {
        !closed && count < Self.maximumSegments && length + messageCapacity <= Self.maximumLength
    }

    /// Where the next message is sealed (`messageCapacity` bytes) before `commit`.
    var nextSlot: UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(rebasing: buffer[length..<length + messageCapacity])
    }

    /// Takes the `messageLength` bytes sealed at `nextSlot` into the train. Only the last message
    /// may be shorter than the first, and none longer.
    func commit(length messageLength: Int) {
        precondition(hasRoom && messageLength > 0 && messageLength <= messageCapacity
                     && (count == 0 || messageLength <= segmentSize))
        if count == 0 {
            segmentSize = messageLength
        } else if messageLength < segmentSize {
            closed = true
        }
        length += messageLength
        count += 1
    }

    /// Empties the train without sending it.
    func discard() {
        length = 0
        count = 0
        segmentSize = 0
        closed = false
    }

    /// Sends the train to `endpoint` on `fd` and empties it; returns how many datagrams failed,
    /// and whether the kernel just refused UDP_SEGMENT (so that the caller can say so once).
    func flush(_ fd: Int32, to endpoint: Endpoint) -> (failed: Int, segmentationRefused: Bool) {
        defer { discard() }
        guard count > 0 else { return (0, false) }
        var refused = false
        if count > 1 && segmentationWorks {
            let rc = endpoint.withSockaddr { address, size in
                CTunnelgateShims_send_segmented(fd, buffer.baseAddress, length, UInt16(segmentSize), address, UInt32(size))
            }
            if rc == 0 {
                segmentedSends += 1
                return (0, false)
            }
            let e = errno
            guard e == EIO || e == EINVAL || e == ENOPROTOOPT || e == EOPNOTSUPP else { return (count, false) }
            segmentationWorks = false
            refused = true
        }
        var failed = 0
        var offset = 0
        for i in 0..<count {
            let size = i == count - 1 ? length - offset : segmentSize
            let sent = endpoint.withSockaddr { address, addressLength in
                var n: Int
                repeat { n = sendto(fd, buffer.baseAddress! + offset, size, 0, address, addressLength) } while n < 0 && errno == EINTR
                return n
            }
            if sent != size { failed += 1 }
            offset += size
        }
        return (failed, refused)
    }
}
