/*
 * TEST FIXTURE — NOT MeshGuard. A stand-in for libmeshguard-ffi.so with the same C signatures as the
 * parts of MeshGuard's C ABI that Tunnelgate's mesh runtime binds (checked against MeshGuard's
 * src/meshguard_ffi.zig), so that the end-to-end tests can run two Tunnelgate instances over a "mesh"
 * without the real library (CI cannot build it: it needs Zig).
 *
 * What it really does: payloads travel over real UDP between processes. There is NO encryption, NO
 * WireGuard, NO NAT traversal, NO relays: never use it for anything but tests.
 *
 * What it shares with MeshGuard, so the tests exercise the same paths as a real run:
 *   identity  = the Ed25519 public key of the 32-byte seed (libsodium's crypto_sign_seed_keypair: the
 *               RFC 8032 derivation MeshGuard's meshguard_init uses);
 *   mesh IPv4 = 10.99.a.b from BLAKE3(identity), as MeshGuard derives it (a = h[0], 0 -> 1;
 *               b = h[1], 0 -> 1, 255 -> 254);
 *   tunnels   = a "device" per context: meshguard_tunnel_open puts the peer in it and sends a handshake
 *               ('I'); a peer that receives one from a member puts the sender in its device with a
 *               session and answers ('R'), which gives the opener its session. meshguard_tunnel_send
 *               answers -4 (not in the device), -5 (no session yet) like MeshGuard; data ('D') from a
 *               sender without a session is dropped (a restarted peer has none), as WireGuard drops it;
 *               meshguard_tunnel_open refuses a second handshake to a peer within 5 s (-7);
 *   peers     = the alive ones only in meshguard_peer_count / meshguard_get_peers; every member in
 *               meshguard_get_peer_info (48 bytes, the same layout).
 *
 *   every 100 ms the event loop sends HELLO(identity, mesh IPv4) to the joined seed and to every known
 *   peer; a peer is alive while heard from within 600 ms, suspected until 1.5 s, dead after;
 *   datagrams: 'H' identity[32] meship[4]  |  'I'/'R' identity[32]  |  'D' identity[32] payload (<= 1,396);
 *   the tunnel receive queue holds 256 entries, one consumer, drops when full (like MeshGuard's).
 *
 * Test hooks: $MESHGUARD_STANDIN_CONTROL names a directory; when a file "spoof" appears in it, the event
 * loop sends every alive peer one ICMP echo request whose source is 10.99.0.9 (outside any allowed
 * prefix, and never a derived address: the third octet of one is never 0) and removes the file.
 * $MESHGUARD_STANDIN_LOG names a file to which init/join/destroy append a line, so tests can count
 * meshguard_destroy calls.
 *
 * Build: Tests/MeshGuardStandIn/build.sh OUTDIR (gcc, libsodium; with -DSTANDIN_OMIT_RECV: the variant
 * missing a required symbol).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_PEERS 32
#define QUEUE_SLOTS 256
#define MAX_PAYLOAD 1396

typedef struct {
    uint8_t id[32];
    struct sockaddr_in addr;
    uint8_t meship[4];
    double last_seen;
    bool in_device;     /* in the "WireGuard device": tunnel_open called, or the peer's handshake came */
    bool session;       /* a handshake completed */
    double last_init;   /* our last handshake initiation to it (5 s limit) */
} peer_t;

typedef struct {
    uint8_t data[1500];
    uint32_t len;
    uint8_t sender[32];
} entry_t;

typedef struct meshguard_ctx {
    int fd;
    uint16_t port;
    uint8_t id[32];
    uint8_t meship[4];
    pthread_mutex_t lock;
    peer_t peers[MAX_PEERS];
    int npeers;
    struct sockaddr_in seed;
    bool joined, running, suspended;
    pthread_t loop;
    entry_t *queue;
    int qhead, qcount;
    uint32_t sent, received, raw_received, ticks;
    uint64_t direct_sends, failed_routes, queue_drops;
} meshguard_ctx;

/* --- BLAKE3 of at most one 64-byte block (a 32-byte key), written from the BLAKE3 specification ------ */
static const uint32_t B3_IV[8] = {0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A,
                                  0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19};
static const int B3_PERM[16] = {2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8};

static uint32_t rotr32(uint32_t x, int n) { return x >> n | x << (32 - n); }

