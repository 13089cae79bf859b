import Glibc

extension FileDescriptor {
    /// writev(2) of `first` then `second` as one write: a header and the packet after it, where the
    /// packet has no room before it for the header. The bytes written.
    public func write(_ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer) throws(SystemCallError) -> Int {
        var vectors = (iovec(iov_base: UnsafeMutableRawPointer(mutating: first.baseAddress), iov_len: first.count),
                       iovec(iov_base: UnsafeMutableRawPointer(mutating: second.baseAddress), iov_len: second.count))
        return try syscall("writev") {
            withUnsafeMutableBytes(of: &vectors) { writev(rawValue, $0.baseAddress!.assumingMemoryBound(to: iovec.self), 2) }
        }
    }
}
