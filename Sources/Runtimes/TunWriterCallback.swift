import TUN

/// The C writer callback: `context` is an unretained TunWriter that the host
/// keeps alive until the runtime's stop has returned.
let tunWriterCallback: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<UInt8>?, Int) -> UInt8 = { context, packet, len in
    guard let context, let packet, len > 0 else { return 0 }
    let writer = Unmanaged<TunWriter>.fromOpaque(context).takeUnretainedValue()
    return writer.write(packet, len) ? 1 : 0
}
