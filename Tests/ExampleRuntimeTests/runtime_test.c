/*
 * runtime_test.c — tests the example runtime through its C ABI, the way a host uses it: dlopen the
 * shared library, bind the symbols by name, start instances on 127.0.0.1, move real packets.
 *
 *   runtime_test LIBRARY.so
 *
 * Topologies (all UDP on 127.0.0.1; ports picked free per run):
 *
 *   packet_in ─▶ [A] ══ sealed UDP ══ [B] ─▶ writer      (and back; B learns A's address)
 *   raw socket G ── garbage / hand-sealed datagrams ──▶ [E]  (G speaks the documented wire format itself)
 *   socketpair end ◀─▶ [F, --tun-fd] ══ UDP ══ [H] ◀─▶ packet_in / writer
 *
 * Prints TAP-like lines ("ok - ..." / "not ok - ..." with "#" details) and ends with "N passed, N failed".
 * Waits poll status every 5 ms up to a bound (TG_TEST_WAIT_MS, default 5000); nothing sleeps a fixed time.
 */
#define _GNU_SOURCE
#include "tunnelgate_runtime.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- harness ------------------------------------------------------------------------------------ */

static int passed, failed;
static long wait_ms = 5000;

static void check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(bool ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s - ", ok ? "ok" : "not ok");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    if (ok) passed++;
    else failed++;
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("# ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Polls pred every 5 ms until it holds or wait_ms passed. */
#define WAIT_FOR(pred)                                                                                     \
    ({                                                                                                     \
        long deadline_ = now_ms() + wait_ms;                                                               \
        bool ok_;                                                                                          \
        while (!(ok_ = (pred)) && now_ms() < deadline_) nap_ms(5);                                         \
        ok_;                                                                                               \
    })

/* ---- the library under test --------------------------------------------------------------------- */

static struct {
    tunnelgate_runtime_start_fn start;
    tunnelgate_runtime_packet_in_fn packet_in;
    tunnelgate_runtime_packet_in_batch_fn packet_in_batch;
    tunnelgate_runtime_status_fn status;
    tunnelgate_runtime_stop_fn stop;
    tunnelgate_runtime_app_message_fn app_message;
    tunnelgate_runtime_start_fn mehs_start;
    tunnelgate_runtime_packet_in_fn mehs_packet_in;
    tunnelgate_runtime_status_fn mehs_status;
    tunnelgate_runtime_stop_fn mehs_stop;
} lib;

static const char secret[] = "correct horse battery staple";

/* ---- the writer: a sink that keeps copies of what it was given ---------------------------------- */

#define SINK_MAX 1200
#define SINK_PACKET 2048

typedef struct {
    pthread_mutex_t lock;
    size_t count;             /* writer calls */
    size_t stored;
    uint8_t (*packets)[SINK_PACKET];
    size_t lengths[SINK_MAX];
    atomic_int accept;        /* what the writer returns */
    atomic_bool closed;       /* set after stop returned: any later call is a violation */
    atomic_int late_calls;
} sink;

static void sink_init(sink *s) {
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->lock, NULL);
    s->packets = calloc(SINK_MAX, SINK_PACKET);
    atomic_store(&s->accept, 1);
}

static void sink_free(sink *s) {
    free(s->packets);
    pthread_mutex_destroy(&s->lock);
}

static size_t sink_count(sink *s) {
    pthread_mutex_lock(&s->lock);
    size_t n = s->count;
    pthread_mutex_unlock(&s->lock);
    return n;
}

static uint8_t sink_writer(void *context, const uint8_t *packet, size_t len) {
    sink *s = context;
    if (atomic_load(&s->closed)) atomic_fetch_add(&s->late_calls, 1);
    pthread_mutex_lock(&s->lock);
    s->count++;
    if (s->stored < SINK_MAX && len <= SINK_PACKET) {
        memcpy(s->packets[s->stored], packet, len);
        s->lengths[s->stored++] = len;
    }
    pthread_mutex_unlock(&s->lock);
    return (uint8_t)atomic_load(&s->accept);
}

/* ---- packets, JSON, ports ----------------------------------------------------------------------- */

/* An IPv4-looking packet of `len` bytes whose contents depend on seq. */
static void make_packet(uint8_t *p, size_t len, uint32_t seq) {
    uint32_t x = seq * 2654435761u + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)x;
    }
    p[0] = 0x45;
    if (len >= 4) {
        p[2] = (uint8_t)(len >> 8);
        p[3] = (uint8_t)len;
    }
    if (len >= 8) memcpy(p + 4, &seq, 4);
}

static size_t packet_len_for(uint32_t seq) { return 20 + (seq * 37) % 1380; } /* 20 .. 1399 bytes */

/* Checks that the sink holds exactly packets 0 .. n-1 of make_packet, in order. */
static bool sink_holds_sequence(sink *s, uint32_t n, char *why, size_t why_cap) {
    uint8_t expected[SINK_PACKET];
    pthread_mutex_lock(&s->lock);
    bool ok = s->stored == n;
    if (!ok) snprintf(why, why_cap, "stored %zu packets, expected %u", s->stored, n);
    for (uint32_t i = 0; ok && i < n; i++) {
        size_t len = packet_len_for(i);
        make_packet(expected, len, i);
        if (s->lengths[i] != len || memcmp(s->packets[i], expected, len) != 0) {
            snprintf(why, why_cap, "packet %u differs (length %zu, expected %zu)", i, s->lengths[i], len);
            ok = false;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return ok;
}

typedef struct {
    char json[4096];
} status_buf;

static const char *status_of(void *h, status_buf *b) {
    size_t len = 0;
    int32_t rc = lib.status(h, b->json, sizeof(b->json), &len);
    if (rc != TUNNELGATE_RUNTIME_OK) snprintf(b->json, sizeof(b->json), "(status returned %d)", rc);
    return b->json;
}

/* The value of "name": in a flat JSON object: a number, or the text of a string (into out). */
static bool json_field(const char *json, const char *name, char *out, size_t cap) {
    char key[64];
    snprintf(key, sizeof(key), "\"%s\":", name);
    const char *p = strstr(json, key);
    if (p == NULL) return false;
    p += strlen(key);
    size_t n = 0;
    if (*p == '"') {
        p++;
        while (p[n] != '"' && p[n] != '\0') n++;
    } else {
        while (p[n] != ',' && p[n] != '}' && p[n] != '\0') n++;
    }
    if (n >= cap) n = cap - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return true;
}

static unsigned long long counter(void *h, const char *name) {
    status_buf b;
    char v[32];
    if (!json_field(status_of(h, &b), name, v, sizeof(v))) return ~0ull;
    return strtoull(v, NULL, 10);
}

static bool state_is(void *h, const char *state) {
    status_buf b;
    char v[32];
    return json_field(status_of(h, &b), "state", v, sizeof(v)) && strcmp(v, state) == 0;
}

static bool field_is(void *h, const char *name, const char *value) {
    status_buf b;
    char v[128];
    return json_field(status_of(h, &b), name, v, sizeof(v)) && strcmp(v, value) == 0;
}

/* A UDP port on 127.0.0.1 that was free a moment ago. */
static unsigned free_port(void) {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    bind(fd, (struct sockaddr *)&a, sizeof(a));
    getsockname(fd, (struct sockaddr *)&a, &len);
    close(fd);
    return ntohs(a.sin_port);
}

static int udp_socket_on_loopback(unsigned *port) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    bind(fd, (struct sockaddr *)&a, sizeof(a));
    getsockname(fd, (struct sockaddr *)&a, &len);
    *port = ntohs(a.sin_port);
    return fd;
}

static void send_to_port(int fd, unsigned port, const void *data, size_t len) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (sendto(fd, data, len, 0, (struct sockaddr *)&a, sizeof(a)) != (ssize_t)len) note("sendto: %s", strerror(errno));
}

/* ---- starting runtimes -------------------------------------------------------------------------- */

/* args: NULL-terminated strings, JSON-encoded here (they hold no characters that need escaping). */
static int32_t start_v(tunnelgate_runtime_start_fn fn, void **h, sink *s, const char *sec, char *err,
                       size_t err_cap, const char *first, va_list ap) {
    char json[1024];
    size_t n = 0;
    n += (size_t)snprintf(json + n, sizeof(json) - n, "[");
    for (const char *a = first; a != NULL; a = va_arg(ap, const char *))
        n += (size_t)snprintf(json + n, sizeof(json) - n, "%s\"%s\"", n > 1 ? ", " : "", a);
    snprintf(json + n, sizeof(json) - n, "]");
    size_t err_len = 0;
    return fn(json, sec, s != NULL ? sink_writer : NULL, s, h, err, err_cap, &err_len);
}