static void b3_g(uint32_t *v, int a, int b, int c, int d, uint32_t x, uint32_t y) {
    v[a] += v[b] + x; v[d] = rotr32(v[d] ^ v[a], 16);
    v[c] += v[d];     v[b] = rotr32(v[b] ^ v[c], 12);
    v[a] += v[b] + y; v[d] = rotr32(v[d] ^ v[a], 8);
    v[c] += v[d];     v[b] = rotr32(v[b] ^ v[c], 7);
}

static void blake3_small(const uint8_t *in, size_t len, uint8_t out[32]) {
    uint32_t m[16] = {0}, v[16], t[16];
    for (size_t i = 0; i < len && i < 64; i++) m[i / 4] |= (uint32_t)in[i] << (8 * (i % 4));
    memcpy(v, B3_IV, sizeof B3_IV);
    memcpy(v + 8, B3_IV, 4 * sizeof(uint32_t));
    v[12] = 0; v[13] = 0; v[14] = (uint32_t)len; v[15] = 1 | 2 | 8; /* CHUNK_START | CHUNK_END | ROOT */
    for (int r = 0; r < 7; r++) {
        b3_g(v, 0, 4, 8, 12, m[0], m[1]);   b3_g(v, 1, 5, 9, 13, m[2], m[3]);
        b3_g(v, 2, 6, 10, 14, m[4], m[5]);  b3_g(v, 3, 7, 11, 15, m[6], m[7]);
        b3_g(v, 0, 5, 10, 15, m[8], m[9]);  b3_g(v, 1, 6, 11, 12, m[10], m[11]);
        b3_g(v, 2, 7, 8, 13, m[12], m[13]); b3_g(v, 3, 4, 9, 14, m[14], m[15]);
        for (int i = 0; i < 16; i++) t[i] = m[B3_PERM[i]];
        memcpy(m, t, sizeof m);
    }
    for (int i = 0; i < 8; i++) {
        uint32_t w = v[i] ^ v[i + 8];
        for (int b = 0; b < 4; b++) out[4 * i + b] = (uint8_t)(w >> (8 * b));
    }
}

