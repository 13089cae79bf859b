/*
 * er_wire.h — the example runtime's datagram format (docs/runtime-abi.md, "Wire format").
 *
 *   offset  size  field
 *   0       1     version      1
 *   1       1     type         1 = data (an IP packet), 2 = keepalive (empty payload)
 *   2       2     reserved     0
 *   4       24    nonce        random per datagram
 *   28      n+16  ciphertext   XChaCha20-Poly1305-IETF(key, nonce, payload, ad = bytes 0..3)
 *
 *   key = BLAKE2b-256(message = secret, key = ER_WIRE_KEY_CONTEXT)   (crypto_generichash)
 */
#ifndef ER_WIRE_H
#define ER_WIRE_H

#include "er_text.h"

#include <sodium.h>
#include <stddef.h>
#include <stdint.h>

#define ER_WIRE_VERSION      1
#define ER_WIRE_DATA         1
#define ER_WIRE_KEEPALIVE    2
#define ER_WIRE_HEADER_BYTES 4
#define ER_WIRE_NONCE_BYTES  crypto_aead_xchacha20poly1305_ietf_NPUBBYTES
#define ER_WIRE_TAG_BYTES    crypto_aead_xchacha20poly1305_ietf_ABYTES
#define ER_WIRE_OVERHEAD     (ER_WIRE_HEADER_BYTES + ER_WIRE_NONCE_BYTES + ER_WIRE_TAG_BYTES)
#define ER_WIRE_KEY_BYTES    crypto_aead_xchacha20poly1305_ietf_KEYBYTES
#define ER_WIRE_KEY_CONTEXT  "tunnelgate example runtime v1"

_Static_assert(ER_WIRE_NONCE_BYTES == 24 && ER_WIRE_TAG_BYTES == 16 && ER_WIRE_KEY_BYTES == 32,
               "the wire format is written for XChaCha20-Poly1305-IETF");
_Static_assert(ER_WIRE_OVERHEAD == 44, "er_args.h's ER_MTU_MAX assumes 44 bytes of overhead");
_Static_assert(sizeof(ER_WIRE_KEY_CONTEXT) - 1 >= crypto_generichash_KEYBYTES_MIN &&
               sizeof(ER_WIRE_KEY_CONTEXT) - 1 <= crypto_generichash_KEYBYTES_MAX,
               "the context string is a BLAKE2b key");

/* Derives the datagram key from the secret. The secret is read, not copied; the hash state is zeroed. */
ER_HIDDEN int er_wire_derive_key(uint8_t key[ER_WIRE_KEY_BYTES], const char *secret, size_t secret_len);

/* Writes one datagram of len + ER_WIRE_OVERHEAD bytes to out. `payload` must not overlap `out`. */
ER_HIDDEN size_t er_wire_seal(uint8_t *out, uint8_t type, const uint8_t nonce[ER_WIRE_NONCE_BYTES],
                              const uint8_t *payload, size_t len, const uint8_t key[ER_WIRE_KEY_BYTES]);

typedef enum {
    ER_OPEN_OK,
    ER_OPEN_MALFORMED,     /* too short, unknown version or type, reserved bits set */
    ER_OPEN_OVERSIZE,      /* the payload would not fit plain_cap */
    ER_OPEN_UNAUTHENTIC,   /* the tag does not verify: wrong key, tampered, or garbage */
} er_open_result;

/* Checks and decrypts one datagram into plain (plain_cap bytes); sets *type and *plain_len on OK. */
ER_HIDDEN er_open_result er_wire_open(const uint8_t *datagram, size_t len, uint8_t *plain, size_t plain_cap,
                                      size_t *plain_len, uint8_t *type, const uint8_t key[ER_WIRE_KEY_BYTES]);

#endif /* ER_WIRE_H */
