// OpenSSL's TLS client for provider connections (CTunnelgateTLS.h). Every OpenSSL result is checked;
// errors are the library's own text (ERR_error_string_n) or the certificate check's
// (X509_verify_cert_error_string), with the step that failed.
#define _GNU_SOURCE
#include "CTunnelgateTLS.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

struct CTunnelgateTLS_session {
    SSL_CTX *context;
    SSL *ssl;
};

static void describe(const char *step, char *error, size_t capacity) {
    unsigned long code = ERR_get_error();
    char reason[256] = "unknown error";
    if (code != 0) ERR_error_string_n(code, reason, sizeof reason);
    ERR_clear_error();
    snprintf(error, capacity, "%s: %s", step, reason);
}

static int is_address(const char *name) {
    unsigned char buffer[16];
    return inet_pton(AF_INET, name, buffer) == 1 || inet_pton(AF_INET6, name, buffer) == 1;
}

CTunnelgateTLS_session *CTunnelgateTLS_client(int fd, const char *server_name, const char *ca_file,
                                              const char *ca_directory, int minimum_version,
                                              int maximum_version, char *error, size_t capacity) {
    ERR_clear_error();
    struct CTunnelgateTLS_session *s = calloc(1, sizeof *s);
    if (!s) { snprintf(error, capacity, "out of memory"); return NULL; }
    s->context = SSL_CTX_new(TLS_client_method());
    if (!s->context) { describe("SSL_CTX_new", error, capacity); free(s); return NULL; }
    SSL_CTX_set_verify(s->context, SSL_VERIFY_PEER, NULL);
    if (SSL_CTX_load_verify_locations(s->context, ca_file, ca_directory) != 1) {
        describe("loading the trust store", error, capacity);
        goto fail;
    }
    if (minimum_version != 0 && SSL_CTX_set_min_proto_version(s->context, minimum_version) != 1) {
        describe("SSL_CTX_set_min_proto_version", error, capacity);
        goto fail;
    }
    if (maximum_version != 0 && SSL_CTX_set_max_proto_version(s->context, maximum_version) != 1) {
        describe("SSL_CTX_set_max_proto_version", error, capacity);
        goto fail;
    }
    s->ssl = SSL_new(s->context);
    if (!s->ssl) { describe("SSL_new", error, capacity); goto fail; }
    if (SSL_set_fd(s->ssl, fd) != 1) { describe("SSL_set_fd", error, capacity); goto fail; }
    // A write retried after want_write may come from another address holding the same bytes.
    SSL_set_mode(s->ssl, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (is_address(server_name)) {
        // An address is checked against the certificate's IP address entries; SNI carries names only.
        X509_VERIFY_PARAM *param = SSL_get0_param(s->ssl);
        if (X509_VERIFY_PARAM_set1_ip_asc(param, server_name) != 1) { describe("the server's address", error, capacity); goto fail; }
    } else {
        // A wildcard stands for a whole left-most label only (*.example.com, never vpn*.example.com).
        SSL_set_hostflags(s->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        if (SSL_set1_host(s->ssl, server_name) != 1) { describe("the server's name", error, capacity); goto fail; }
        if (SSL_set_tlsext_host_name(s->ssl, server_name) != 1) { describe("SNI", error, capacity); goto fail; }
    }
    SSL_set_connect_state(s->ssl);
    return s;
fail:
    CTunnelgateTLS_free(s);
    return NULL;
}

// What SSL_get_error says about a result <= 0.
static int outcome(CTunnelgateTLS_session *s, int rc, const char *step, char *error, size_t capacity) {
    int e = SSL_get_error(s->ssl, rc);
    switch (e) {
    case SSL_ERROR_WANT_READ: return CTunnelgateTLS_want_read;
    case SSL_ERROR_WANT_WRITE: return CTunnelgateTLS_want_write;
    case SSL_ERROR_ZERO_RETURN: return CTunnelgateTLS_closed;
    case SSL_ERROR_SYSCALL:
        if (ERR_peek_error() == 0) {
            if (errno == 0) { snprintf(error, capacity, "%s: the server closed the connection", step); return CTunnelgateTLS_failed; }
            snprintf(error, capacity, "%s: %s (%d)", step, strerror(errno), errno);
            return CTunnelgateTLS_failed;
        }
        describe(step, error, capacity);
        return CTunnelgateTLS_failed;
    default: {
        long verify = SSL_get_verify_result(s->ssl);
        if (verify != X509_V_OK) {
            ERR_clear_error();
            snprintf(error, capacity, "%s: certificate verification failed: %s", step, X509_verify_cert_error_string(verify));
            return CTunnelgateTLS_failed;
        }
        describe(step, error, capacity);
        return CTunnelgateTLS_failed;
    }
    }
}

int CTunnelgateTLS_handshake(CTunnelgateTLS_session *s, char *error, size_t capacity) {
    ERR_clear_error();
    errno = 0;
    int rc = SSL_do_handshake(s->ssl);
    if (rc == 1) return CTunnelgateTLS_done;
    int r = outcome(s, rc, "TLS handshake", error, capacity);
    if (r == CTunnelgateTLS_closed) {
        snprintf(error, capacity, "TLS handshake: the server closed the connection");
        return CTunnelgateTLS_failed;
    }
    return r;
}

long CTunnelgateTLS_read(CTunnelgateTLS_session *s, void *buffer, size_t count, char *error, size_t capacity) {
    ERR_clear_error();
    errno = 0;
    size_t n = 0;
    int rc = SSL_read_ex(s->ssl, buffer, count, &n);
    if (rc == 1) return (long)n;
    int r = outcome(s, rc, "TLS read", error, capacity);
    // A TCP close without close_notify: OpenSSL 3 reports it as an unexpected EOF; the data so far is whole.
    if (r == CTunnelgateTLS_failed && ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING) return CTunnelgateTLS_closed;
    return r;
}

int CTunnelgateTLS_pending(CTunnelgateTLS_session *s) { return SSL_pending(s->ssl); }

long CTunnelgateTLS_write(CTunnelgateTLS_session *s, const void *buffer, size_t count, char *error, size_t capacity) {
    ERR_clear_error();
    errno = 0;
    size_t n = 0;
    int rc = SSL_write_ex(s->ssl, buffer, count, &n);
    if (rc == 1) return (long)n;
    int r = outcome(s, rc, "TLS write", error, capacity);
    return r == CTunnelgateTLS_closed ? CTunnelgateTLS_failed : r;
}

int CTunnelgateTLS_shutdown(CTunnelgateTLS_session *s) {
    ERR_clear_error();
    int rc = SSL_shutdown(s->ssl);
    if (rc >= 0) return CTunnelgateTLS_done;  // 0: sent, the peer's not awaited
    char ignored[64];
    return outcome(s, rc, "TLS shutdown", ignored, sizeof ignored);
}

const char *CTunnelgateTLS_version(CTunnelgateTLS_session *s) { return SSL_get_version(s->ssl); }

void CTunnelgateTLS_free(CTunnelgateTLS_session *s) {
    if (!s) return;
    if (s->ssl) SSL_free(s->ssl);
    if (s->context) SSL_CTX_free(s->context);
    free(s);
}
