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

/// The pieces of one gathered write (writev(2)): a fixed array of iovecs, allocated once, refilled for
/// every write. Used by one thread; the pieces must stay valid until the write.
public final class IOVectors {
    public let capacity: Int
    public private(set) var count = 0
    /// Bytes in all pieces.
    public private(set) var byteCount = 0
    private let vectors: UnsafeMutablePointer<iovec>

    public init(capacity: Int) {
        precondition(capacity > 0 && capacity <= 1024, "writev takes at most IOV_MAX (1,024) pieces")
        self.capacity = capacity
        vectors = .allocate(capacity: capacity)
    }

    deinit { vectors.deallocate() }

    public var isFull: Bool { count == capacity }

    public func removeAll() {
        count = 0
        byteCount = 0
    }

    public func append(_ piece: UnsafeRawBufferPointer) {
        precondition(count < capacity, "more pieces than the vector holds")
        vectors[count] = iovec(iov_base: UnsafeMutableRawPointer(mutating: piece.baseAddress), iov_len: piece.count)
        count += 1
        byteCount += piece.count
    }

    public subscript(i: Int) -> UnsafeRawBufferPointer {
        precondition(i >= 0 && i < count)
        return UnsafeRawBufferPointer(start: vectors[i].iov_base, count: vectors[i].iov_len)
    }

    /// Widens piece 0 by `bytes` before its start (a header written into its headroom), or narrows it
    /// again with a negative count.
    public func extendFirst(before bytes: Int) {
        precondition(count > 0)
        vectors[0].iov_base = vectors[0].iov_base! - bytes
        vectors[0].iov_len += bytes
        byteCount += bytes
    }

    fileprivate var pointer: UnsafePointer<iovec> { UnsafePointer(vectors) }
}

extension FileDescriptor {
    /// writev(2) of every piece as one write (one packet to a TUN): the bytes written.
    public func write(_ pieces: IOVectors) throws(SystemCallError) -> Int {
        try syscall("writev") { writev(rawValue, pieces.pointer, Int32(pieces.count)) }
    }
}
