#!/usr/bin/env python3
"""libc_boundary.py ROOT CHECK: the libc boundary of the Tunnelgate tree at ROOT (netns/tests/libc-boundary.sh).

Every libc call goes through Sources/LinuxSystem (and the C shims, Sources/CTunnelgateShims); every
setsockopt(2) and ioctl(2) result is checked. CHECK is one of:

  imports    Swift files outside LinuxSystem that import Glibc (any import form, also SwiftGlibc) or
             name it (`Glibc.read`, which compiles through Foundation's re-export)
  calls      Swift files outside LinuxSystem that call a libc function or read errno without naming
             Glibc (Foundation and the C libraries' module maps re-export it); a name the file
             declares itself (func, case, let, var or a parameter of that name) is the file's
  sockopts   setsockopt/ioctl called from Swift outside LinuxSystem
  unchecked  setsockopt/ioctl calls anywhere in Sources/ (Swift and C) whose result is thrown away

Tests/ and Fuzz/ (test harnesses) may use libc directly and are not searched. Prints one line per
finding, "PATH:LINE: TEXT", and nothing when there is none.
"""
import os
import re
import sys

EXEMPT_DIRECTORIES = ("Sources/LinuxSystem/", "Tests/", "Fuzz/", ".build/", ".git/")
SHIMS = "Sources/CTunnelgateShims/"

# libc functions (and errno) that Tunnelgate's code has called or could call; a call is the name
# followed by "(" and not preceded by ".", a letter or "func " (a method or a Swift function of the
# same name is not libc's).
LIBC_FUNCTIONS = r"""
    errno strerror getpid getppid getuid geteuid getgid getegid getenv setenv unsetenv umask waitpid
    kill raise usleep nanosleep clock_gettime gettimeofday time strdup strndup free malloc calloc realloc
    memcpy memmove memset memcmp strlen strcmp strncmp dlopen dlsym dlclose dlerror mmap munmap mlock
    munlock madvise sigaction sigemptyset sigaddset sigprocmask signal setsockopt getsockopt ioctl
    fcntl socket socketpair bind listen accept accept4 connect shutdown recv recvfrom recvmsg recvmmsg
    sendto sendmsg sendmmsg getsockname getpeername poll ppoll select epoll_create1 epoll_ctl epoll_wait
    eventfd signalfd timerfd_create getaddrinfo freeaddrinfo gai_strerror inet_pton inet_ntop
    if_nametoindex if_indextoname pipe pipe2 dup dup2 dup3 open openat creat close fsync fdatasync
    ftruncate lseek pread pwrite readv writev stat lstat fstat fstatat unlink unlinkat rmdir mkdir
    mkdirat rename renameat opendir readdir closedir readlink symlink chmod fchmod chown fchown access
    realpath exit _exit abort atexit isatty fflush fputs fwrite printf fprintf perror sysconf prctl
    setns unshare mount umount2 execv execve execvp posix_spawn posix_spawnp fork vfork pthread_create
    pthread_join pthread_self pthread_mutex_init pthread_mutex_lock pthread_mutex_unlock
    pthread_mutex_destroy pthread_cond_init pthread_cond_wait pthread_cond_timedwait pthread_cond_signal
    pthread_cond_broadcast pthread_cond_destroy pthread_condattr_init pthread_condattr_setclock
    pthread_condattr_destroy arc4random getrandom htons htonl ntohs ntohl
""".split()
CALL = re.compile(r"(?<![\w.])(?<!func )(?:%s)\s*\(" % "|".join(map(re.escape, LIBC_FUNCTIONS)))
ERRNO = re.compile(r"(?<![\w.])errno(?![\w(:])")
IMPORT = re.compile(r"^\s*(?:@\w+\s+)*import\s+(?:(?:typealias|struct|class|enum|protocol|let|var|func)\s+)?"
                    r"(?:Glibc|SwiftGlibc)\b")
