// OpenSSL 3's TLS API (Debian: libssl-dev), for CTunnelgateTLS.
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
