import LinuxSystem

// LinuxSystem's socket calls over Swift arrays, keeping their typed throws (Array's withUnsafe…Bytes
// only rethrows untyped errors).
extension FileDescriptor {
    /// send(2) of `bytes[offset...]` on a connected socket; nil when its buffer is full.
    func send(_ bytes: [UInt8], from offset: Int = 0) throws(SystemCallError) -> Int? {
        try bytes.withUnsafeBytes { b in
            Result { () throws(SystemCallError) in try send(UnsafeRawBufferPointer(rebasing: b[offset...])) }
        }.get()
    }

    /// recvfrom(2) into `buffer`: the byte count, nil when nothing is waiting.
    func receive(into buffer: inout [UInt8]) throws(SystemCallError) -> Int? {
        try buffer.withUnsafeMutableBytes { b in
            Result { () throws(SystemCallError) in try receive(into: b)?.count }
        }.get()
    }

    /// read(2) into `buffer`: the byte count (0 at the end), nil when nothing is waiting.
    func read(into buffer: inout [UInt8]) throws(SystemCallError) -> Int? {
        try buffer.withUnsafeMutableBytes { b in
            Result { () throws(SystemCallError) in try read(into: b) }
        }.get()
    }
}
