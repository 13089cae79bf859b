#include "CTransportAEAD.h"

#include <stdlib.h>
#include <string.h>

// ---- The primitives, from libcrypto.a ------------------------------------------------------------------
//
// OpenSSL's ChaCha20 and Poly1305 are assembly that picks SSSE3, AVX2 or AVX-512 from the CPU
// (OPENSSL_ia32cap_P, which x86_64cpuid's .init code fills before main). They are linked in from Debian's
// static libcrypto (libssl-dev), a few objects and 36 KB of code, instead of loading libcrypto.so: the
// shared library's symbol tables, relocations and start-up cost 1.4 to 3.3 MB of resident memory in every
// process that maps it, and EVP's per-message bookkeeping cost more than half of a message's time. These
// are libcrypto's own entry points below its EVP and provider layers (crypto/chacha.h and
// crypto/poly1305.h of OpenSSL 3.0); they are not in its public headers, so they are declared here, and
// the link resolves them against the static library the build found.
void ChaCha20_ctr32(unsigned char *out, const unsigned char *in, size_t length, const unsigned int key[8],
                    const unsigned int counter[4]);
typedef struct poly1305_context POLY1305;
size_t Poly1305_ctx_size(void);
void Poly1305_Init(POLY1305 *context, const unsigned char key[32]);
void Poly1305_Update(POLY1305 *context, const unsigned char *in, size_t length);
void Poly1305_Final(POLY1305 *context, unsigned char tag[16]);  // cleanses the context
int CRYPTO_memcmp(const void *a, const void *b, size_t length);   // constant time
void OPENSSL_cleanse(void *bytes, size_t length);                 // not optimised away

enum { key_length = 32, tag_length = 16, poly1305_space = 256 };

// ---- Contexts ----------------------------------------------------------------------------------------

struct tg_transport_aead {
    unsigned int key[8];  // the key as ChaCha20 reads it: eight little-endian words
    int seal;
    _Alignas(64) unsigned char poly1305[poly1305_space];  // one message's Poly1305 state, cleansed after it
};

tg_transport_aead *tg_transport_aead_new(const uint8_t *key, int seal) {
    if (key == NULL || Poly1305_ctx_size() > poly1305_space) return NULL;
    tg_transport_aead *aead = aligned_alloc(64, sizeof(tg_transport_aead));
    if (aead == NULL) return NULL;
    memset(aead, 0, sizeof(*aead));
    for (int i = 0; i < 8; i++) {
        aead->key[i] = (unsigned int)key[4 * i] | (unsigned int)key[4 * i + 1] << 8 |
                       (unsigned int)key[4 * i + 2] << 16 | (unsigned int)key[4 * i + 3] << 24;
    }
    aead->seal = seal ? 1 : 0;
    return aead;
}

void tg_transport_aead_free(tg_transport_aead *aead) {
    if (aead == NULL) return;
    OPENSSL_cleanse(aead, sizeof(*aead));
    free(aead);
}

// RFC 8439 §2.8 with no additional data: the one-time Poly1305 key is the first 32 bytes of the ChaCha20
// block at counter 0; the message is encrypted from block counter 1; the tag covers the ciphertext, zero
// padding to 16 bytes, and the two lengths as 64-bit little-endian numbers (additional data 0, then the
// ciphertext's). WireGuard's nonce is four zero bytes and the message counter, little-endian.
static void tag_of(tg_transport_aead *aead, const unsigned int nonce[4], const uint8_t *ciphertext, size_t length,
                   uint8_t tag[tag_length]) {
    static const unsigned char zeros[64];
    unsigned char block[64];
    ChaCha20_ctr32(block, zeros, sizeof(block), aead->key, nonce);  // nonce[0] is the block counter, 0
    POLY1305 *poly1305 = (POLY1305 *)aead->poly1305;
    Poly1305_Init(poly1305, block);
    OPENSSL_cleanse(block, sizeof(block));
    Poly1305_Update(poly1305, ciphertext, length);
    if (length % 16 != 0) Poly1305_Update(poly1305, zeros, 16 - length % 16);
    unsigned char lengths[16] = {0};
    for (int i = 0; i < 8; i++) lengths[8 + i] = (unsigned char)((uint64_t)length >> (8 * i));
    Poly1305_Update(poly1305, lengths, sizeof(lengths));
    Poly1305_Final(poly1305, tag);
}

static void nonce_of(uint64_t counter, unsigned int block, unsigned int nonce[4]) {
    nonce[0] = block;
    nonce[1] = 0;
    nonce[2] = (unsigned int)counter;
    nonce[3] = (unsigned int)(counter >> 32);
}

// ChaCha20's block counter is 32 bits: a message may be at most 2^32 - 1 blocks after the key's block.
static const size_t longest = ((size_t)1 << 32) * 64 - 64 - 1;

size_t tg_transport_aead_seal(tg_transport_aead *aead, uint64_t counter, uint8_t *buffer, size_t length) {
    if (aead == NULL || !aead->seal || length > longest) return 0;
    unsigned int nonce[4];
    nonce_of(counter, 1, nonce);
    if (length > 0) ChaCha20_ctr32(buffer, buffer, length, aead->key, nonce);
    nonce[0] = 0;
    tag_of(aead, nonce, buffer, length, buffer + length);
    return length + tag_length;
}

long tg_transport_aead_open(tg_transport_aead *aead, uint64_t counter, uint8_t *buffer, size_t length) {
    if (aead == NULL || aead->seal || length < tag_length || length - tag_length > longest) return -1;
    size_t ciphertext = length - tag_length;
    unsigned int nonce[4];
    nonce_of(counter, 0, nonce);
    uint8_t tag[tag_length];
    tag_of(aead, nonce, buffer, ciphertext, tag);
    // Checked before anything is decrypted: a message that does not authenticate is left as it came.
    int matches = CRYPTO_memcmp(tag, buffer + ciphertext, tag_length) == 0;
    OPENSSL_cleanse(tag, sizeof(tag));
    if (!matches) return -1;
    nonce[0] = 1;
    if (ciphertext > 0) ChaCha20_ctr32(buffer, buffer, ciphertext, aead->key, nonce);
    return (long)ciphertext;
}
