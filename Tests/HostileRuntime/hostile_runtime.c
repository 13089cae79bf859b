/*
 * A TEST FIXTURE: a packet runtime behind tunnelgate's callback ABI that attacks its host. Loaded in the
 * packet plane, its start() tries what a compromised runtime would, records the errno of each try, and
 * then behaves as a runtime with an interface that drops what it is given (so the tunnel is up).
 *
 * Arguments (the configuration's "arguments"): "--read FILE" (a file it tries to read, e.g. a key file
 * of the engine's; repeatable), "--engine-pid N" is not needed (it uses getppid()), "--flood N" (write N
 * garbage datagrams to descriptor 3, the plane's channel to the engine, from a thread, after start).
 * app_message "attempts" answers the JSON of the attempts; status carries it too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <netinet/in.h>
#include <unistd.h>

#include "../../Sources/CTunnelgateRuntime/include/tunnelgate_runtime.h"

struct hostile {
    char attempts[8192];
    size_t used;
    int flood;
    pthread_t flooder;
    int flooding;
};

static void note(struct hostile *h, const char *what, int rc, int err) {
    const char *sep = h->used ? "," : "";
    int n = snprintf(h->attempts + h->used, sizeof h->attempts - h->used, "%s\"%s\":\"%s\"", sep, what,
                     rc >= 0 ? "allowed" : strerrorname_np(err) ? strerrorname_np(err) : "error");
    if (n > 0 && (size_t)n < sizeof h->attempts - h->used) h->used += (size_t)n;
}

#define TRY(h, what, expr) do { errno = 0; long _rc = (long)(expr); note((h), (what), _rc < 0 ? -1 : 0, errno); } while (0)

static long add_route(void) {
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) return -1;
    struct { struct nlmsghdr n; struct rtmsg r; char buf[64]; } req;
    memset(&req, 0, sizeof req);
    req.n.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
    req.n.nlmsg_type = RTM_NEWROUTE;
    req.n.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK;
    req.r.rtm_family = AF_INET;
    req.r.rtm_table = RT_TABLE_MAIN;
    req.r.rtm_type = RTN_BLACKHOLE;
    long rc = send(fd, &req, req.n.nlmsg_len, 0);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

static long open_and_read(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char b[16];
    long n = read(fd, b, sizeof b);
    int e = errno;
    close(fd);
    errno = e;
    return n;
}

static long write_file(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    close(fd);
    unlink(path);
    return 0;
}

static long bind_port(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    long rc = bind(fd, (struct sockaddr *)&a, sizeof a);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

static long mark_socket(void) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int mark = 7460;
    long rc = setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof mark);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

static long read_engine_memory(pid_t pid) {
    char b[16];
    struct iovec local = { b, sizeof b }, remote = { (void *)0x400000, sizeof b };
    return process_vm_readv(pid, &local, 1, &remote, 1, 0);
}

static void *flood(void *arg) {
    struct hostile *h = arg;
    char garbage[512];
    memset(garbage, 0x5a, sizeof garbage);
    for (int i = 0; i < h->flood && h->flooding; i++) {
        if (send(3, garbage, sizeof garbage, MSG_NOSIGNAL) < 0 && errno != EAGAIN) break;
    }
    return NULL;
}

static const char *find_value(const char *json, const char *key, char *out, size_t cap) {
    /* args_json is ["--x","v",...]: find "key" then the next string. */
    char needle[64];
    snprintf(needle, sizeof needle, "\"%s\",\"", key);
    const char *p = strstr(json, needle);
    if (!p) return NULL;
    p += strlen(needle);
    size_t n = 0;
    while (*p && *p != '"' && n + 1 < cap) out[n++] = *p++;
    out[n] = 0;
    return out;
}

int32_t tunnelgate_runtime_start(const char *args_json, const char *secret, tunnelgate_runtime_writer writer,
                                 void *context, void **handle, char *error, size_t error_capacity, size_t *error_len) {
    (void)secret; (void)writer; (void)context; (void)error; (void)error_capacity; (void)error_len;
    struct hostile *h = calloc(1, sizeof *h);
    if (!h) return 5;
    pid_t engine = getppid();
    TRY(h, "netlinkRoute", add_route());
    TRY(h, "rawSocket", socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP));
    TRY(h, "packetSocket", socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0));
    TRY(h, "writeEtc", write_file("/etc/tunnelgate-hostile-was-here"));
    TRY(h, "writeRoot", write_file("/tunnelgate-hostile-was-here"));
    TRY(h, "readEngineState", open_and_read("/run/tunnelgate"));
    char path[4096];
    if (find_value(args_json, "--read", path, sizeof path)) TRY(h, "readKeyFile", open_and_read(path));
    if (find_value(args_json, "--read-hidden", path, sizeof path)) TRY(h, "readHiddenKeyFile", open_and_read(path));
    if (find_value(args_json, "--state", path, sizeof path)) TRY(h, "readEngineStateFile", open_and_read(path));
    TRY(h, "readShadow", open_and_read("/etc/shadow"));
    TRY(h, "ptraceEngine", ptrace(PTRACE_ATTACH, engine, 0, 0));
    TRY(h, "readEngineMemory", read_engine_memory(engine));
    TRY(h, "killEngine", kill(engine, SIGKILL));
    TRY(h, "setuidRoot", setuid(0));
    TRY(h, "mount", mount("tmpfs", "/mnt", "tmpfs", 0, NULL));
    TRY(h, "unshareUser", unshare(CLONE_NEWUSER));
    TRY(h, "fork", syscall(SYS_fork));
    TRY(h, "execShell", syscall(SYS_execve, "/bin/sh", (char *[]){ "sh", NULL }, (char *[]){ NULL }));
    TRY(h, "bpf", syscall(SYS_bpf, 0, NULL, 0));
    TRY(h, "loadModule", syscall(SYS_finit_module, -1, "", 0));
    TRY(h, "markSocket", mark_socket());
    TRY(h, "bindPort80", bind_port(80));
    TRY(h, "dumpable", prctl(PR_SET_DUMPABLE, 1, 0, 0, 0));
    char n[32];
    if (find_value(args_json, "--flood", n, sizeof n)) {
        h->flood = atoi(n);
        h->flooding = 1;
        pthread_create(&h->flooder, NULL, flood, h);
    }
    *handle = h;
    return 0;
}

int32_t tunnelgate_runtime_packet_in(void *handle, const uint8_t *packet, size_t len) {
    (void)handle; (void)packet; (void)len;
    return 0;
}

int32_t tunnelgate_runtime_status(void *handle, char *json, size_t capacity, size_t *json_len) {
    struct hostile *h = handle;
    int n = snprintf(json, capacity, "{\"state\":\"ready\",\"interface\":\"hostile\",\"attempts\":{%s}}", h->attempts);
    *json_len = (size_t)n;
    return (size_t)n < capacity ? 0 : 4;
}

void tunnelgate_runtime_stop(void *handle) {
    struct hostile *h = handle;
    if (h->flooding) {
        h->flooding = 0;
        pthread_join(h->flooder, NULL);
    }
    free(h);
}

int32_t tunnelgate_runtime_app_message(void *handle, const uint8_t *bytes, size_t len, uint8_t *reply,
                                       size_t reply_capacity, size_t *reply_len) {
    (void)bytes; (void)len;
    size_t n = 0;
    return tunnelgate_runtime_status(handle, (char *)reply, reply_capacity, reply_len) == 0 ? 0 : (*reply_len = n, 4);
}
