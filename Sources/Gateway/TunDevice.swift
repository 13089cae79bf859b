import CTunnelgateShims
import Glibc
import LinuxSystem

/// A TUN interface (IFF_TUN | IFF_NO_PI) and the descriptor that keeps it
/// alive: the interface is not persistent, so it disappears with the last
/// descriptor, also when the owning process is killed.
public final class TunDevice {
    public let name: String
    public let descriptor: FileDescriptor
    public let index: Int32

    public init(name: String) throws(SystemCallError) {
        var actual = [CChar](repeating: 0, count: Int(CTunnelgateShims_ifnamsiz()))
        let fd = try syscall("ioctl(TUNSETIFF, \(name))") {
            CTunnelgateShims_tun_open(name, &actual, 1)
        }
        descriptor = FileDescriptor(rawValue: fd)
        self.name = String(decoding: actual.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let index = if_nametoindex(self.name)
        guard index != 0 else {
            let e = Errno.current
            descriptor.close()
            throw SystemCallError("if_nametoindex(\(name))", e)
        }
        self.index = Int32(index)
    }

    private var closed = false

    /// Closes the descriptor; the kernel then deletes the interface. Idempotent.
    public func close() {
        guard !closed else { return }
        closed = true
        descriptor.close()
    }

    deinit { close() }
}
