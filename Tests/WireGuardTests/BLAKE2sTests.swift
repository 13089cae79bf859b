import WireGuard
import XCTest

final class BLAKE2sTests: XCTestCase {
    /// RFC 7693 Appendix B: BLAKE2s-256("abc").
    func testRFC7693AppendixB() {
        XCTAssertEqual(hexString(BLAKE2s.hash(Array("abc".utf8))),
                       "508c5e8c327c14e2e1a72ba34eeb452f37458b209ed63a294d999b4c86675982")
    }

    /// RFC 7693 Appendix E: the grand hash over unkeyed and keyed hashes of the RFC's
    /// deterministic sequences, for output lengths 16, 20, 28, 32 and input lengths 0..1024.
    func testRFC7693AppendixESelfTest() {
        func sequence(_ length: Int, seed: UInt32) -> [UInt8] {
            var a = 0xDEAD_4BAD &* seed
            var b: UInt32 = 1
            return (0..<length).map { _ in
                let t = a &+ b
                a = b
                b = t
                return UInt8(truncatingIfNeeded: t >> 24)
            }
        }
        var grand = BLAKE2s(outputLength: 32)
        for outputLength in [16, 20, 28, 32] {
            for inputLength in [0, 3, 64, 65, 255, 1024] {
                let input = sequence(inputLength, seed: UInt32(inputLength))
                grand.update(BLAKE2s.hash(input, outputLength: outputLength))
                let key = sequence(outputLength, seed: UInt32(outputLength))
                grand.update(BLAKE2s.hash(input, outputLength: outputLength, key: key))
            }
        }
        XCTAssertEqual(hexString(grand.finalize()),
                       "6a411f08ce25adcdfb02aba641451cec53c598b24f4fc787fbdc88797f4c1dfe")
    }

    /// Expected values from Python: hashlib.blake2s(data, digest_size=..., key=...).hexdigest().
    func testAgainstPythonHashlib() {
        XCTAssertEqual(hexString(BLAKE2s.hash([])),
                       "69217a3079908094e11121d042354a7c1f55b6482ca1a51e1b250dfd1ed0eef9")
        XCTAssertEqual(hexString(BLAKE2s.hash([], key: Array(0..<32))),
                       "48a8997da407876b3d79c0d92325ad3b89cbb754d86ab71aee047ad345fd2c49")
        XCTAssertEqual(hexString(BLAKE2s.hash(Array(0..<64), key: Array(0..<32))),
                       "8975b0577fd35566d750b362b0897a26c399136df07bababbde6203ff2954ed4")
        XCTAssertEqual(hexString(BLAKE2s.hash(Array("abc".utf8), outputLength: 16, key: Array(0..<16))),
                       "75296c2d2c0f51210b383f386bc8b1ff")
    }

    /// Streaming in pieces of every size gives the one-shot digest (block-boundary handling).
    func testIncrementalUpdatesMatchOneShot() {
        let data = [UInt8](repeating: UInt8(ascii: "a"), count: 1000)
        let expected = "a4691c2bf852334ece63c024234338fc6c150bdf04fa3f6e0e4c5209b326438d" // hashlib, b"a" * 1000
        XCTAssertEqual(hexString(BLAKE2s.hash(data)), expected)
        for piece in [1, 3, 63, 64, 65, 128, 999] {
            var hasher = BLAKE2s()
            var offset = 0
            while offset < data.count {
                let end = min(offset + piece, data.count)
                hasher.update(Array(data[offset..<end]))
                offset = end
            }
            XCTAssertEqual(hexString(hasher.finalize()), expected, "pieces of \(piece)")
        }
        var empty = BLAKE2s()
        empty.update([])
        XCTAssertEqual(empty.finalize(), BLAKE2s.hash([]))
    }
}
