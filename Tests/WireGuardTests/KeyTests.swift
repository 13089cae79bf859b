import WireGuard
import XCTest

final class KeyTests: XCTestCase {
    // RFC 7748 section 6.1's Alice, in wg's base64 form (`echo <b64> | wg pubkey` gives the public key).
    let alicePrivateHex = "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"
    let alicePublicHex = "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"

    func testPublicKeyTextForms() throws {
        let key = try XCTUnwrap(WireGuardKey(hex: alicePublicHex))
        XCTAssertEqual(key.hex, alicePublicHex)
        XCTAssertEqual(key.base64.count, 44)
        XCTAssertEqual(WireGuardKey(base64: key.base64), key)
        XCTAssertEqual(WireGuardKey(hex: alicePublicHex.uppercased()), key)
        XCTAssertEqual("\(key)", key.base64)
    }

    func testRejectsMalformedText() {
        XCTAssertNil(WireGuardKey(hex: String(alicePublicHex.dropLast())))
        XCTAssertNil(WireGuardKey(hex: alicePublicHex + "00"))
        XCTAssertNil(WireGuardKey(hex: "zz" + alicePublicHex.dropFirst(2)))
        XCTAssertNil(WireGuardKey(base64: ""))
        XCTAssertNil(WireGuardKey(base64: "not base64 at all, not base64 at all, xxxxx="))
        XCTAssertNil(WireGuardKey(base64: "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo")) // no padding
        // Non-canonical: the last character's unused bits set.
        XCTAssertNotNil(WireGuardKey(base64: "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="))
        XCTAssertNil(WireGuardKey(base64: "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmp="))
        XCTAssertNil(WireGuardKey([1, 2, 3]))
    }

    func testPrivateKeyDerivesPublicAndNeverPrintsItself() throws {
        let key = try XCTUnwrap(PrivateKey(hex: alicePrivateHex))
        XCTAssertEqual(key.publicKey.hex, alicePublicHex)
        XCTAssertEqual(PrivateKey(base64: key.base64), key)
        XCTAssertEqual(key.hex, alicePrivateHex)

        let secretForms = [alicePrivateHex, key.base64]
        var dumped = ""
        dump(key, to: &dumped)
        for text in ["\(key)", String(describing: key), String(reflecting: key), dumped, "\([key])"] {
            for secret in secretForms { XCTAssertFalse(text.contains(secret), text) }
            XCTAssertTrue(text.contains("(private key)"), text)
        }
        XCTAssertNil(PrivateKey(bytes: [0]))
        XCTAssertNotEqual(PrivateKey.generate(), PrivateKey.generate())
    }
}
