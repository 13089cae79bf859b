// A TLS client over a connected, non-blocking TCP socket, for a NetworkExtension provider's
// createTCPConnection(enableTLS: true): OpenSSL 3, the server's certificate verified against the trust
// store and its name (DNS name or IP address) checked, SNI sent for a DNS name.
#ifndef CTUNNELGATE_TLS_H
#define CTUNNELGATE_TLS_H

#include <stddef.h>

// What a call needs before it can go on: the socket readable or writable.
enum {
    CTunnelgateTLS_done = 0,
    CTunnelgateTLS_want_read = -1,
    CTunnelgateTLS_want_write = -2,
    CTunnelgateTLS_failed = -3,
    CTunnelgateTLS_closed = -4,  // the peer's close_notify (or a clean TCP close): no more data
};

typedef struct CTunnelgateTLS_session CTunnelgateTLS_session;

// A client on `fd` (not owned: the caller closes it after _free) verifying `server_name` against the
// certificates in `ca_file` and `ca_directory` (either may be NULL, not both). `minimum_version` and
// `maximum_version` are TLS1_2_VERSION-style numbers, or 0 for OpenSSL's bounds. NULL on failure, with
// the reason in `error`.
CTunnelgateTLS_session *CTunnelgateTLS_client(int fd, const char *server_name, const char *ca_file,
                                              const char *ca_directory, int minimum_version,
                                              int maximum_version, char *error, size_t capacity);
// The handshake, again after each want: done, want_read, want_write or failed (with the reason, the
// certificate verification's when that failed).
int CTunnelgateTLS_handshake(CTunnelgateTLS_session *session, char *error, size_t capacity);
// Up to `count` bytes: the number read (> 0), or want_read, want_write, closed, failed.
long CTunnelgateTLS_read(CTunnelgateTLS_session *session, void *buffer, size_t count, char *error, size_t capacity);
// Bytes still buffered inside TLS (readable without the socket).
int CTunnelgateTLS_pending(CTunnelgateTLS_session *session);
// Up to `count` bytes: the number written (> 0), or want_read, want_write, failed.
long CTunnelgateTLS_write(CTunnelgateTLS_session *session, const void *buffer, size_t count, char *error, size_t capacity);
// Sends close_notify (once; done, want_read, want_write or failed).
int CTunnelgateTLS_shutdown(CTunnelgateTLS_session *session);
// The negotiated protocol ("TLSv1.3"), after the handshake.
const char *CTunnelgateTLS_version(CTunnelgateTLS_session *session);
void CTunnelgateTLS_free(CTunnelgateTLS_session *session);

#endif
