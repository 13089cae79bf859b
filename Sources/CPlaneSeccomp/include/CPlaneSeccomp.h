// The packet plane's seccomp allow-list (libseccomp), installed by the plane itself first thing.
#ifndef CPLANE_SECCOMP_H
#define CPLANE_SECCOMP_H

#include <stddef.h>
#include <stdint.h>

/// What the filter does with a call outside the allow-list.
enum CPlaneSeccomp_refusal {
    /// The call fails with EPERM (what runtimes see; the tunnel goes on).
    CPlaneSeccomp_refuse_eperm = 0,
    /// The call is allowed and logged by the kernel (development: find what a runtime needs).
    CPlaneSeccomp_refuse_log = 1,
};

/// Installs the filter on the calling process's threads (SECCOMP_FILTER_FLAG_TSYNC): every thread,
/// present and future, is bound by it. `own_pid` is the process's pid (kill and tgkill may target only
/// it). 0, or -errno with `error` (of `capacity` bytes) naming the step.
int CPlaneSeccomp_install(int refusal, int own_pid, char *error, size_t capacity);

/// The number of calls in the allow-list (for the documentation and tests).
int CPlaneSeccomp_allowed_count(void);

/// The name of allowed call `index` (0 ≤ index < CPlaneSeccomp_allowed_count()).
const char *CPlaneSeccomp_allowed_name(int index);

#endif
