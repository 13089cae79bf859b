#define _GNU_SOURCE
#include "CTunnelgateShimsLab.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

int CTunnelgateShims_netns_prepare_directory(const char *directory) {
    if (mkdir(directory, 0755) != 0 && errno != EEXIST) return -1;
    if (mount("", directory, "none", MS_SHARED | MS_REC, NULL) == 0) return 0;
    if (errno != EINVAL) return -1;
    // Not a mount point yet: make it one, then share it.
    if (mount(directory, directory, "none", MS_BIND | MS_REC, NULL) != 0) return -1;
    return mount("", directory, "none", MS_SHARED | MS_REC, NULL);
}

int CTunnelgateShims_netns_create(const char *path) {
    int fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
    if (fd < 0) return -1;
    close(fd);
    if (unshare(CLONE_NEWNET) != 0 || mount("/proc/thread-self/ns/net", path, "none", MS_BIND, NULL) != 0) {
        int saved = errno;
        unlink(path);
        errno = saved;
        return -1;
    }
    return 0;
}

int CTunnelgateShims_netns_remove(const char *path) {
    // EINVAL: not a mount point (a half-made namespace file); it is removed all the same.
    if (umount2(path, MNT_DETACH) != 0 && errno != EINVAL) return -1;
    return unlink(path);
}

static int failed(char *failed_step, const char *step) {
    int saved = errno;
    snprintf(failed_step, 64, "%s", step);
    errno = saved;
    return -1;
}

int CTunnelgateShims_netns_exec_mounts(const char *name, char *failed_step) {
    if (unshare(CLONE_NEWNS) != 0) return failed(failed_step, "unshare(CLONE_NEWNS)");
    // No mount made from here on propagates back to the caller's mount namespace.
    if (mount("", "/", "none", MS_SLAVE | MS_REC, NULL) != 0) return failed(failed_step, "mount(/, MS_SLAVE|MS_REC)");
    unsigned long flags = 0;
    if (umount2("/sys", MNT_DETACH) != 0) {
        struct statvfs st;
        if (statvfs("/sys", &st) == 0 && (st.f_flag & ST_RDONLY)) flags = MS_RDONLY;
    }
    if (mount(name, "/sys", "sysfs", flags, NULL) != 0) return failed(failed_step, "mount(sysfs, /sys)");
    char directory[4096];
    snprintf(directory, sizeof directory, "/etc/netns/%s", name);
    DIR *dir = opendir(directory);
    if (dir == NULL) return 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
        char source[4096 + 256], target[4096];
        snprintf(source, sizeof source, "%s/%s", directory, entry->d_name);
        snprintf(target, sizeof target, "/etc/%s", entry->d_name);
        if (mount(source, target, "none", MS_BIND, NULL) != 0) {
            closedir(dir);
            return failed(failed_step, "mount(/etc/netns/NAME/FILE, MS_BIND)");
        }
    }
    closedir(dir);
    return 0;
}

int CTunnelgateShims_execvp(const char *file, char *const argv[]) { return execvp(file, argv); }

int CTunnelgateShims_parent_pid(void) { return getppid(); }
