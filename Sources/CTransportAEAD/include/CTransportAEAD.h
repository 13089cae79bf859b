#ifndef CTRANSPORTAEAD_H
#define CTRANSPORTAEAD_H

#include <stddef.h>
#include <stdint.h>

/// The AEAD of WireGuard's transport messages (ChaCha20-Poly1305, RFC 8439, a 96-bit nonce of four zero
/// bytes and the 64-bit little-endian counter, no additional data), built on OpenSSL's ChaCha20 and
/// Poly1305 assembly linked in from its static libcrypto (AVX-512 where the CPU has it). One context per
/// direction of a session, made once per handshake with the session key, and used by one thread.
typedef struct tg_transport_aead tg_transport_aead;

/// A context for sealing (`seal` 1) or opening (0) under the 32-byte `key`; NULL without memory.
tg_transport_aead *tg_transport_aead_new(const uint8_t *key, int seal);

/// Frees the context, its copy of the key cleansed first. NULL does nothing.
void tg_transport_aead_free(tg_transport_aead *aead);

/// Seals the `length` bytes at `buffer` in place under `counter` and writes the 16-byte tag after them
/// (`buffer` holds length + 16 bytes): length + 16; 0 for an opening context.
size_t tg_transport_aead_seal(tg_transport_aead *aead, uint64_t counter, uint8_t *buffer, size_t length);

/// Opens the `length` bytes at `buffer` (ciphertext, then the tag) in place under `counter`: the
/// plaintext's length, or -1 when it does not authenticate (then `buffer` is left as it was: the tag is
/// checked before anything is decrypted). A sealing context opens nothing (-1).
long tg_transport_aead_open(tg_transport_aead *aead, uint64_t counter, uint8_t *buffer, size_t length);

#endif
