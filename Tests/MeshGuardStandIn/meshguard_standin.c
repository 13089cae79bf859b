/*
 * TEST FIXTURE — NOT MeshGuard. A stand-in for libmeshguard-ffi.so with the same C signatures as the
 * parts of MeshGuard's C ABI that Tunnelgate's mesh runtime binds, so that the end-to-end tests can run
 * two Tunnelgate instances over a "mesh" without the real library (CI cannot fetch it).
 *
 * What it really does: payloads travel over real UDP between processes. There is NO cryptography, NO
 * WireGuard, NO NAT traversal, NO relays: never use it for anything but tests.
 *
 *   identity (the "public key") = seed XOR 0xa5, byte by byte (so tests can compute it);
 *   mesh IPv4 = $MESHGUARD_STANDIN_MESH_IP (0.0.0.0 when unset);
 *   every 100 ms the event loop sends HELLO(identity, mesh IPv4) to the joined seed and to every known
 *   peer; a peer is alive while heard from within 600 ms, suspected until 1.5 s, dead after;
 *   datagrams: 'H' identity[32] meship[4]  |  'D' identity[32] payload (≤ 1,396 bytes);
 *   the tunnel receive queue holds 256 entries, one consumer, drops when full (like MeshGuard's).
 *
 * Test hooks: $MESHGUARD_STANDIN_CONTROL names a directory; when a file "spoof" appears in it, the event
 * loop sends every alive peer one ICMP echo request whose source is 10.99.0.9 (outside any allowed
 * prefix) and removes the file. $MESHGUARD_STANDIN_LOG names a file to which init/join/destroy append
 * a line, so tests can count meshguard_destroy calls.
 *
 * Build: Tests/MeshGuardStandIn/build.sh OUTDIR (with -DSTANDIN_OMIT_RECV: the variant missing a
 * required symbol).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
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
    bool tunnel_open;
} peer_t;

typedef struct {
    uint8_t data[1500];
    uint32_t len;
    uint8_t sender[32];
} entry_t;

typedef struct meshguard_ctx {
    int fd;
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
    uint64_t direct_sends, failed_routes, queue_drops;
} meshguard_ctx;

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

static void send_hello(meshguard_ctx *c, const struct sockaddr_in *to) {
    uint8_t msg[37];
    msg[0] = 'H';
    memcpy(msg + 1, c->id, 32);
    memcpy(msg + 33, c->meship, 4);
    sendto(c->fd, msg, sizeof msg, MSG_DONTWAIT, (const struct sockaddr *)to, sizeof *to);
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
    sendto(c->fd, msg, sizeof msg, MSG_DONTWAIT, (const struct sockaddr *)&p->addr, sizeof p->addr);
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
            if (was_dead) send_hello(c, from);
        }
    } else if (buf[0] == 'D' && p) {
        p->addr = *from;
        p->last_seen = now_s();
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
    if (!seed) return NULL;
    meshguard_ctx *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->queue = calloc(QUEUE_SLOTS, sizeof(entry_t));
    c->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(listen_port)};
    if (!c->queue || c->fd < 0 || bind(c->fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (c->fd >= 0) close(c->fd);
        free(c->queue);
        free(c);
        return NULL;
    }
    for (int i = 0; i < 32; i++) c->id[i] = seed[i] ^ 0xa5;
    const char *ip = getenv("MESHGUARD_STANDIN_MESH_IP");
    if (ip) inet_pton(AF_INET, ip, c->meship);
    pthread_mutex_init(&c->lock, NULL);
    log_line("init");
    return c;
}

int32_t meshguard_join(void *ctx, const uint8_t *ipv4, uint16_t port) {
    meshguard_ctx *c = ctx;
    if (!c || !ipv4) return -1;
    if (c->joined) return -2;
    c->seed.sin_family = AF_INET;
    c->seed.sin_port = htons(port);
    memcpy(&c->seed.sin_addr, ipv4, 4);
    c->running = true;
    if (pthread_create(&c->loop, NULL, event_loop, c) != 0) { c->running = false; return -3; }
    c->joined = true;
    log_line("join");
    return 0;
}

int32_t meshguard_get_pubkey(void *ctx, uint8_t *out) {
    meshguard_ctx *c = ctx;
    if (!c || !out) return -1;
    memcpy(out, c->id, 32);
    return 0;
}

int32_t meshguard_peer_count(void *ctx) {
    meshguard_ctx *c = ctx;
    if (!c) return 0;
    pthread_mutex_lock(&c->lock);
    int n = c->npeers;
    pthread_mutex_unlock(&c->lock);
    return n;
}

int32_t meshguard_get_peers(void *ctx, uint8_t *out, uint32_t max) {
    meshguard_ctx *c = ctx;
    if (!c || !out) return -1;
    pthread_mutex_lock(&c->lock);
    int n = c->npeers < (int)max ? c->npeers : (int)max;
    for (int i = 0; i < n; i++) memcpy(out + 32 * i, c->peers[i].id, 32);
    pthread_mutex_unlock(&c->lock);
    return n;
}

int32_t meshguard_get_peer_info(void *ctx, const uint8_t *id, uint8_t *out) {
    meshguard_ctx *c = ctx;
    if (!c || !id || !out) return -1;
    pthread_mutex_lock(&c->lock);
    peer_t *p = find_peer(c, id);
    if (!p) { pthread_mutex_unlock(&c->lock); return -2; }
    memcpy(out, &p->addr.sin_addr, 4);
    memcpy(out + 4, &p->addr.sin_port, 2); /* network order = big-endian */
    memcpy(out + 6, p->meship, 4);
    out[10] = (uint8_t)peer_state(p);
    out[11] = 0;
    memset(out + 12, 0, 32);
    out[44] = 0; out[45] = 0; out[46] = 0;
    pthread_mutex_unlock(&c->lock);
    return 0;
}

