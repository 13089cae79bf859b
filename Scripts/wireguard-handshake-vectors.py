#!/usr/bin/env python3
"""Known-answer vectors for Tests/WireGuardTests/HandshakeVectorTests.swift.

A second, independent transcription of the WireGuard whitepaper's handshake (section 5.4),
over Python's hashlib (BLAKE2s), hmac and the `cryptography` package (X25519,
ChaCha20-Poly1305), with fixed keys so the Swift implementation's bytes can be compared with it.
Run: python3 Scripts/wireguard-handshake-vectors.py
"""
import hashlib
import hmac
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat


def HASH(*parts):
    h = hashlib.blake2s()
    for p in parts:
        h.update(p)
    return h.digest()


def MAC(key, data):
    return hashlib.blake2s(data, digest_size=16, key=key).digest()


def HMAC(key, data):
    return hmac.new(key, data, hashlib.blake2s).digest()


def KDF(n, key, data):
    t0 = HMAC(key, data)
    out, prev = [], b""
    for i in range(1, n + 1):
        prev = HMAC(t0, prev + bytes([i]))
        out.append(prev)
    return out


def PUB(priv):
    return X25519PrivateKey.from_private_bytes(priv).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def DH(priv, pub):
    return X25519PrivateKey.from_private_bytes(priv).exchange(X25519PublicKey.from_public_bytes(pub))


def AEAD(key, counter, plain, ad):
    return ChaCha20Poly1305(key).encrypt(b"\0" * 4 + counter.to_bytes(8, "little"), plain, ad)


def key(byte):
    return bytes([byte]) * 32


S_i, S_r, E_i, E_r = key(0x11), key(0x22), key(0x33), key(0x44)
PSK = key(0x55)
TIMESTAMP = bytes.fromhex("400000006553f10a00000000")
I_INDEX, R_INDEX = 0x01020304, 0x0A0B0C0D

# Initiation (5.4.2)
C = HASH(b"Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s")
H = HASH(C, b"WireGuard v1 zx2c4 Jason@zx2c4.com")
H = HASH(H, PUB(S_r))
C = KDF(1, C, PUB(E_i))[0]
msg = bytes([1, 0, 0, 0]) + I_INDEX.to_bytes(4, "little") + PUB(E_i)
H = HASH(H, PUB(E_i))
C, k = KDF(2, C, DH(E_i, PUB(S_r)))
enc_static = AEAD(k, 0, PUB(S_i), H)
msg += enc_static
H = HASH(H, enc_static)
C, k = KDF(2, C, DH(S_i, PUB(S_r)))
enc_ts = AEAD(k, 0, TIMESTAMP, H)
msg += enc_ts
H = HASH(H, enc_ts)
msg += MAC(HASH(b"mac1----", PUB(S_r)), msg)
msg += b"\0" * 16
initiation = msg

# Response (5.4.3)
msg = bytes([2, 0, 0, 0]) + R_INDEX.to_bytes(4, "little") + I_INDEX.to_bytes(4, "little") + PUB(E_r)
C = KDF(1, C, PUB(E_r))[0]
H = HASH(H, PUB(E_r))
C = KDF(1, C, DH(E_r, PUB(E_i)))[0]
C = KDF(1, C, DH(E_r, PUB(S_i)))[0]
C, tau, k = KDF(3, C, PSK)
H = HASH(H, tau)
enc_empty = AEAD(k, 0, b"", H)
msg += enc_empty
H = HASH(H, enc_empty)
msg += MAC(HASH(b"mac1----", PUB(S_i)), msg)
msg += b"\0" * 16
response = msg

# Transport keys (5.4.5) and one transport message (5.4.6) from the initiator, counter 0,
# the 4-byte payload padded to 16.
send_i, recv_i = KDF(2, C, b"")
transport = bytes([4, 0, 0, 0]) + R_INDEX.to_bytes(4, "little") + (0).to_bytes(8, "little")
transport += AEAD(send_i, 0, b"ping" + b"\0" * 12, b"")

# mac2 of the initiation with the cookie 0x66 * 16.
with_cookie = initiation[:132] + MAC(bytes([0x66]) * 16, initiation[:132])

for name, value in [("initiation", initiation), ("response", response), ("initiatorSend", send_i),
                    ("initiatorReceive", recv_i), ("transport", transport), ("initiationMAC2", with_cookie[132:])]:
    print(f'{name} = "{value.hex()}"')
