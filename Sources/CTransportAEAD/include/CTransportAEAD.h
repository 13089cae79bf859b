#ifndef CTRANSPORTAEAD_H
#define CTRANSPORTAEAD_H

#include <stddef.h>
#include <stdint.h>

/// The AEAD of WireGuard's transport messages (ChaCha20-Poly1305, RFC 8439, a 96-bit nonce of four zero
/// bytes and the 64-bit little-endian counter, no additional data) through OpenSSL's libcrypto, whose
/// ChaCha20 and Poly1305 use AVX-512 where the CPU has it. One context per direction of a session,
/// made once per handshake with the session key, and used by one thread.
typedef struct tg_transport_aead tg_transport_aead;

/// A context for sealing (`seal` 1) or opening (0) under the 32-byte `key`; NULL when libcrypto refuses.
/// It calls the provider's cipher functions directly when libcrypto's provider publishes them (see
/// `tg_transport_aead_provider_available`), and goes through EVP otherwise.
tg_transport_aead *tg_transport_aead_new(const uint8_t *key, int seal);

/// The same context through EVP only (EVP_CipherInit_ex, EVP_CipherUpdate, EVP_CipherFinal_ex): the
/// path taken when the provider's functions are not available; for tests that compare the two.
tg_transport_aead *tg_transport_aead_new_through_evp(const uint8_t *key, int seal);

/// 1 when the provider that libcrypto fetches ChaCha20-Poly1305 from publishes the functions contexts
/// call directly (OSSL_PROVIDER_query_operation: newctx, freectx, encrypt/decrypt_init, update, final,
/// get/set_ctx_params); 0 when contexts go through EVP.
int tg_transport_aead_provider_available(void);

/// Frees the context; OpenSSL wipes its copy of the key first. NULL does nothing.
void tg_transport_aead_free(tg_transport_aead *aead);

/// Seals the `length` bytes at `buffer` in place under `counter` and writes the 16-byte tag after them
/// (`buffer` holds length + 16 bytes): length + 16, or 0 when libcrypto failed.
size_t tg_transport_aead_seal(tg_transport_aead *aead, uint64_t counter, uint8_t *buffer, size_t length);

/// Opens the `length` bytes at `buffer` (ciphertext, then the tag) in place under `counter`: the
/// plaintext's length, or -1 when it does not authenticate (then the plaintext bytes must not be used).
/// A sealing context opens nothing and an opening one seals nothing (-1, 0).
long tg_transport_aead_open(tg_transport_aead *aead, uint64_t counter, uint8_t *buffer, size_t length);

#endif