int32_t meshguard_tunnel_open(void *ctx, const uint8_t *id) {
    meshguard_ctx *c = ctx;
    if (!c || !id) return -1;
    pthread_mutex_lock(&c->lock);
    peer_t *p = find_peer(c, id);
    if (p) p->tunnel_open = true;
    pthread_mutex_unlock(&c->lock);
    return p ? 0 : -2;
}

int32_t meshguard_tunnel_close(void *ctx, const uint8_t *id) {
    meshguard_ctx *c = ctx;
    if (!c || !id) return -1;
    pthread_mutex_lock(&c->lock);
    peer_t *p = find_peer(c, id);
    if (p) p->tunnel_open = false;
    pthread_mutex_unlock(&c->lock);
    return p ? 0 : -2;
}

int32_t meshguard_tunnel_send(void *ctx, const uint8_t *id, const uint8_t *data, uint32_t len) {
    meshguard_ctx *c = ctx;
    if (!c || !id || !data || len == 0) return -1;
    if (len > MAX_PAYLOAD) return -3;
    uint8_t msg[1 + 32 + MAX_PAYLOAD];
    pthread_mutex_lock(&c->lock);
    peer_t *p = find_peer(c, id);
    if (!p || !p->tunnel_open || peer_state(p) == 2) {
        c->failed_routes++;
        pthread_mutex_unlock(&c->lock);
        return -2;
    }
    struct sockaddr_in to = p->addr;
    c->direct_sends++;
    pthread_mutex_unlock(&c->lock);
    msg[0] = 'D';
    memcpy(msg + 1, c->id, 32);
    memcpy(msg + 33, data, len);
    ssize_t n = sendto(c->fd, msg, 33 + len, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof to);
    return n == (ssize_t)(33 + len) ? 0 : -4;
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

int32_t meshguard_suspend(void *ctx) {
    meshguard_ctx *c = ctx;
    if (!c) return -1;
    pthread_mutex_lock(&c->lock); c->suspended = true; pthread_mutex_unlock(&c->lock);
    return 0;
}

int32_t meshguard_resume(void *ctx) {
    meshguard_ctx *c = ctx;
    if (!c) return -1;
    pthread_mutex_lock(&c->lock); c->suspended = false; pthread_mutex_unlock(&c->lock);
    return 0;
}

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