/* MeshGuard's mesh IPv4 of an identity. */
static void derive_meship(const uint8_t id[32], uint8_t ip[4]) {
    uint8_t h[32];
    blake3_small(id, 32, h);
    ip[0] = 10; ip[1] = 99;
    ip[2] = h[0] == 0 ? 1 : h[0];
    ip[3] = h[1] == 0 ? 1 : h[1] == 255 ? 254 : h[1];
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void log_line(const char *what) {
    const char *path = getenv("MESHGUARD_STANDIN_LOG");
    if (!path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fprintf(f, "%s %d\n", what, (int)getpid());
    fclose(f);
}

static peer_t *find_peer(meshguard_ctx *c, const uint8_t *id) {
    for (int i = 0; i < c->npeers; i++)
        if (memcmp(c->peers[i].id, id, 32) == 0) return &c->peers[i];
    return NULL;
}

static int peer_state(const peer_t *p) {
    double age = now_s() - p->last_seen;
    return age < 0.6 ? 0 : age < 1.5 ? 1 : 2;
}

static void send_to(meshguard_ctx *c, const void *msg, size_t n, const struct sockaddr_in *to) {
    if (sendto(c->fd, msg, n, MSG_DONTWAIT, (const struct sockaddr *)to, sizeof *to) == (ssize_t)n) c->sent++;
}

static void send_hello(meshguard_ctx *c, const struct sockaddr_in *to) {
    uint8_t msg[37];
    msg[0] = 'H';
    memcpy(msg + 1, c->id, 32);
    memcpy(msg + 33, c->meship, 4);
    send_to(c, msg, sizeof msg, to);
}

static void send_handshake(meshguard_ctx *c, char kind, const struct sockaddr_in *to) {
    uint8_t msg[33];
    msg[0] = (uint8_t)kind;
    memcpy(msg + 1, c->id, 32);
    send_to(c, msg, sizeof msg, to);
}

static uint16_t ip_checksum(const uint8_t *p, size_t n) {
    uint32_t sum = 0;
    for (size_t i = 0; i + 1 < n; i += 2) sum += (uint32_t)p[i] << 8 | p[i + 1];
    if (n & 1) sum += (uint32_t)p[n - 1] << 8;
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

/* One ICMP echo request from 10.99.0.9 to the peer's mesh IPv4, sent as tunnel data. */
static void send_spoofed(meshguard_ctx *c, const peer_t *p) {
    uint8_t msg[1 + 32 + 28];
    uint8_t *ip = msg + 33;
    memset(msg, 0, sizeof msg);
    msg[0] = 'D';
    memcpy(msg + 1, c->id, 32);
    ip[0] = 0x45; ip[3] = 28; ip[8] = 64; ip[9] = 1;
    ip[12] = 10; ip[13] = 99; ip[14] = 0; ip[15] = 9;
    memcpy(ip + 16, p->meship, 4);
    uint16_t s = ip_checksum(ip, 20);
    ip[10] = s >> 8; ip[11] = s & 0xff;
    ip[20] = 8; /* echo request */
    ip[24] = 0x12; ip[25] = 0x34; ip[27] = 1;
    s = ip_checksum(ip + 20, 8);
    ip[22] = s >> 8; ip[23] = s & 0xff;
    send_to(c, msg, sizeof msg, &p->addr);
}

static void check_control(meshguard_ctx *c) {
    const char *dir = getenv("MESHGUARD_STANDIN_CONTROL");
    if (!dir) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/spoof", dir);
    if (access(path, F_OK) != 0) return;
    unlink(path);
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < c->npeers; i++)
        if (peer_state(&c->peers[i]) == 0) send_spoofed(c, &c->peers[i]);
    pthread_mutex_unlock(&c->lock);
}

static void handle(meshguard_ctx *c, const uint8_t *buf, ssize_t n, const struct sockaddr_in *from) {
    if (n < 33) return;
    pthread_mutex_lock(&c->lock);
    c->raw_received++;
    peer_t *p = find_peer(c, buf + 1);
    if (buf[0] == 'H' && n == 37) {
        if (!p && c->npeers < MAX_PEERS) {
            p = &c->peers[c->npeers++];
            memset(p, 0, sizeof *p);
            memcpy(p->id, buf + 1, 32);
        }
        if (p) {
            bool was_dead = peer_state(p) == 2 || p->last_seen == 0;
            p->addr = *from;
            memcpy(p->meship, buf + 33, 4);
            p->last_seen = now_s();
            c->received++;
            if (was_dead) send_hello(c, from);
        }
    } else if (buf[0] == 'I' && n == 33 && p) {
        /* A handshake from a member: it enters our device with a session; answer it. */
        p->addr = *from;
        p->in_device = true;
        p->session = true;
        c->received++;
        send_handshake(c, 'R', from);
    } else if (buf[0] == 'R' && n == 33 && p && p->in_device) {
        p->session = true;
        c->received++;
    } else if (buf[0] == 'D' && p && p->session) {
        size_t len = (size_t)n - 33;
        if (len <= 1500) {
            if (c->qcount == QUEUE_SLOTS) {
                c->queue_drops++;
            } else {
                entry_t *e = &c->queue[(c->qhead + c->qcount) % QUEUE_SLOTS];
                memcpy(e->data, buf + 33, len);
                e->len = (uint32_t)len;
                memcpy(e->sender, buf + 1, 32);
                c->qcount++;
            }
        }
    }
    pthread_mutex_unlock(&c->lock);
}

static void *event_loop(void *arg) {
    meshguard_ctx *c = arg;
    uint8_t buf[2048];
    double next_hello = 0;
    for (;;) {
        pthread_mutex_lock(&c->lock);
        bool running = c->running;
        c->ticks++;
        pthread_mutex_unlock(&c->lock);
        if (!running) break;
        double t = now_s();
        if (t >= next_hello) {
            pthread_mutex_lock(&c->lock);
            if (!c->suspended) {
                send_hello(c, &c->seed);
                for (int i = 0; i < c->npeers; i++)
                    if (c->peers[i].addr.sin_port) send_hello(c, &c->peers[i].addr);
            }
            pthread_mutex_unlock(&c->lock);
            check_control(c);
            next_hello = t + 0.1;
        }
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        if (poll(&pfd, 1, 20) <= 0) continue;
        for (int k = 0; k < 64; k++) {
            struct sockaddr_in from;
            socklen_t fl = sizeof from;
            ssize_t n = recvfrom(c->fd, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
            if (n < 0) break;
            handle(c, buf, n, &from);
        }
    }
    return NULL;
}

void *meshguard_init(const uint8_t *seed, uint16_t listen_port) {
    if (!seed || sodium_init() < 0) return NULL;
    meshguard_ctx *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->queue = calloc(QUEUE_SLOTS, sizeof(entry_t));
    c->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(listen_port)};
    socklen_t al = sizeof a;
    if (!c->queue || c->fd < 0 || bind(c->fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(c->fd, (struct sockaddr *)&a, &al) != 0) {
        if (c->fd >= 0) close(c->fd);
        free(c->queue);
        free(c);
        return NULL;
    }
    c->port = ntohs(a.sin_port);
    uint8_t sk[crypto_sign_SECRETKEYBYTES];
    crypto_sign_seed_keypair(c->id, sk, seed);
    sodium_memzero(sk, sizeof sk);
    derive_meship(c->id, c->meship);
    pthread_mutex_init(&c->lock, NULL);
    log_line("init");
    return c;
}

int32_t meshguard_join(void *ctx, const uint8_t *ipv4, uint16_t port) {
    meshguard_ctx *c = ctx;
    if (!c || !ipv4) return -1;
    if (c->joined) return -2;
    c->seed.sin_family = AF_INET;
    c->seed.sin_port = htons(port ? port : 51821);
    memcpy(&c->seed.sin_addr, ipv4, 4);
    c->running = true;
    if (pthread_create(&c->loop, NULL, event_loop, c) != 0) { c->running = false; return -1; }
    c->joined = true;
    log_line("join");
    return 0;
}

/* "host:port", resolved to IPv4 (A), like MeshGuard's; -11 when it does not resolve. */
int32_t meshguard_join_host(void *ctx, const char *host_port) {
    if (!ctx || !host_port) return -1;
    char host[256];
    const char *colon = strrchr(host_port, ':');
    if (!colon || (size_t)(colon - host_port) >= sizeof host) return -11;
    memcpy(host, host_port, (size_t)(colon - host_port));
    host[colon - host_port] = 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535) return -11;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *res;
    if (getaddrinfo(host, NULL, &hints, &res) != 0) return -11;
    uint8_t ip[4];
    memcpy(ip, &((struct sockaddr_in *)res->ai_addr)->sin_addr, 4);
    freeaddrinfo(res);
    return meshguard_join(ctx, ip, (uint16_t)port);
}

void meshguard_get_pubkey(void *ctx, uint8_t *out) {
    meshguard_ctx *c = ctx;
    if (!c || !out) return;
    memcpy(out, c->id, 32);
}

uint32_t meshguard_peer_count(void *ctx) {
    meshguard_ctx *c = ctx;
    if (!c) return 0;
    pthread_mutex_lock(&c->lock);
    uint32_t n = 0;
    for (int i = 0; i < c->npeers; i++) n += peer_state(&c->peers[i]) == 0;
    pthread_mutex_unlock(&c->lock);
    return n;
}

uint32_t meshguard_get_peers(void *ctx, uint8_t *out, uint32_t max) {
    meshguard_ctx *c = ctx;
    if (!c || !out) return 0;
    pthread_mutex_lock(&c->lock);
    uint32_t n = 0;
    for (int i = 0; i < c->npeers && n < max; i++)
        if (peer_state(&c->peers[i]) == 0) memcpy(out + 32 * n++, c->peers[i].id, 32);
    pthread_mutex_unlock(&c->lock);
    return n;
}

int32_t meshguard_get_peer_info(void *ctx, const uint8_t *id, uint8_t *out) {
    meshguard_ctx *c = ctx;
    if (!c || !id || !out) return -1;
    pthread_mutex_lock(&c->lock);
    peer_t *p = find_peer(c, id);
    if (!p) { pthread_mutex_unlock(&c->lock); return -1; }
    memcpy(out, &p->addr.sin_addr, 4);
    memcpy(out + 4, &p->addr.sin_port, 2); /* network order = big-endian */
    memcpy(out + 6, p->meship, 4);
    out[10] = (uint8_t)peer_state(p);
    out[11] = 0; /* no WireGuard key: the stand-in has none */
    memset(out + 12, 0, 32);
    out[44] = 0; out[45] = 0; out[46] = 0;
    pthread_mutex_unlock(&c->lock);
    return 0;
}

int32_t meshguard_tunnel_open(void *ctx, const uint8_t *id) {
    meshguard_ctx *c = ctx;
    if (!c || !id) return -1;
    if (!c->running) return -2;
    pthread_mutex_lock(&c->lock);
    peer_t *p = find_peer(c, id);
    int32_t rc = 0;
    if (!p) rc = -3;
    else if (!p->addr.sin_port) rc = -5;
    else if (p->last_init != 0 && now_s() - p->last_init < 5) rc = -7;
    else {
        p->in_device = true;
        p->last_init = now_s();
        send_handshake(c, 'I', &p->addr);
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

void meshguard_tunnel_close(void *ctx, const uint8_t *id) {
    meshguard_ctx *c = ctx;
    if (!c || !id) return;
    pthread_mutex_lock(&c->lock);
    peer_t *p = find_peer(c, id);
    if (p) { p->in_device = false; p->session = false; p->last_init = 0; }
    pthread_mutex_unlock(&c->lock);
}

int32_t meshguard_tunnel_send(void *ctx, const uint8_t *id, const uint8_t *data, uint32_t len) {
    meshguard_ctx *c = ctx;
    if (!c || !id || !data) return -1;
    if (!c->running) return -2;
    if (len > MAX_PAYLOAD) return -3;
    uint8_t msg[1 + 32 + MAX_PAYLOAD];
    pthread_mutex_lock(&c->lock);
    peer_t *p = find_peer(c, id);
    int32_t rc = !p || !p->in_device ? -4 : !p->session ? -5 : 0;
    if (rc != 0) {
        c->failed_routes++;
        pthread_mutex_unlock(&c->lock);
        return rc;
    }
    struct sockaddr_in to = p->addr;
    c->direct_sends++;
    pthread_mutex_unlock(&c->lock);
    msg[0] = 'D';
    memcpy(msg + 1, c->id, 32);
    memcpy(msg + 33, data, len);
    ssize_t n = sendto(c->fd, msg, 33 + len, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof to);
    return n == (ssize_t)(33 + len) ? 0 : -7;
}

#ifndef STANDIN_OMIT_RECV
int32_t meshguard_tunnel_recv(void *ctx, uint8_t *out, uint32_t *len, uint8_t *sender) {
    meshguard_ctx *c = ctx;
    if (!c || !out || !len || !sender) return -1;
    pthread_mutex_lock(&c->lock);
    if (c->qcount == 0) { pthread_mutex_unlock(&c->lock); return 1; }
    entry_t *e = &c->queue[c->qhead];
    memcpy(out, e->data, e->len);
    *len = e->len;
    memcpy(sender, e->sender, 32);
    c->qhead = (c->qhead + 1) % QUEUE_SLOTS;
    c->qcount--;
    pthread_mutex_unlock(&c->lock);
    return 0;
}
#endif

void meshguard_suspend(void *ctx) {
    meshguard_ctx *c = ctx;
    if (!c) return;
    pthread_mutex_lock(&c->lock); c->suspended = true; pthread_mutex_unlock(&c->lock);
}

void meshguard_resume(void *ctx) {
    meshguard_ctx *c = ctx;
    if (!c) return;
    pthread_mutex_lock(&c->lock); c->suspended = false; pthread_mutex_unlock(&c->lock);
}

/* The layout of MeshGuard's meshguard_debug_info (little-endian; bytes 30.. not written). */
void meshguard_debug_info(void *ctx, uint8_t *out) {
    meshguard_ctx *c = ctx;
    if (!c || !out) return;
    pthread_mutex_lock(&c->lock);
    uint32_t alive = 0;
    for (int i = 0; i < c->npeers; i++) alive += peer_state(&c->peers[i]) == 0;
    uint32_t fields[][3] = {{0, 2, c->port}, {2, 2, (uint32_t)c->npeers}, {4, 2, alive}, {8, 2, c->port},
                            {10, 4, (uint32_t)c->npeers}, {14, 4, c->sent}, {18, 4, c->received},
                            {22, 4, c->raw_received}, {26, 4, c->ticks}};
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
        for (uint32_t b = 0; b < fields[f][1]; b++) out[fields[f][0] + b] = (uint8_t)(fields[f][2] >> (8 * b));
    out[6] = c->running;
    out[7] = c->joined;
    pthread_mutex_unlock(&c->lock);
}

/* Not in MeshGuard's source (the Apple guide's, optional); kept so the tests cover the binding. */
int32_t meshguard_app_route_stats(void *ctx, uint8_t *out) {
    meshguard_ctx *c = ctx;
    if (!c || !out) return -1;
    pthread_mutex_lock(&c->lock);
    uint64_t v[4] = {c->direct_sends, 0, c->failed_routes, c->queue_drops};
    pthread_mutex_unlock(&c->lock);
    for (int i = 0; i < 4; i++)
        for (int b = 0; b < 8; b++) out[8 * i + b] = (uint8_t)(v[i] >> (8 * b));
    return 0;
}

void meshguard_destroy(void *ctx) {
    meshguard_ctx *c = ctx;
    if (!c) return;
    log_line("destroy");
    if (c->joined) {
        pthread_mutex_lock(&c->lock);
        c->running = false;
        pthread_mutex_unlock(&c->lock);
        pthread_join(c->loop, NULL);
    }
    close(c->fd);
    pthread_mutex_destroy(&c->lock);
    free(c->queue);
    memset(c, 0, sizeof *c);
    free(c);
}