QUALIFIED = re.compile(r"(?<![\w.])Glibc\.")
SOCKOPT = re.compile(r"(?<![\w.])(setsockopt|ioctl)\s*\(")


def declared_names(code):
    """The names Swift code declares itself: functions, enum cases, constants and variables (also
    `case .x(let name)`), and the parameters of its functions and initializers (not the labels of
    the calls it makes)."""
    names = set(re.findall(r"\b(?:func|case|let|var)\s+\.?(\w+)", code))
    for parameters in re.findall(r"\b(?:func\s+\w+|init[?!]?)\s*(?:<[^>{}]*>)?\s*\(([^)]*)\)", code):
        for parameter in parameters.split(","):
            declared = re.match(r"\s*(?:\w+\s+)?(\w+)\s*:", parameter)
            if declared:
                names.add(declared.group(1))
    return names


def tracked_files(root, suffixes):
    for directory, subdirectories, names in os.walk(root):
        subdirectories[:] = sorted(d for d in subdirectories if d not in (".build", ".git"))
        for name in sorted(names):
            if name.endswith(suffixes):
                path = os.path.join(directory, name)
                yield os.path.relpath(path, root), path


def code_of(text, swift):
    """The text with comments and string literals blanked out (line numbers and offsets kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif swift and text.startswith('"""', i):
            j = text.find('"""', i + 3)
            j = n if j < 0 else j + 3
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"' or (not swift and c == "'"):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def findings(root, check):
    if check in ("imports", "calls", "sockopts"):
        files = {}
        for relative, path in tracked_files(root, (".swift",)):
            if not relative.startswith(EXEMPT_DIRECTORIES):
                text = open(path, encoding="utf-8", errors="replace").read()
                files[relative] = (text, code_of(text, swift=True))
        own = {relative: declared_names(code) for relative, (_, code) in files.items()}
        for relative, (text, code) in files.items():
            lines = text.split("\n")
            code_lines = code.split("\n")
            for number, line in enumerate(code_lines, 1):
                hits = []
                if check == "imports":
                    hits = [m for m in (IMPORT.search(line), QUALIFIED.search(line)) if m]
                elif check == "calls":
                    hits = [m for m in list(CALL.finditer(line)) + list(ERRNO.finditer(line))
                            if re.match(r"\w+", m.group()).group() not in own[relative]]
                elif check == "sockopts":
                    hits = list(SOCKOPT.finditer(line))
                if hits:
                    yield "%s:%d: %s" % (relative, number, lines[number - 1].strip())
    elif check == "unchecked":
        for relative, path in tracked_files(root, (".swift", ".c", ".h")):
            if not relative.startswith("Sources/"):
                continue
            swift = relative.endswith(".swift")
            text = open(path, encoding="utf-8", errors="replace").read()
            code = code_of(text, swift)
            for m in SOCKOPT.finditer(code):
                if not result_used(code, m.start(), swift):
                    line = line_of(code, m.start())
                    yield "%s:%d: %s" % (relative, line, text.split("\n")[line - 1].strip())
    else:
        raise SystemExit("unknown check %r" % check)


def result_used(code, start, swift):
    """Whether the call at `start` is an operand (compared, assigned, returned, passed on) rather than a
    statement of its own or `_ =` / `(void)`."""
    before = code[:start].rstrip()
    if swift:
        if re.search(r"(?<![\w.])_\s*=$", before):
            return False
        if before.endswith("{"):
            # A single-expression closure returns the call's result: checked when the closure is
            # syscall(...)'s, which throws on -1.
            statement = before[before.rfind("\n", 0, len(before) - 1) + 1:]
            return "syscall(" in statement
        return bool(re.search(r"(?:[=(,!<>&|?:]|\breturn|\bif|\bguard|\bwhile|\btry|\bawait)$", before))
    if re.search(r"\(\s*void\s*\)$", before):
        return False
    return bool(re.search(r"(?:[=(,!<>&|?:]|\breturn)$", before))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    for finding in findings(sys.argv[1], sys.argv[2]):
        print(finding)