static void *start_ok(const char *label, sink *s, const char *sec, const char *first, ...) {
    va_list ap;
    va_start(ap, first);
    void *h = NULL;
    char err[256] = "";
    int32_t rc = start_v(lib.start, &h, s, sec, err, sizeof(err), first, ap);
    va_end(ap);
    check(rc == TUNNELGATE_RUNTIME_OK && h != NULL, "start %s", label);
    if (rc != TUNNELGATE_RUNTIME_OK) note("start returned %d: %s", rc, err);
    return h;
}

static char port_text[16][32];
static int port_text_next;
static const char *addr(unsigned port) {
    char *p = port_text[port_text_next++ % 16];
    snprintf(p, 32, "127.0.0.1:%u", port);
    return p;
}

/* ---- tests -------------------------------------------------------------------------------------- */

static void test_symbols(void) {
    check(lib.start && lib.packet_in && lib.packet_in_batch && lib.status && lib.stop && lib.app_message,
          "the default symbols resolve (tunnelgate_runtime_start/_packet_in/_packet_in_batch/_status/_stop/"
          "_app_message)");
    check(lib.mehs_start && lib.mehs_packet_in && lib.mehs_status && lib.mehs_stop,
          "MEHS's names resolve (mehs_ios_runtime_start/_packet_in, mehs_runtime_status/_stop)");
}

typedef struct {
    const char *json;
    int32_t rc;
    const char *message; /* a substring the error must contain */
} arg_case;

