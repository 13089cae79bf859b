import LinuxSystem
import RuntimeABI
import TunnelgateSettings

/// LinuxSystem's secure memory is what the settings model's parsers keep keys in (TunnelgateSettings
/// has no libc and asks for `SecretMemory`); the methods are the same, so SecureBytes is one as it is.
/// Declared here, where both modules meet, so that neither depends on the other.
extension SecureBytes: SecretMemory {}

/// Memory for keys from LinuxSystem's SecureBytes (locked, out of core dumps, zeroed on release): the
/// allocator the command passes to the parsers.
public struct SecureMemoryAllocator: SecretMemoryAllocator {
    public init() {}
    public func allocate(count: Int) -> (any SecretMemory)? { try? SecureBytes(count: count) }
}

/// A runtime secret in memory: read once into SecureBytes, handed to start, kept there (one copy) to
/// scrub what the runtime says, then zeroed. Its bytes never reach a log, a status, an error or a
/// command line, and never an Array or String of this process.
public final class RuntimeSecret {
    /// The secret's text and a terminating NUL.
    private let memory: SecureBytes
    /// The secret's length, without the NUL.
    private let length: Int

    /// The largest secret file read (a secret is a line of text).
    static let fileLimit = 64 << 10

    public static func load(_ source: CallbackRuntimeSettings.Secret) throws(RuntimeError) -> RuntimeSecret {
        switch source {
        case .none:
            return RuntimeSecret(try allocate(1), length: 0)
        case .file(let path):
            let file: TrustedFile
            do { file = try TrustedFile.open(path) } catch {
                if case .notFound = error { throw RuntimeError("runtime.secretFile: \(path) does not exist") }
                throw RuntimeError("runtime.secretFile: \(error)")
            }
            defer { file.close() }
            if let problem = file.ownerOnlyProblem() { throw RuntimeError("runtime.secretFile: \(problem)") }
            let content: SecureBytes?
            do { content = try file.readSecret(limit: fileLimit) } catch {
                throw RuntimeError("runtime.secretFile: cannot read \(path): \(error)")
            }
            guard let content else {
                throw RuntimeError("runtime.secretFile: \(path) is larger than \(fileLimit) bytes; a secret is one line of text")
            }
            // `content` (the file as read) is wiped when it goes, whatever happens next.
            let length = content.withUnsafeBytes { raw -> Int? in
                var n = raw.count
                while n > 0, raw[n - 1] == 0x0a || raw[n - 1] == 0x0d { n -= 1 }
                return n > 0 && !raw[0..<n].contains(0) ? n : nil
            }
            guard let length else { throw RuntimeError("runtime.secretFile: \(path) is empty or not text") }
            let secret = try allocate(length + 1)
            secret.withUnsafeMutableBytes { out in
                content.withUnsafeBytes { out.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: length) }
            }
            return RuntimeSecret(secret, length: length)
        }
    }

    /// A secret handed over as bytes (the packet plane: the engine read the file). Copied into secure
    /// memory; the caller wipes `bytes`.
    public static func copying(_ bytes: UnsafeRawBufferPointer) throws(RuntimeError) -> RuntimeSecret {
        guard !bytes.contains(0) else { throw RuntimeError("the runtime's secret is not text") }
        let secret = try allocate(bytes.count + 1)
        secret.withUnsafeMutableBytes { out in
            if let base = bytes.baseAddress, bytes.count > 0 { out.baseAddress!.copyMemory(from: base, byteCount: bytes.count) }
        }
        return RuntimeSecret(secret, length: bytes.count)
    }

    /// The secret's bytes (without the NUL), for handing it to a packet plane.
    public func withUnsafeSecretBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try memory.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
    }

    private static func allocate(_ count: Int) throws(RuntimeError) -> SecureBytes {
        do { return try SecureBytes(count: count) } catch {
            throw RuntimeError("no memory for the runtime's secret: \(error)")
        }
    }

    private init(_ memory: SecureBytes, length: Int) {
        self.memory = memory
        self.length = length
    }

    /// `text` with every occurrence of the secret replaced by "[secret]"
    /// (what a runtime says may quote it). Works on bytes, so the secret is
    /// never made into a String that could not be wiped.
    func scrub(_ text: String) -> String {
        String(decoding: scrub(bytes: Array(text.utf8)), as: UTF8.self)
    }

    /// `input` with every occurrence of the secret's bytes replaced by "[secret]": for what a runtime
    /// says that need not be text (an app_message reply). Compares in place against the secret's
    /// memory: no copy of the secret is made.
    func scrub(bytes input: [UInt8]) -> [UInt8] {
        guard length >= 4, input.count >= length else { return input }
        return memory.withUnsafeBytes { raw -> [UInt8] in
            let secret = UnsafeRawBufferPointer(rebasing: raw[0..<length])
            func matches(at i: Int) -> Bool {
                for k in 0..<length where input[i + k] != secret[k] { return false }
                return true
            }
            var output: [UInt8] = []
            output.reserveCapacity(input.count)
            var i = 0
            while i < input.count {
                if input.count - i >= length, matches(at: i) {
                    output += Array("[secret]".utf8)
                    i += length
                } else {
                    output.append(input[i])
                    i += 1
                }
            }
            return output
        }
    }

    func withCString<T>(_ body: (UnsafePointer<CChar>) -> T) -> T {
        memory.withUnsafeBytes { body($0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
    }

    /// Overwrites the secret in memory (explicit_bzero: not optimised away).
    public func wipe() {
        memory.wipe()
    }
}
