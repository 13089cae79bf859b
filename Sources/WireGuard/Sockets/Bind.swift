import LinuxSystem
import TunnelgateSettings

/// The WireGuard device's carrier: UDP on one port, through an IPv4 and an IPv6 socket (either may be
/// missing), after wireguard-go's conn.Bind. The device sends and receives whole batches through it
/// (one recvmmsg, one sendmmsg per family) and single handshake messages; it never touches a socket
/// itself.
///
/// `UDPBind` is the real one, over sockets it made or sockets it was handed; `LoopbackBind` is an
/// in-memory double on a `LoopbackNetwork`, so that devices can be tested against each other without
/// root or a socket. Used only by the device thread (and by its owner before start and after stop).
public protocol Bind: AnyObject {
    /// The UDP port every socket is bound to.
    var port: UInt16 { get }
    /// The mark the sockets' packets carry (SO_MARK); 0 for none.
    var mark: UInt32 { get }
    /// Whether the sockets are someone else's (the engine's), bound and marked before the device got
    /// them: `setMark` and `rebind` are then refused, and the device never binds or marks.
    var isHandedOver: Bool { get }
    /// Readable (POLLIN) while `receive(_:into:)` of that family would give datagrams; nil when the
    /// family has no socket.
    func readiness(_ family: IPFamily) -> FileDescriptor?
    /// Fills `batch` with the datagrams waiting on the family's socket, up to its capacity, each with
    /// its source: how many (0: none, or the family has no socket).
    func receive(_ family: IPFamily, into batch: DatagramBatch) -> Int
    /// Asks the sockets to hand over a run of one sender's datagrams as one (UDP_GRO; then
    /// `DatagramBatch.segmentSize` says where to cut): whether they will. Also after `rebind`.
    func enableReceiveOffload() -> Bool
    /// Sends every datagram of `batch` (all to addresses of `family`) at once, with UDP_SEGMENT runs
    /// when the batch segments, and empties it: how many were not sent.
    func send(_ batch: DatagramBatch, family: IPFamily) -> Int
    /// Sends one datagram (a handshake message, a cookie reply): false when it was not sent.
    func send(_ datagram: UnsafeRawBufferPointer, to endpoint: Endpoint) -> Bool
    /// Marks every socket (`wg set fwmark`, and the tunnel's carrier identity). A mark the kernel
    /// refuses is an error, never ignored: unmarked, the carrier's packets would go into the tunnel.
    func setMark(_ mark: UInt32) throws(BindError)
    /// Moves every socket to `port` (`wg set listen-port`): new sockets, bound, sized and marked as the
    /// old ones, replace them only once all of that worked.
    func rebind(port: UInt16) throws(BindError)
    /// Closes the sockets. Once; later calls do nothing.
    func close()
}

/// Why a carrier socket could not be made, taken, bound or marked: the errno wg(8) is answered with,
/// and one line naming what failed.
public struct BindError: Error, Sendable, CustomStringConvertible {
    public var errno: Errno
    public var description: String

    public init(_ errno: Errno, _ description: String) {
        self.errno = errno
        self.description = description
    }
}