static void test_argument_errors(void) {
    unsigned busy_port;
    int busy = udp_socket_on_loopback(&busy_port);
    char bind_busy[128], busy_message[96];
    snprintf(bind_busy, sizeof(bind_busy), "[\"--bind\", \"127.0.0.1:%u\"]", busy_port);
    snprintf(busy_message, sizeof(busy_message), "bind(127.0.0.1:%u) failed: Address already in use (98)",
             busy_port);
    const arg_case cases[] = {
        {"", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "arguments: empty text at byte 0"},
        {"{\"bind\": 1}", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "arguments: not an array at byte 0"},
        {"[\"--bind\", 1]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "an element that is not a string at byte 11"},
        {"[\"--bind\"", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "unterminated array"},
        {"[\"--bind", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "unterminated string"},
        {"[\"a\",]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "an element that is not a string"},
        {"[\"a\"] x", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "text after the array at byte 6"},
        {"[[\"a\"]]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "not a string"},
        {"[\"\\x\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "invalid escape"},
        {"[\"\\u12\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "invalid \\u escape"},
        {"[\"\\ud800\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "unpaired UTF-16 surrogate"},
        {"[\"\\u0000\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "cannot hold a NUL"},
        {"[\"\xff\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "invalid UTF-8"},
        {"[\"\xc0\x80\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "invalid UTF-8"},
        {"[\"a\tb\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "unescaped control character"},
        {"[]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "needs --bind ADDRESS:PORT, --peer ADDRESS:PORT, or both"},
        {"[\"--frobnicate\", \"1\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "unknown argument \"--frobnicate\""},
        {"[\"127.0.0.1:1\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "unknown argument \"127.0.0.1:1\""},
        {"[\"--bind\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "--bind needs a value"},
        {"[\"--bind\", \"127.0.0.1\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT,
         "--bind: \"127.0.0.1\" is not ADDRESS:PORT or [IPV6-ADDRESS]:PORT"},
        {"[\"--bind\", \"::1:53\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "needs brackets around an IPv6 address"},
        {"[\"--bind\", \"300.1.1.1:53\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "numeric IPv4 address"},
        {"[\"--peer\", \"[fe80::zz]:53\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "numeric IPv6 address"},
        {"[\"--peer\", \"localhost:53\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "numeric IPv4 address"},
        {"[\"--bind\", \"127.0.0.1:65536\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT,
         "--bind port: \"65536\" is not a whole number in 0...65535"},
        {"[\"--peer\", \"127.0.0.1:0\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT,
         "--peer port: \"0\" is not a whole number in 1...65535"},
        {"[\"--bind\", \"127.0.0.1:0\", \"--queue\", \"0\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT,
         "--queue: \"0\" is not a whole number in 1...65536"},
        {"[\"--bind\", \"127.0.0.1:0\", \"--queue\", \"-1\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT,
         "--queue: \"-1\" is not a whole number"},
        {"[\"--bind\", \"127.0.0.1:0\", \"--silence-ms\", \"99999999999999999999999\"]",
         TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "--silence-ms: \"99999999999999999999999\" is not a whole number"},
        {"[\"--bind\", \"127.0.0.1:0\", \"--tun-mtu\", \"65536\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT,
         "--tun-mtu: \"65536\" is not a whole number in 68...65463"},
        {"[\"--bind\", \"127.0.0.1:0\", \"--fwmark\", \"0xZZ\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT,
         "--fwmark: \"0xZZ\" is not a whole number"},
        {"[\"--bind\", \"127.0.0.1:0\", \"--bind\", \"127.0.0.1:0\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT,
         "--bind is given twice"},
        {"[\"--bind\", \"127.0.0.1:0\", \"--direct-send\", \"on\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT,
         "--direct-send: \"on\" is not a whole number in 0...65536"},
        {"[\"--bind\", \"127.0.0.1:0\", \"--peer\", \"[::1]:53\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT,
         "--peer is IPv6 but --bind is IPv4"},
        {"[\"--bind\", \"127.0.0.1:0\", \"--queue\", \"65536\", \"--tun-mtu\", \"9000\"]",
         TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "is more than 256 MiB of queue"},
        {"[\"--bind\", \"127.0.0.1:0\", \"--tun-fd\", \"987\"]", TUNNELGATE_RUNTIME_INVALID_ARGUMENT,
         "--tun-fd: 987 is not an open file descriptor"},
        {"[\"--bind\", \"127.0.0.1:0\", \"--fail-start\", \"carrier \\\"x\\\" refused \\u00e9\\ud83d\\ude00\"]",
         TUNNELGATE_RUNTIME_FAILED, "carrier \"x\" refused \xc3\xa9\xf0\x9f\x98\x80"},
        {bind_busy, TUNNELGATE_RUNTIME_FAILED, busy_message},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sink s;
        sink_init(&s);
        void *h = (void *)0x1;
        char err[256] = "";
        size_t err_len = 0;
        int32_t rc = lib.start(cases[i].json, secret, sink_writer, &s, &h, err, sizeof(err), &err_len);
        bool ok = rc == cases[i].rc && h == NULL && strstr(err, cases[i].message) != NULL &&
                  err_len == strlen(err) && strstr(err, secret) == NULL;
        check(ok, "start rejects %s with %d and a clear message", cases[i].json, cases[i].rc);
        if (!ok) note("returned %d, handle %p, error (%zu bytes): %s", rc, h, err_len, err);
        if (rc == TUNNELGATE_RUNTIME_OK && h != NULL) lib.stop(h);
        sink_free(&s);
    }
    close(busy);

    /* Arguments the parser must accept: whitespace, escapes, an empty --fail-start message. */
    char err[64];
    size_t err_len = 99;
    void *h = NULL;
    int32_t rc = lib.start(" [ \"--bind\" ,\n\"127.0.0.1:0\",\"--fail-start\",\"\\/\\t\"\t] ", secret, sink_writer,
                           NULL, &h, err, sizeof(err), &err_len);
    check(rc == TUNNELGATE_RUNTIME_FAILED && strcmp(err, "/\t") == 0 && err_len == 2,
          "whitespace and escapes in args_json decode (--fail-start \"\\/\\t\" gives \"/\\t\")");

    /* Secret, writer, handle. */
    h = (void *)0x1;
    rc = lib.start("[\"--bind\", \"127.0.0.1:0\"]", "", sink_writer, NULL, &h, err, sizeof(err), &err_len);
    check(rc == TUNNELGATE_RUNTIME_INVALID_ARGUMENT && h == NULL && strstr(err, "secret is empty"),
          "an empty secret is INVALID_ARGUMENT: %s", err);
    rc = lib.start("[\"--bind\", \"127.0.0.1:0\"]", secret, NULL, NULL, &h, err, sizeof(err), &err_len);
    check(rc == TUNNELGATE_RUNTIME_INVALID_ARGUMENT && strstr(err, "writer is NULL"),
          "no writer on the callback path is INVALID_ARGUMENT: %s", err);
    rc = lib.start("[\"--bind\", \"127.0.0.1:0\"]", secret, sink_writer, NULL, NULL, err, sizeof(err), &err_len);
    check(rc == TUNNELGATE_RUNTIME_INVALID_ARGUMENT && strcmp(err, "handle is NULL") == 0,
          "a NULL handle pointer is INVALID_ARGUMENT");
    rc = lib.start(NULL, secret, sink_writer, NULL, &h, NULL, 0, NULL);
    check(rc == TUNNELGATE_RUNTIME_INVALID_ARGUMENT, "a NULL args_json (and no error buffer) is INVALID_ARGUMENT");

    /* The error buffer: truncated to its capacity at a UTF-8 boundary, NUL-terminated. */
    char small[8];
    rc = lib.start("[\"--bind\", \"127.0.0.1:0\", \"--fail-start\", \"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"]", secret,
                   sink_writer, NULL, &h, small, sizeof(small), &err_len);
    check(rc == TUNNELGATE_RUNTIME_FAILED && err_len == 6 && strcmp(small, "\xc3\xa9\xc3\xa9\xc3\xa9") == 0,
          "a long error is cut at a UTF-8 boundary within error_capacity (8 -> 6 bytes + NUL)");
}

/* A and B on 127.0.0.1: packets both ways, bytes equal; B learns A's address; status and app_message. */
static void test_tunnel(void) {
    sink sa, sb;
    sink_init(&sa);
    sink_init(&sb);
    unsigned pa = free_port(), pb = free_port();
    void *a = start_ok("A (--peer B, --fwmark 7460, --tun-mtu 1400)", &sa, secret, "--bind", addr(pa), "--peer",
                       addr(pb), "--fwmark", "7460", "--tun-mtu", "1400", NULL);
    /* B has no --peer, binds with MEHS's start name: it learns A from A's first keepalive. */
    void *b = NULL;
    {
        char json[256], err[256];
        size_t err_len;
        snprintf(json, sizeof(json), "[\"--bind\", \"%s\", \"--tun-mtu\", \"1400\"]", addr(pb));
        int32_t rc = lib.mehs_start(json, secret, sink_writer, &sb, &b, err, sizeof(err), &err_len);
        check(rc == TUNNELGATE_RUNTIME_OK && b != NULL, "start B through mehs_ios_runtime_start");
    }
    if (a == NULL || b == NULL) goto out;

    check(WAIT_FOR(state_is(a, "ready") && state_is(b, "ready")), "A and B become ready");
    check(field_is(a, "interface", "example-udp"), "interface is \"example-udp\" once ready");
    check(WAIT_FOR(field_is(b, "peer", addr(pa))), "B learns A's address %s from an authenticated datagram",
          addr(pa));
    status_buf st;
    status_of(a, &st);
    note("A: %s", st.json);
    check(strstr(st.json, "\"dropsSocket\":0}") != NULL, "status ends with the kernel's dropsSocket");
    check(strstr(st.json, secret) == NULL && strstr(st.json, "horse") == NULL, "the secret is not in the status");
    char mehs_json[1024];
    size_t mehs_len = 0;
    check(lib.mehs_status(b, mehs_json, sizeof(mehs_json), &mehs_len) == TUNNELGATE_RUNTIME_OK &&
              mehs_len == strlen(mehs_json) && strstr(mehs_json, "\"state\":\"ready\""),
          "mehs_runtime_status answers like tunnelgate_runtime_status");

    /* A -> B: 300 packets of 20..1399 bytes, in bursts that the default queue takes. */
    uint8_t pkt[SINK_PACKET];
    int rejected = 0;
    for (uint32_t i = 0; i < 300; i++) {
        make_packet(pkt, packet_len_for(i), i);
        int32_t rc;
        while ((rc = lib.packet_in(a, pkt, packet_len_for(i))) == TUNNELGATE_RUNTIME_QUEUE_FULL) nap_ms(1);
        if (rc != TUNNELGATE_RUNTIME_OK) rejected++;
    }
    check(rejected == 0, "packet_in accepts 300 packets on A");
    char why[128] = "";
    check(WAIT_FOR(sink_count(&sb) >= 300) && sink_holds_sequence(&sb, 300, why, sizeof(why)),
          "B's writer receives A's 300 packets, in order, bytes equal %s", why);
    if (why[0] != '\0' || sink_count(&sb) < 300) note("B: %s", status_of(b, &st));

    /* B -> A through MEHS's packet_in name. */
    for (uint32_t i = 0; i < 300; i++) {
        make_packet(pkt, packet_len_for(i), i);
        while (lib.mehs_packet_in(b, pkt, packet_len_for(i)) == TUNNELGATE_RUNTIME_QUEUE_FULL) nap_ms(1);
    }
    check(WAIT_FOR(sink_count(&sa) >= 300) && sink_holds_sequence(&sa, 300, why, sizeof(why)),
          "A's writer receives B's 300 packets (mehs_ios_runtime_packet_in), bytes equal %s", why);

    unsigned long long bytes = 0;
    for (uint32_t i = 0; i < 300; i++) bytes += packet_len_for(i);
    /* The receiver adds a batch's counts after delivering it: wait for them rather than race them. */
    check(WAIT_FOR(counter(a, "packetsIn") == 300 && counter(a, "bytesIn") == bytes &&
                   counter(b, "packetsOut") == 300 && counter(b, "bytesOut") == bytes),
          "counters: A packetsIn/bytesIn = B packetsOut/bytesOut = 300/%llu", bytes);
    check(counter(a, "dropsAuth") == 0 && counter(a, "dropsMalformed") == 0 && counter(b, "dropsAuth") == 0,
          "no drops between peers with the same secret");

    /* packet_in's argument checks. */
    make_packet(pkt, 1401, 1);
    check(lib.packet_in(a, pkt, 1401) == TUNNELGATE_RUNTIME_INVALID_ARGUMENT && counter(a, "dropsOversize") == 1,
          "packet_in over --tun-mtu (1401 > 1400) is INVALID_ARGUMENT and counted in dropsOversize");
    check(lib.packet_in(a, pkt, 1400) == TUNNELGATE_RUNTIME_OK, "packet_in of exactly the MTU is accepted");
    check(lib.packet_in(a, NULL, 20) == TUNNELGATE_RUNTIME_INVALID_ARGUMENT &&
              lib.packet_in(a, pkt, 0) == TUNNELGATE_RUNTIME_INVALID_ARGUMENT &&
              lib.packet_in(NULL, pkt, 20) == TUNNELGATE_RUNTIME_INVALID_ARGUMENT,
          "packet_in with a NULL packet, zero length or NULL handle is INVALID_ARGUMENT");

    /* The writer refusing packets: counted, not retried, nothing blocks. */
    WAIT_FOR(sink_count(&sb) >= 301);
    atomic_store(&sb.accept, 0);
    unsigned long long before = counter(b, "dropsWriter");
    for (uint32_t i = 0; i < 5; i++) {
        make_packet(pkt, 60, i);
        lib.packet_in(a, pkt, 60);
    }
    check(WAIT_FOR(counter(b, "dropsWriter") == before + 5), "a writer returning 0 is counted in dropsWriter (5)");
    atomic_store(&sb.accept, 1);

    /* status: BUFFER_TOO_SMALL reports the capacity needed; that capacity is then enough. */
    char tiny[8];
    size_t need = 0;
    int32_t small_rc = lib.status(a, tiny, sizeof(tiny), &need);
    check(small_rc == TUNNELGATE_RUNTIME_BUFFER_TOO_SMALL && need > sizeof(tiny),
          "status into 8 bytes is BUFFER_TOO_SMALL, needed %zu", need);
    check(lib.status(a, NULL, 0, &need) == TUNNELGATE_RUNTIME_BUFFER_TOO_SMALL,
          "status with a NULL buffer and capacity 0 reports the size needed");
    bool fit = false;
    for (int attempt = 0; attempt < 3 && !fit; attempt++) { /* counters may grow a digit in between */
        char *buf = malloc(need);
        size_t len = 0;
        fit = lib.status(a, buf, need, &len) == TUNNELGATE_RUNTIME_OK && len + 1 == need && buf[len] == '\0';
        free(buf);
    }
    check(fit, "status into exactly the capacity it asked for succeeds (json_len = capacity - 1, NUL-terminated)");
    check(lib.status(a, NULL, 10, &need) == TUNNELGATE_RUNTIME_INVALID_ARGUMENT &&
              lib.status(a, tiny, sizeof(tiny), NULL) == TUNNELGATE_RUNTIME_INVALID_ARGUMENT,
          "status with a NULL buffer of non-zero capacity or a NULL json_len is INVALID_ARGUMENT");

    /* app_message. */
    uint8_t reply[4096];
    size_t reply_len = 0;
    check(lib.app_message(a, (const uint8_t *)"ping", 4, reply, sizeof(reply), &reply_len) == 0 && reply_len == 4 &&
              memcmp(reply, "pong", 4) == 0,
          "app_message \"ping\" -> \"pong\"");
    check(lib.app_message(a, (const uint8_t *)"stats", 5, reply, sizeof(reply), &reply_len) == 0 &&
              reply_len > 20 && memcmp(reply, "{\"state\":\"ready\"", 16) == 0 && reply[reply_len - 1] == '}',
          "app_message \"stats\" -> the status JSON");
    check(lib.app_message(a, (const uint8_t *)"hello\0x", 7, reply, sizeof(reply), &reply_len) == 0 &&
              reply_len == 13 && memcmp(reply, "echo: hello\0x", 13) == 0,
          "app_message \"hello\\0x\" -> \"echo: hello\\0x\" (bytes, not a C string)");
    check(lib.app_message(a, (const uint8_t *)"hello", 5, reply, 10, &reply_len) ==
                  TUNNELGATE_RUNTIME_BUFFER_TOO_SMALL && reply_len == 11,
          "app_message with a reply buffer too small is BUFFER_TOO_SMALL, reply_len = 11");
    check(lib.app_message(a, NULL, 0, reply, sizeof(reply), &reply_len) == 0 && reply_len == 6,
          "app_message with no bytes -> \"echo: \"");

out:
    if (a) lib.stop(a);
    if (b) lib.mehs_stop(b);
    sink_free(&sa);
    sink_free(&sb);
}

/* --queue 1 under a burst: QUEUE_FULL, counted; every accepted packet still arrives. */
static void test_queue_full(void) {
    sink sq, sr;
    sink_init(&sq);
    sink_init(&sr);
    unsigned pq = free_port(), pr = free_port();
    void *q = start_ok("Q (--queue 1)", &sq, secret, "--bind", addr(pq), "--peer", addr(pr), "--queue", "1", NULL);
    void *r = start_ok("R (peer of Q)", &sr, secret, "--bind", addr(pr), "--peer", addr(pq), NULL);
    if (q == NULL || r == NULL) goto out;
    check(WAIT_FOR(state_is(q, "ready")), "Q becomes ready");
    uint8_t pkt[SINK_PACKET];
    uint32_t accepted = 0, full = 0;
    for (uint32_t attempt = 0; attempt < 200000 && accepted < 200 && (full < 20 || accepted < 20); attempt++) {
        size_t len = packet_len_for(accepted);
        make_packet(pkt, len, accepted);
        int32_t rc = lib.packet_in(q, pkt, len);
        if (rc == TUNNELGATE_RUNTIME_OK) accepted++;
        else if (rc == TUNNELGATE_RUNTIME_QUEUE_FULL) full++;
    }
    note("burst: %u accepted, %u QUEUE_FULL", accepted, full);
    check(full > 0, "a burst into --queue 1 meets QUEUE_FULL");
    check(counter(q, "queueFull") == full, "queueFull counts every QUEUE_FULL (%u)", full);
    char why[128] = "";
    check(WAIT_FOR(sink_count(&sr) >= accepted) && sink_holds_sequence(&sr, accepted, why, sizeof(why)),
          "every accepted packet (%u) arrives, in order, bytes equal %s", accepted, why);
out:
    if (q) lib.stop(q);
    if (r) lib.stop(r);
    sink_free(&sq);
    sink_free(&sr);
}

/* A batch of `n` packets starting at sequence number `first`, built in the caller's buffers. */
#define BATCH_MAX 64

typedef struct {
    uint8_t bytes[BATCH_MAX][SINK_PACKET];
    const uint8_t *packets[BATCH_MAX];
    size_t lengths[BATCH_MAX];
} batch_buf;

static void batch_fill(batch_buf *b, uint32_t first, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t seq = first + (uint32_t)i;
        b->lengths[i] = packet_len_for(seq);
        make_packet(b->bytes[i], b->lengths[i], seq);
        b->packets[i] = b->bytes[i];
    }
}

/* packet_in_batch into a small queue (--direct-send 0: every packet goes through the queue): each call
 * takes a prefix (never more than fits), QUEUE_FULL says the rest was not taken, and the caller overwrites
 * its buffers the moment the call returns; the peer must still receive exactly packets 0 .. N-1, in
 * order, bytes equal. */
static void test_batch(void) {
    sink sq, sr;
    sink_init(&sq);
    sink_init(&sr);
    unsigned pq = free_port(), pr = free_port();
    void *q = start_ok("BQ (--queue 4, --direct-send 0)", &sq, secret, "--bind", addr(pq), "--peer", addr(pr),
                       "--queue", "4", "--direct-send", "0", NULL);
    void *r = start_ok("BR (peer of BQ)", &sr, secret, "--bind", addr(pr), "--peer", addr(pq), NULL);
    batch_buf *b = calloc(1, sizeof(*b));
    if (q == NULL || r == NULL || b == NULL) goto out;
    check(WAIT_FOR(state_is(q, "ready")), "BQ becomes ready");
    const uint32_t total = 600;
    uint32_t next = 0, calls = 0, full = 0, over_queue = 0, bad_rc = 0, bad_prefix = 0, spins = 0;
    while (next < total && spins < 2000000) {
        size_t n = total - next < BATCH_MAX ? total - next : BATCH_MAX;
        batch_fill(b, next, n);
        size_t accepted = 999;
        int32_t rc = lib.packet_in_batch(q, b->packets, b->lengths, n, &accepted);
        calls++;
        memset(b->bytes, 0xa5, sizeof(b->bytes)); /* the runtime must have copied what it took */
        if (accepted > n) bad_prefix++;
        if (accepted > 4) over_queue++;          /* a queue of 4 cannot take more in one call */
        if (rc == TUNNELGATE_RUNTIME_QUEUE_FULL) {
            full++;
            if (accepted >= n) bad_prefix++;
        } else if (rc == TUNNELGATE_RUNTIME_OK) {
            if (accepted != n) bad_prefix++;
        } else {
            bad_rc++;
        }
        if (accepted <= n) next += (uint32_t)accepted;
        if (rc != TUNNELGATE_RUNTIME_OK) spins++;
    }
    note("%u packets in %u calls, %u answered QUEUE_FULL", next, calls, full);
    check(next == total && bad_rc == 0, "every call returns OK or QUEUE_FULL and all %u packets are taken", total);
    check(bad_prefix == 0, "*accepted is count on OK and less than count on QUEUE_FULL (%u violations)", bad_prefix);
    check(over_queue == 0, "a call never takes more than the queue holds (%u calls took more than 4)", over_queue);
    check(full > 0, "batches of %d into --queue 4 meet QUEUE_FULL", BATCH_MAX);
    check(counter(q, "queueFull") == full, "queueFull counts each call answered QUEUE_FULL (%u)", full);
    check(counter(q, "batchCalls") == calls && counter(q, "batchPackets") == total &&
              counter(q, "packetsIn") == total,
          "batchCalls (%llu of %u), batchPackets and packetsIn (%u) count the calls and the packets taken",
          counter(q, "batchCalls"), calls, total);
    check(counter(q, "batchDirect") == 0, "with --direct-send 0 nothing is sent on the caller's thread");
    char why[128] = "";
    check(WAIT_FOR(sink_count(&sr) >= total) && sink_holds_sequence(&sr, total, why, sizeof(why)),
          "the peer receives exactly packets 0 .. %u in order, bytes equal, though every buffer was overwritten "
          "after each call %s", total - 1, why);
    size_t accepted = 7;
    check(lib.packet_in_batch(q, NULL, NULL, 0, &accepted) == TUNNELGATE_RUNTIME_OK && accepted == 0,
          "an empty batch is OK with nothing taken");
out:
    free(b);
    if (q) lib.stop(q);
    if (r) lib.stop(r);
    sink_free(&sq);
    sink_free(&sr);
}

/* --direct-send 40: while the sender is idle, packet_in_batch calls of up to 40 packets are sealed and sent
 * on the caller's thread; larger ones are queued. Single packet_in calls (which always queue) interleaved with batches from the same caller must
 * still arrive in the caller's order: a batch never overtakes what that caller queued before it. */
static void test_batch_direct(void) {
    sink sd, se;
    sink_init(&sd);
    sink_init(&se);
    unsigned pd = free_port(), pe = free_port();
    void *d = start_ok("BD (--direct-send 40)", &sd, secret, "--bind", addr(pd), "--peer", addr(pe), "--direct-send",
                       "40", NULL);
    void *e = start_ok("BE (peer of BD)", &se, secret, "--bind", addr(pe), "--peer", addr(pd), NULL);
    batch_buf *b = calloc(1, sizeof(*b));
    if (d == NULL || e == NULL || b == NULL) goto out;
    check(WAIT_FOR(state_is(d, "ready")), "BD becomes ready");
    const uint32_t total = 900; /* + 205 below: within the sink's SINK_MAX */
    uint32_t next = 0, calls = 0, bad = 0, singles = 0;
    while (next < total && bad == 0) {
        if (calls % 3 == 2) { /* every third step one packet through packet_in, which queues it */
            size_t len = packet_len_for(next);
            make_packet(b->bytes[0], len, next);
            int32_t rc = lib.packet_in(d, b->bytes[0], len);
            memset(b->bytes[0], 0xa5, len);
            if (rc == TUNNELGATE_RUNTIME_OK) {
                next++;
                singles++;
            } else if (rc != TUNNELGATE_RUNTIME_QUEUE_FULL) {
                bad++;
            }
            calls++;
            continue;
        }
        size_t n = total - next < 40 ? total - next : 40;
        batch_fill(b, next, n);
        size_t accepted = 999;
        int32_t rc = lib.packet_in_batch(d, b->packets, b->lengths, n, &accepted);
        memset(b->bytes, 0xa5, sizeof(b->bytes));
        if ((rc == TUNNELGATE_RUNTIME_OK && accepted != n) || (rc == TUNNELGATE_RUNTIME_QUEUE_FULL && accepted >= n) ||
            (rc != TUNNELGATE_RUNTIME_OK && rc != TUNNELGATE_RUNTIME_QUEUE_FULL))
            bad++;
        else
            next += (uint32_t)accepted;
        calls++;
    }
    check(bad == 0 && next == total, "900 packets taken through batches and single packet_in calls (%u singles)",
          singles);
    unsigned long long direct = counter(d, "batchDirect"), batched = counter(d, "batchPackets");
    note("batchDirect %llu of batchPackets %llu", direct, batched);
    check(direct > 0 && direct <= batched, "batches were sealed and sent on the caller's thread (batchDirect %llu)",
          direct);
    char why[128] = "";
    check(WAIT_FOR(sink_count(&se) >= total) && sink_holds_sequence(&se, total, why, sizeof(why)),
          "the peer receives packets 0 .. %u in the caller's order, bytes equal %s", total - 1, why);
    /* Batches larger than --direct-send go through the queue, even with the sender idle. */
    uint32_t large_ok = 0;
    for (uint32_t k = 0; k < 5; k++) {
        WAIT_FOR(sink_count(&se) >= total + 41 * k); /* the sender has drained the previous one */
        batch_fill(b, total + 41 * k, 41);
        size_t accepted = 0;
        if (lib.packet_in_batch(d, b->packets, b->lengths, 41, &accepted) == TUNNELGATE_RUNTIME_OK && accepted == 41)
            large_ok++;
    }
    check(large_ok == 5 && counter(d, "batchDirect") == direct,
          "batches of 41 are queued, not sent directly (batchDirect stays %llu)", direct);
    check(WAIT_FOR(sink_count(&se) >= total + 205) && sink_holds_sequence(&se, total + 205, why, sizeof(why)),
          "... and arrive in order after the others %s", why);
out:
    free(b);
    if (d) lib.stop(d);
    if (e) lib.stop(e);
    sink_free(&sd);
    sink_free(&se);
}

/* What packet_in_batch refuses, and what it takes of a batch before the refused packet. */
static void test_batch_refusals(void) {
    sink sa, sb;
    sink_init(&sa);
    sink_init(&sb);
    unsigned pa = free_port(), pb = free_port();
    void *a = start_ok("BA", &sa, secret, "--bind", addr(pa), "--peer", addr(pb), "--tun-mtu", "1400", NULL);
    void *b = start_ok("BB (peer of BA)", &sb, secret, "--bind", addr(pb), "--peer", addr(pa), NULL);
    batch_buf *buf = calloc(1, sizeof(*buf));
    if (a == NULL || b == NULL || buf == NULL) goto out;
    check(WAIT_FOR(state_is(a, "ready")), "BA becomes ready");
    size_t accepted = 99;
    batch_fill(buf, 0, 4);
    check(lib.packet_in_batch(NULL, buf->packets, buf->lengths, 4, &accepted) == TUNNELGATE_RUNTIME_INVALID_ARGUMENT &&
              accepted == 0,
          "a NULL handle is INVALID_ARGUMENT, nothing taken");
    check(lib.packet_in_batch(a, buf->packets, buf->lengths, 4, NULL) == TUNNELGATE_RUNTIME_INVALID_ARGUMENT,
          "a NULL accepted is INVALID_ARGUMENT");
    accepted = 99;
    check(lib.packet_in_batch(a, NULL, buf->lengths, 4, &accepted) == TUNNELGATE_RUNTIME_INVALID_ARGUMENT &&
              accepted == 0,
          "a NULL packets array is INVALID_ARGUMENT, nothing taken");
    accepted = 99;
    check(lib.packet_in_batch(a, buf->packets, NULL, 4, &accepted) == TUNNELGATE_RUNTIME_INVALID_ARGUMENT &&
              accepted == 0,
          "a NULL lengths array is INVALID_ARGUMENT, nothing taken");
    int not_a_handle = 0;
    accepted = 99;
    check(lib.packet_in_batch(&not_a_handle, buf->packets, buf->lengths, 4, &accepted) ==
                  TUNNELGATE_RUNTIME_INVALID_STATE && accepted == 0,
          "a handle start never returned is INVALID_STATE, nothing taken");
    check(counter(a, "batchCalls") == 0 && counter(a, "packetsIn") == 0, "none of these took a packet");

    /* Packets 0, 1 good; 2 bad: the first two are taken, the call stops at the third. */
    struct {
        const char *what;
        const uint8_t *packet;
        size_t len;
    } bad[] = {{"an empty packet", buf->bytes[2], 0}, {"a NULL packet", NULL, 20},
               {"a packet over the MTU (1401 bytes)", buf->bytes[2], 1401}};
    uint32_t seq = 0;
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        batch_fill(buf, seq, 4);
        buf->packets[2] = bad[k].packet;
        buf->lengths[2] = bad[k].len;
        accepted = 99;
        int32_t rc = lib.packet_in_batch(a, buf->packets, buf->lengths, 4, &accepted);
        check(rc == TUNNELGATE_RUNTIME_INVALID_ARGUMENT && accepted == 2,
              "%s at index 2: INVALID_ARGUMENT with the two before it taken (rc %d, accepted %zu)", bad[k].what, rc,
              accepted);
        /* The host drops the refused packet and goes on with the rest. */
        rc = lib.packet_in_batch(a, buf->packets + 3, buf->lengths + 3, 1, &accepted);
        check(rc == TUNNELGATE_RUNTIME_OK && accepted == 1, "... and the packet after it is taken by the next call");
        seq += 4;
    }
    check(counter(a, "dropsOversize") == 1, "the packet over the MTU is counted in dropsOversize");
    check(counter(a, "packetsIn") == 9 && counter(a, "batchPackets") == 9, "packetsIn and batchPackets count the 9 taken");
    check(WAIT_FOR(sink_count(&sb) >= 9), "the 9 taken packets arrive at the peer");

    lib.stop(a);
    batch_fill(buf, 0, 4);
    accepted = 99;
    check(lib.packet_in_batch(a, buf->packets, buf->lengths, 4, &accepted) == TUNNELGATE_RUNTIME_INVALID_STATE &&
              accepted == 0,
          "after stop: INVALID_STATE, nothing taken");
    a = NULL;
out:
    free(buf);
    if (a) lib.stop(a);
    if (b) lib.stop(b);
    sink_free(&sa);
    sink_free(&sb);
}

/* Peers with different secrets: nothing is delivered; dropsAuth counts. */
static void test_wrong_secret(void) {
    sink sc, sd;
    sink_init(&sc);
    sink_init(&sd);
    unsigned pc = free_port(), pd = free_port();
    void *c = start_ok("C (secret 1)", &sc, secret, "--bind", addr(pc), "--peer", addr(pd), NULL);
    void *d = start_ok("D (secret 2)", &sd, "a different secret", "--bind", addr(pd), "--peer", addr(pc), NULL);
    if (c == NULL || d == NULL) goto out;
    check(WAIT_FOR(state_is(c, "ready")), "C becomes ready");
    uint8_t pkt[100];
    for (uint32_t i = 0; i < 10; i++) {
        make_packet(pkt, sizeof(pkt), i);
        while (lib.packet_in(c, pkt, sizeof(pkt)) == TUNNELGATE_RUNTIME_QUEUE_FULL) nap_ms(1);
    }
    bool counted = WAIT_FOR(counter(d, "dropsAuth") >= 11);
    check(counted, "D counts C's 10 packets and its keepalive in dropsAuth (%llu)", counter(d, "dropsAuth"));
    check(sink_count(&sd) == 0 && counter(d, "packetsOut") == 0, "D's writer is never called");
    check(field_is(d, "peer", addr(pc)), "D does not roam on unauthenticated datagrams");
out:
    if (c) lib.stop(c);
    if (d) lib.stop(d);
    sink_free(&sc);
    sink_free(&sd);
}

/* The wire format, spoken by the test itself (docs/runtime-abi.md): key derivation and sealing. */
#define WIRE_CONTEXT "tunnelgate example runtime v1"

static void wire_key(uint8_t key[32], const char *sec) {
    crypto_generichash(key, 32, (const uint8_t *)sec, strlen(sec), (const uint8_t *)WIRE_CONTEXT,
                       strlen(WIRE_CONTEXT));
}

static size_t wire_seal(uint8_t *out, uint8_t type, const uint8_t nonce[24], const uint8_t *p, size_t len,
                        const uint8_t key[32]) {
    out[0] = 1;
    out[1] = type;
    out[2] = out[3] = 0;
    memcpy(out + 4, nonce, 24);
    unsigned long long clen;
    crypto_aead_xchacha20poly1305_ietf_encrypt(out + 28, &clen, p, len, out, 4, NULL, out + 4, key);
    return 28 + (size_t)clen;
}

static void hex(char *out, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", b[i]);
}

static void test_wire_vectors(void) {
    uint8_t key[32];
    char text[256];
    wire_key(key, "example secret");
    hex(text, key, 32);
    /* Computed independently: python3 -c "import hashlib; print(hashlib.blake2b(b'example secret',
     * digest_size=32, key=b'tunnelgate example runtime v1').hexdigest())" */
    check(strcmp(text, "5c3112e5c56fe9073a940b6c2a4baa81c5cb86323b4d087f74da30be172f5d62") == 0,
          "key derivation matches the documented vector");
    uint8_t nonce[24], out[128];
    for (int i = 0; i < 24; i++) nonce[i] = (uint8_t)i;
    const uint8_t ip[20] = {0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2};
    size_t n = wire_seal(out, 1, nonce, ip, sizeof(ip), key);
    hex(text, out, n);
    check(n == 64 && strcmp(text, "01010000000102030405060708090a0b0c0d0e0f1011121314151617a7b7c3f2db075afe80f166e7ef"
                                  "a8fd95ed8916da0face4d8287de28a715240a4fdd678b8") == 0,
          "a sealed data datagram matches the documented vector");
}

/* Garbage at the runtime's socket: counted, never a crash, never a roam. Then the real thing. */
static void test_garbage_and_wire_format(void) {
    sink se;
    sink_init(&se);
    unsigned pe = free_port(), pz = free_port(), pg;
    int g = udp_socket_on_loopback(&pg);
    void *e = start_ok("E (--peer an idle port, --tun-mtu 1400)", &se, secret, "--bind", addr(pe), "--peer",
                       addr(pz), "--tun-mtu", "1400", "--keepalive-ms", "100", NULL);
    if (e == NULL) goto out;
    check(WAIT_FOR(state_is(e, "ready")), "E becomes ready");

    uint8_t d[4000];
    memset(d, 0, sizeof(d));
    send_to_port(g, pe, d, 0);                            /* empty */
    send_to_port(g, pe, d, 1);                            /* one byte */
    send_to_port(g, pe, d, 43);                           /* one byte short of the smallest datagram */
    d[0] = 9; send_to_port(g, pe, d, 44);                 /* unknown version */
    d[0] = 1; d[1] = 7; send_to_port(g, pe, d, 60);       /* unknown type */
    d[1] = 1; d[2] = 1; send_to_port(g, pe, d, 60);       /* reserved bits set */
    d[2] = 0;
    randombytes_buf(d + 4, 200);
    send_to_port(g, pe, d, 204);                          /* right header, random ciphertext */
    randombytes_buf(d, sizeof(d));
    send_to_port(g, pe, d, 1400 + 44 + 1);                /* larger than an MTU-sized packet's datagram */
    check(WAIT_FOR(counter(e, "datagramsReceived") >= 8), "E receives the 8 garbage datagrams");
    check(WAIT_FOR(counter(e, "dropsMalformed") == 6 && counter(e, "dropsAuth") == 1 &&
                   counter(e, "dropsOversize") == 1),
          "6 malformed, 1 unauthenticated, 1 oversize: malformed=%llu auth=%llu oversize=%llu",
          counter(e, "dropsMalformed"), counter(e, "dropsAuth"), counter(e, "dropsOversize"));
    check(sink_count(&se) == 0 && field_is(e, "peer", addr(pz)) && !state_is(e, "failed"),
          "garbage reaches no writer, moves no peer, fails nothing");

    /* A datagram sealed by the test: delivered, and E roams to the test socket's address. */
    uint8_t key[32], nonce[24], pkt[1400];
    wire_key(key, secret);
    make_packet(pkt, 1400, 77);
    randombytes_buf(nonce, sizeof(nonce));
    size_t n = wire_seal(d, 1, nonce, pkt, 1400, key);
    send_to_port(g, pe, d, n);
    check(WAIT_FOR(sink_count(&se) == 1) && se.lengths[0] == 1400 && memcmp(se.packets[0], pkt, 1400) == 0,
          "a datagram sealed by the test per the documented format is delivered, bytes equal");
    check(WAIT_FOR(field_is(e, "peer", addr(pg))), "E roams to the address of the last authenticated datagram");

    /* Authentic but not an IP packet; authentic keepalive with a payload. */
    randombytes_buf(nonce, sizeof(nonce));
    n = wire_seal(d, 1, nonce, (const uint8_t *)"\x00\x01\x02", 3, key);
    send_to_port(g, pe, d, n);
    randombytes_buf(nonce, sizeof(nonce));
    n = wire_seal(d, 2, nonce, (const uint8_t *)"x", 1, key);
    send_to_port(g, pe, d, n);
    check(WAIT_FOR(counter(e, "dropsMalformed") == 8) && sink_count(&se) == 1,
          "an authentic non-IP payload and a keepalive with a payload are malformed, not delivered");

    /* E -> test socket: a keepalive, then a data packet; the test opens them itself. */
    uint8_t packet_out[300];
    make_packet(packet_out, sizeof(packet_out), 5);
    lib.packet_in(e, packet_out, sizeof(packet_out));
    bool got_keepalive = false, got_data = false;
    long deadline = now_ms() + wait_ms;
    while ((!got_keepalive || !got_data) && now_ms() < deadline) {
        struct pollfd p = {.fd = g, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0) continue;
        ssize_t len = recv(g, d, sizeof(d), 0);
        unsigned long long plen = 0;
        uint8_t plain[2000];
        if (len < 44 || d[0] != 1 || d[2] != 0 || d[3] != 0) continue;
        if (crypto_aead_xchacha20poly1305_ietf_decrypt(plain, &plen, NULL, d + 28, (size_t)len - 28, d, 4, d + 4,
                                                       key) != 0)
            continue;
        if (d[1] == 2 && plen == 0) got_keepalive = true;
        if (d[1] == 1 && plen == sizeof(packet_out) && memcmp(plain, packet_out, plen) == 0) got_data = true;
    }
    check(got_keepalive, "E's keepalives open with the documented format (type 2, empty payload)");
    check(got_data, "E's data datagrams open with the documented format, bytes equal");
out:
    if (e) lib.stop(e);
    close(g);
    sink_free(&se);
}

/* The peer stops: "reconnecting" after --silence-ms; it restarts: "ready" again; stop twice is safe. */
static void test_reconnect_and_stop(void) {
    sink sa, sb;
    sink_init(&sa);
    sink_init(&sb);
    unsigned pa = free_port(), pb = free_port();
    void *a = start_ok("A (--silence-ms 300 --keepalive-ms 50)", &sa, secret, "--bind", addr(pa), "--peer",
                       addr(pb), "--silence-ms", "300", "--keepalive-ms", "50", NULL);
    void *b = start_ok("B", &sb, secret, "--bind", addr(pb), "--peer", addr(pa), "--silence-ms", "300",
                       "--keepalive-ms", "50", NULL);
    if (a == NULL || b == NULL) goto out;
    check(WAIT_FOR(state_is(a, "ready") && state_is(b, "ready")), "A and B are ready");
    /* Still ready after twice the silence window: keepalives carry liveness. */
    long t0 = now_ms();
    bool stayed = true;
    while (now_ms() - t0 < 600) {
        stayed = stayed && state_is(a, "ready");
        nap_ms(20);
    }
    check(stayed, "A stays ready across twice --silence-ms while B's keepalives arrive");

    lib.stop(b);
    atomic_store(&sb.closed, true);
    long stopped_at = now_ms();
    bool reconnecting = WAIT_FOR(state_is(a, "reconnecting"));
    check(reconnecting, "A turns \"reconnecting\" after B stopped (%ld ms, --silence-ms 300)", now_ms() - stopped_at);
    check(field_is(a, "interface", "example-udp"), "a reconnecting runtime keeps its interface");
    uint8_t pkt[200];
    make_packet(pkt, sizeof(pkt), 0);
    check(lib.packet_in(a, pkt, sizeof(pkt)) == TUNNELGATE_RUNTIME_OK, "packet_in still accepts while reconnecting");

    /* Stopped handle: every entry point recognises it without touching it. */
    lib.stop(b);
    check(true, "a second stop on the same handle returns (no crash)");
    lib.mehs_stop(b);
    status_buf st;
    check(strcmp(status_of(b, &st), "{\"state\":\"stopped\",\"interface\":null}") == 0,
          "status of a stopped handle is {\"state\":\"stopped\",\"interface\":null}");
    check(lib.packet_in(b, pkt, sizeof(pkt)) == TUNNELGATE_RUNTIME_INVALID_STATE, "packet_in after stop is "
                                                                                  "INVALID_STATE");
    uint8_t reply[16];
    size_t reply_len;
    check(lib.app_message(b, (const uint8_t *)"ping", 4, reply, sizeof(reply), &reply_len) ==
              TUNNELGATE_RUNTIME_INVALID_STATE,
          "app_message after stop is INVALID_STATE");

    /* The packet accepted while reconnecting reaches B2 only if A's sender had not sent it before B2
     * bound the port (UDP, no retransmission): either is correct, so the check below looks for the
     * packet sent after B2 is back, wherever it sits among what B2 received. */
    sink sb2;
    sink_init(&sb2);
    void *b2 = start_ok("B again on the same port", &sb2, secret, "--bind", addr(pb), "--peer", addr(pa),
                        "--silence-ms", "300", "--keepalive-ms", "50", NULL);
    if (b2 != NULL) {
        check(WAIT_FOR(state_is(a, "ready")), "A is \"ready\" again once B is back");
        uint8_t fresh[100];
        make_packet(fresh, sizeof(fresh), 4242);
        lib.packet_in(a, fresh, sizeof(fresh));
        bool found = false;
        long deadline = now_ms() + wait_ms;
        while (!found && now_ms() < deadline) {
            pthread_mutex_lock(&sb2.lock);
            for (size_t i = 0; i < sb2.stored && !found; i++)
                found = sb2.lengths[i] == sizeof(fresh) && memcmp(sb2.packets[i], fresh, sizeof(fresh)) == 0;
            pthread_mutex_unlock(&sb2.lock);
            if (!found) nap_ms(5);
        }
        check(found, "packets flow to the restarted B, bytes equal (B2 received %zu packets)", sink_count(&sb2));
        lib.stop(b2);
    }
    sink_free(&sb2);
    check(atomic_load(&sb.late_calls) == 0, "B's writer was never called after its stop returned");
out:
    if (a) lib.stop(a);
    sink_free(&sa);
    sink_free(&sb);
}

/* fd path: a SOCK_SEQPACKET socketpair stands in for the TUN descriptor. */
/* Before the runtime is ready (here held in "starting" by --start-delay-ms, a test hook), status has no
 * interface and packet_in and packet_in_batch answer INVALID_STATE, taking nothing; once it is ready they
 * take packets. */
static void test_invalid_state_while_starting(void) {
    sink sa;
    sink_init(&sa);
    unsigned pa = free_port(), pb = free_port();
    void *a = start_ok("A (--start-delay-ms 400)", &sa, secret, "--bind", addr(pa), "--peer", addr(pb),
                       "--start-delay-ms", "400", NULL);
    batch_buf *buf = calloc(1, sizeof(*buf));
    if (a == NULL || buf == NULL) goto out;
    status_buf st;
    const char *json = status_of(a, &st);
    check(state_is(a, "starting") && strstr(json, "\"interface\":null") != NULL,
          "while starting: state starting, interface null (%s)", json);
    uint8_t pkt[120];
    make_packet(pkt, sizeof(pkt), 0);
    check(lib.packet_in(a, pkt, sizeof(pkt)) == TUNNELGATE_RUNTIME_INVALID_STATE, "packet_in while starting is INVALID_STATE");
    batch_fill(buf, 0, 4);
    size_t accepted = 99;
    int32_t rc = lib.packet_in_batch(a, buf->packets, buf->lengths, 4, &accepted);
    check(rc == TUNNELGATE_RUNTIME_INVALID_STATE && accepted == 0,
          "packet_in_batch while starting is INVALID_STATE, nothing taken (rc %d, accepted %zu)", rc, accepted);
    check(WAIT_FOR(state_is(a, "ready") || state_is(a, "reconnecting")), "after the delay it has started");
    check(field_is(a, "interface", "example-udp"), "... with its interface");
    check(lib.packet_in(a, pkt, sizeof(pkt)) == TUNNELGATE_RUNTIME_OK, "... and packet_in takes packets");
out:
    free(buf);
    if (a != NULL) lib.stop(a);
    atomic_store(&sa.closed, true);
    sink_free(&sa);
}

/* --start-silent 1 (a test hook): the silence is already over at start, so the very first status poll says
 * reconnecting (with its interface), whatever the timing; the peer's first keepalive makes it ready. Without
 * it a first poll within --silence-ms of start says ready. */
static void test_start_silent(void) {
    sink sa, sb, sc;
    sink_init(&sa);
    sink_init(&sb);
    sink_init(&sc);
    unsigned pa = free_port(), pb = free_port(), pc = free_port();
    void *a = start_ok("A (--start-silent 1)", &sa, secret, "--bind", addr(pa), "--peer", addr(pb),
                       "--start-silent", "1", "--keepalive-ms", "50", NULL);
    void *c = start_ok("C (no --start-silent)", &sc, secret, "--bind", addr(pc), "--peer", addr(free_port()), NULL);
    void *b = NULL;
    if (a == NULL || c == NULL) goto out;
    /* The first poll after its threads are up (before that it says "starting", whatever the options). */
    check(WAIT_FOR(!state_is(a, "starting")) && state_is(a, "reconnecting") && field_is(a, "interface", "example-udp"),
          "--start-silent 1: reconnecting with its interface at the first poll once started");
    check(WAIT_FOR(!state_is(c, "starting")) && state_is(c, "ready"),
          "without it: ready at the first poll once started (--silence-ms 3000 not over)");
    b = start_ok("B (A's peer)", &sb, secret, "--bind", addr(pb), "--peer", addr(pa), "--keepalive-ms", "50", NULL);
    if (b == NULL) goto out;
    check(WAIT_FOR(state_is(a, "ready")), "A turns ready once it hears B");
out:
    if (a != NULL) lib.stop(a);
    if (b != NULL) lib.stop(b);
    if (c != NULL) lib.stop(c);
    atomic_store(&sa.closed, true);
    atomic_store(&sb.closed, true);
    atomic_store(&sc.closed, true);
    sink_free(&sa);
    sink_free(&sb);
    sink_free(&sc);
}

static void test_fd_path(void) {
    sink sh;
    sink_init(&sh);
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) {
        check(false, "socketpair: %s", strerror(errno));
        return;
    }
    unsigned pf = free_port(), ph = free_port();
    char fd_text[16];
    snprintf(fd_text, sizeof(fd_text), "%d", sp[1]);
    void *f = start_ok("F (--tun-fd, no writer)", NULL, secret, "--bind", addr(pf), "--peer", addr(ph),
                       "--tun-mtu", "1400", "--tun-fd", fd_text, NULL);
    void *h = start_ok("H (callback path)", &sh, secret, "--bind", addr(ph), "--peer", addr(pf), "--tun-mtu",
                       "1400", NULL);
    if (f == NULL || h == NULL) goto out;
    check(WAIT_FOR(state_is(f, "ready") && state_is(h, "ready")), "F and H become ready");
    check(field_is(f, "packetPath", "fd"), "F reports packetPath \"fd\"");
    check((fcntl(sp[1], F_GETFL) & O_NONBLOCK) != 0, "F made the descriptor non-blocking");

    uint8_t pkt[SINK_PACKET];
    make_packet(pkt, 100, 1);
    check(lib.packet_in(f, pkt, 100) == TUNNELGATE_RUNTIME_INVALID_STATE, "packet_in on the fd path is "
                                                                          "INVALID_STATE");
    {
        const uint8_t *one[1] = {pkt};
        size_t len[1] = {100}, accepted = 99;
        check(lib.packet_in_batch(f, one, len, 1, &accepted) == TUNNELGATE_RUNTIME_INVALID_STATE && accepted == 0,
              "packet_in_batch on the fd path is INVALID_STATE, nothing taken");
    }

    /* "TUN" -> F -> H's writer. */
    for (uint32_t i = 0; i < 50; i++) {
        make_packet(pkt, packet_len_for(i), i);
        if (write(sp[0], pkt, packet_len_for(i)) < 0) note("write: %s", strerror(errno));
    }
    char why[128] = "";
    check(WAIT_FOR(sink_count(&sh) >= 50) && sink_holds_sequence(&sh, 50, why, sizeof(why)),
          "50 packets written to the descriptor arrive at H's writer, bytes equal %s", why);
    make_packet(pkt, 1401, 9);
    if (write(sp[0], pkt, 1401) < 0) note("write: %s", strerror(errno));
    check(WAIT_FOR(counter(f, "dropsOversize") == 1), "a packet over the MTU read from the descriptor is counted");

    /* H's packet_in -> F -> the descriptor. */
    int got = 0;
    bool equal = true;
    for (uint32_t i = 0; i < 50; i++) {
        make_packet(pkt, packet_len_for(i), i);
        while (lib.packet_in(h, pkt, packet_len_for(i)) == TUNNELGATE_RUNTIME_QUEUE_FULL) nap_ms(1);
    }
    long deadline = now_ms() + wait_ms;
    while (got < 50 && now_ms() < deadline) {
        struct pollfd p = {.fd = sp[0], .events = POLLIN};
        if (poll(&p, 1, 50) <= 0) continue;
        uint8_t in[SINK_PACKET];
        ssize_t n = read(sp[0], in, sizeof(in));
        make_packet(pkt, packet_len_for((uint32_t)got), (uint32_t)got);
        if (n != (ssize_t)packet_len_for((uint32_t)got) || memcmp(in, pkt, (size_t)n) != 0) equal = false;
        got++;
    }
    check(got == 50 && equal, "50 packets sent into H come out of the descriptor, in order, bytes equal");
    check(WAIT_FOR(counter(f, "packetsOut") == 50 && counter(f, "packetsIn") == 50), "F counts 50 in and 50 out");

    /* The other end of the "TUN" closes: F fails, says why, and gives up its interface. */
    close(sp[0]);
    sp[0] = -1;
    check(WAIT_FOR(state_is(f, "failed")), "F fails when its descriptor's other end closes");
    status_buf st;
    status_of(f, &st);
    note("F: %s", st.json);
    check(strstr(st.json, "\"interface\":null") && strstr(st.json, "closed by its other end"),
          "a failed status has interface null and an \"error\"");
    lib.stop(f);
    f = NULL;
    check(fcntl(sp[1], F_GETFD) >= 0, "stop leaves the host's descriptor open");
out:
    if (f) lib.stop(f);
    if (h) lib.stop(h);
    if (sp[0] >= 0) close(sp[0]);
    close(sp[1]);
    sink_free(&sh);
}

/* stop while another thread keeps calling packet_in and packet_in_batch (which, with the sender idle,
 * seals and sends on that thread) and the peer keeps the writer busy. */
typedef struct {
    void *handle;
    atomic_bool run;
    atomic_long ok, invalid_state;
} flood;

static void *flood_main(void *arg) {
    flood *fl = arg;
    uint8_t pkt[500];
    make_packet(pkt, sizeof(pkt), 3);
    const uint8_t *batch[16];
    size_t lengths[16];
    for (size_t i = 0; i < 16; i++) {
        batch[i] = pkt;
        lengths[i] = sizeof(pkt);
    }
    for (unsigned long round = 0; atomic_load(&fl->run); round++) {
        size_t accepted = 0;
        int32_t rc = round % 2 == 0 ? lib.packet_in(fl->handle, pkt, sizeof(pkt))
                                    : lib.packet_in_batch(fl->handle, batch, lengths, 16, &accepted);
        if (rc == TUNNELGATE_RUNTIME_OK) atomic_fetch_add(&fl->ok, 1);
        if (rc == TUNNELGATE_RUNTIME_INVALID_STATE) {
            atomic_fetch_add(&fl->invalid_state, 1);
            break;
        }
    }
    return NULL;
}

static void test_stop_under_load(void) {
    sink sa, sb;
    sink_init(&sa);
    sink_init(&sb);
    unsigned pa = free_port(), pb = free_port();
    void *a = start_ok("A (flooded)", &sa, secret, "--bind", addr(pa), "--peer", addr(pb), NULL);
    void *b = start_ok("B (flooded)", &sb, secret, "--bind", addr(pb), "--peer", addr(pa), NULL);
    if (a == NULL || b == NULL) goto out;
    WAIT_FOR(state_is(a, "ready") && state_is(b, "ready"));
    flood to_a = {.handle = a}, to_b = {.handle = b};
    atomic_store(&to_a.run, true);
    atomic_store(&to_b.run, true);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, flood_main, &to_a);
    pthread_create(&tb, NULL, flood_main, &to_b);
    WAIT_FOR(sink_count(&sa) > 200 && sink_count(&sb) > 200);
    lib.stop(b); /* while B's writer is busy and another thread is in B's packet_in */
    atomic_store(&sb.closed, true);
    pthread_join(tb, NULL);
    check(atomic_load(&to_b.invalid_state) == 1, "packet_in and packet_in_batch racing stop end with INVALID_STATE (%ld calls OK)",
          atomic_load(&to_b.ok));
    check(state_is(a, "ready") || state_is(a, "reconnecting"), "A runs on after its peer stopped");
    atomic_store(&to_a.run, false);
    pthread_join(ta, NULL);
    lib.stop(a);
    atomic_store(&sa.closed, true);
    a = b = NULL;
    check(atomic_load(&sb.late_calls) == 0 && atomic_load(&sa.late_calls) == 0,
          "no writer call after stop returned (B: %zu calls, A: %zu calls)", sink_count(&sb), sink_count(&sa));
out:
    if (a) lib.stop(a);
    if (b) lib.stop(b);
    sink_free(&sa);
    sink_free(&sb);
}

static void test_start_stop_cycles(void) {
    int ok = 0;
    for (int i = 0; i < 25; i++) {
        void *h = NULL;
        char err[128];
        size_t err_len;
        int32_t rc = lib.start("[\"--bind\", \"127.0.0.1:0\", \"--peer\", \"127.0.0.1:9\", \"--queue\", \"16\"]",
                               secret, sink_writer, NULL, &h, err, sizeof(err), &err_len);
        if (rc == TUNNELGATE_RUNTIME_OK) {
            if (i % 2 == 0) WAIT_FOR(state_is(h, "ready")); /* stop both while starting and once ready */
            lib.stop(h);
            ok++;
        }
    }
    check(ok == 25, "25 start/stop cycles (stopping while starting and while ready)");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s LIBRARY.so\n", argv[0]);
        return 64;
    }
    const char *w = getenv("TG_TEST_WAIT_MS");
    if (w != NULL) wait_ms = atol(w);
    if (sodium_init() < 0) return 1;
    void *so = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (so == NULL) {
        fprintf(stderr, "Error: dlopen(%s): %s\n", argv[1], dlerror());
        return 1;
    }
    *(void **)&lib.start = dlsym(so, "tunnelgate_runtime_start");
    *(void **)&lib.packet_in = dlsym(so, "tunnelgate_runtime_packet_in");
    *(void **)&lib.packet_in_batch = dlsym(so, "tunnelgate_runtime_packet_in_batch");
    *(void **)&lib.status = dlsym(so, "tunnelgate_runtime_status");
    *(void **)&lib.stop = dlsym(so, "tunnelgate_runtime_stop");
    *(void **)&lib.app_message = dlsym(so, "tunnelgate_runtime_app_message");
    *(void **)&lib.mehs_start = dlsym(so, "mehs_ios_runtime_start");
    *(void **)&lib.mehs_packet_in = dlsym(so, "mehs_ios_runtime_packet_in");
    *(void **)&lib.mehs_status = dlsym(so, "mehs_runtime_status");
    *(void **)&lib.mehs_stop = dlsym(so, "mehs_runtime_stop");
    test_symbols();
    if (failed == 0) {
        test_argument_errors();
        test_wire_vectors();
        test_tunnel();
        test_queue_full();
        test_batch();
        test_batch_direct();
        test_batch_refusals();
        test_wrong_secret();
        test_garbage_and_wire_format();
        test_reconnect_and_stop();
        test_invalid_state_while_starting();
        test_start_silent();
        test_fd_path();
        test_stop_under_load();
        test_start_stop_cycles();
    }
    dlclose(so);
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
