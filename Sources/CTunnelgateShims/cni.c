#define _GNU_SOURCE
#include "CTunnelgateShimsCNI.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <linux/nsfs.h>

int CTunnelgateShims_namespace_type(int fd) { return ioctl(fd, NS_GET_NSTYPE); }

int CTunnelgateShims_clone_newnet(void) { return CLONE_NEWNET; }

int CTunnelgateShims_namespace_bind(int fd, const char *path) {
    int created = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
    if (created < 0) return -1;
    close(created);
    char source[64];
    snprintf(source, sizeof source, "/proc/self/fd/%d", fd);
    if (mount(source, path, "none", MS_BIND, NULL) != 0) {
        int saved = errno;
        unlink(path);
        errno = saved;
        return -1;
    }
    return 0;
}
