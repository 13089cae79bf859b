@testable import Session
import LinuxSystem
import XCTest

/// `--netns`: every form parsed, bad forms refused with their reason, and opening refusing what is
/// no network namespace (real files: /etc/hostname, a mount namespace, a process that is gone).
final class NamespaceReferenceTests: XCTestCase {
    func parse(_ text: String) -> NamespaceReference? { try? NamespaceReference.parse(text) }

    func reason(_ text: String) -> String {
        do { _ = try NamespaceReference.parse(text); return "parsed" } catch { return error.reason }
    }

    func testForms() {
        XCTAssertEqual(parse("blue"), .named("blue"))
        XCTAssertEqual(parse("netns-1a2b"), .named("netns-1a2b"))
        XCTAssertEqual(parse("/run/netns/blue"), .path("/run/netns/blue"))
        XCTAssertEqual(parse("/proc/42/ns/net"), .path("/proc/42/ns/net"))
        XCTAssertEqual(parse("/var/run/docker/netns/0f3c9a1e2b4d"), .path("/var/run/docker/netns/0f3c9a1e2b4d"))
        XCTAssertEqual(parse("pid:1"), .process(1))
        XCTAssertEqual(parse("pid:2147483647"), .process(Int32.max))
        XCTAssertEqual(parse("docker:web"), .container(.docker, "web"))
        XCTAssertEqual(parse("docker:0f3c9a1e2b4d"), .container(.docker, "0f3c9a1e2b4d"))
        XCTAssertEqual(parse("podman:app_1.x-y"), .container(.podman, "app_1.x-y"))
        // A name with another word before a colon stays a name, as ip netns allows.
        XCTAssertEqual(parse("cni:x"), .named("cni:x"))
    }

    func testDescriptionIsTheArgumentAgain() {
        for text in ["blue", "/proc/42/ns/net", "pid:42", "docker:web", "podman:app"] {
            XCTAssertEqual(parse(text)?.description, text)
            XCTAssertEqual(parse(text).flatMap { parse($0.description) }, parse(text))
        }
    }

    func testBadForms() {
        XCTAssertEqual(reason(""), "empty; it takes \(NamespaceReference.forms)")
        for bad in ["pid:", "pid:0", "pid:-1", "pid:+3", "pid:12a", "pid:99999999999", "pid: 3", "pid:٣"] {
            XCTAssertEqual(reason(bad), "pid: takes a process id (a whole number above 0)", bad)
        }
        XCTAssertEqual(reason("docker:"), "docker: takes a container name or id")
        XCTAssertEqual(reason("podman:"), "podman: takes a container name or id")
        XCTAssertEqual(reason("docker:-rm"), "docker: a container name starts with a letter or digit")
        XCTAssertEqual(reason("docker:a/b"), "docker: a container name has only letters, digits, '_', '.' and '-'")
        XCTAssertEqual(reason("podman:a b"), "podman: a container name has only letters, digits, '_', '.' and '-'")
        XCTAssertEqual(reason("docker:" + String(repeating: "a", count: 254)), "docker: a container name has at most 253 characters")
        XCTAssertEqual(reason("run/netns/x"), "neither a name (it has a '/') nor an absolute path; it takes \(NamespaceReference.forms)")
        XCTAssertEqual(reason("./x"), "neither a name (it has a '/') nor an absolute path; it takes \(NamespaceReference.forms)")
        XCTAssertEqual(reason("/"), "a directory, not a namespace file")
        XCTAssertEqual(reason("/run/netns/"), "a directory, not a namespace file")
        XCTAssertEqual(reason("."), "not a name under /run/netns; it takes \(NamespaceReference.forms)")
        XCTAssertEqual(reason(".."), "not a name under /run/netns; it takes \(NamespaceReference.forms)")
        do { _ = try NamespaceReference.parse("pid:x"); XCTFail("parsed") } catch {
            XCTAssertEqual(error.description, "--netns 'pid:x': pid: takes a process id (a whole number above 0)")
        }
    }

    func testProcessOfAProcPath() {
        XCTAssertEqual(NamespaceReference.process(inProcPath: "/proc/42/ns/net"), 42)
        XCTAssertEqual(NamespaceReference.process(inProcPath: "/proc/42/task/43/ns/net"), 42)
        XCTAssertNil(NamespaceReference.process(inProcPath: "/proc/self/ns/net"))
        XCTAssertNil(NamespaceReference.process(inProcPath: "/proc/42/ns/mnt"))
        XCTAssertNil(NamespaceReference.process(inProcPath: "/proc/42/x/43/ns/net"))
        XCTAssertNil(NamespaceReference.process(inProcPath: "/run/netns/42"))
        XCTAssertEqual(NamespaceReference.process(42).filePath, "/proc/42/ns/net")
        XCTAssertEqual(NamespaceReference.named("blue").filePath, "/run/netns/blue")
        XCTAssertNil(NamespaceReference.container(.docker, "web").filePath)
    }

    func testHTTPAnswer() {
        let answer = Array("HTTP/1.0 404 Not Found\r\nContent-Type: application/json\r\n\r\n{\"message\":\"No such container: x\"}".utf8)
        let parsed = NamespaceReference.httpResponse(answer)
        XCTAssertEqual(parsed?.0, 404)
        XCTAssertEqual(parsed.map { String(decoding: $0.1, as: UTF8.self) }, "{\"message\":\"No such container: x\"}")
        XCTAssertNil(NamespaceReference.httpResponse(Array("garbage".utf8)))
        XCTAssertNil(NamespaceReference.httpResponse(Array("SSH-2.0 x\r\n\r\n".utf8)))
    }

    func openProblem(_ text: String) -> String {
        do { _ = try NamespaceReference.parse(text).open(); return "opened" } catch { return "\(error)" }
    }

    func testOpenRefusesWhatIsNoNetworkNamespace() {
        XCTAssertEqual(openProblem("/etc/hostname"),
                       "--netns /etc/hostname: /etc/hostname is not a namespace file (no nsfs inode: NS_GET_NSTYPE fails with \(Errno.notATerminal))")
        XCTAssertEqual(openProblem("/proc/self/ns/mnt"), "--netns /proc/self/ns/mnt: /proc/self/ns/mnt is a namespace, but not a network namespace")
        XCTAssertEqual(openProblem("/nonexistent/x"), "--netns /nonexistent/x: /nonexistent/x does not exist")
        XCTAssertEqual(openProblem("tg-no-such-namespace"),
                       "--netns tg-no-such-namespace: no network namespace named tg-no-such-namespace (/run/netns/tg-no-such-namespace does not exist)")
        // This process's own namespace: isolate mode needs another.
        XCTAssertTrue(openProblem("pid:\(ProcessControl.id)").hasSuffix("isolate mode puts the tunnel into another one"), openProblem("pid:\(ProcessControl.id)"))
        // A process that is gone: a child that exited and was reaped.
        let pid = try! ProcessControl.spawn("/bin/true", ["true"])
        _ = try? ProcessControl.wait(for: pid)
        XCTAssertEqual(openProblem("pid:\(pid)"), "--netns pid:\(pid): there is no process \(pid)")
    }

    func testDockerWithoutDaemon() {
        // DOCKER_HOST at a socket nobody serves: the error names it.
        setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock", 1)
        defer { unsetenv("DOCKER_HOST") }
        XCTAssertTrue(openProblem("docker:web").hasPrefix("--netns docker:web: asking dockerd at /nonexistent/docker.sock failed: connect("), openProblem("docker:web"))
        setenv("DOCKER_HOST", "tcp://127.0.0.1:2375", 1)
        XCTAssertTrue(openProblem("docker:web").contains("DOCKER_HOST=tcp://127.0.0.1:2375: only a unix:// socket is asked"), openProblem("docker:web"))
    }
}
