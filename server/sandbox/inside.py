"""The program that runs first inside a sandbox (never imported by the server: its source is
handed to the sandbox's own `python3 -I -S -c`, so it uses the standard library only).

It reads one job from stdin: a JSON line (the command, limits, files for /tmp, the workspace's
listing) followed by the workspace files' bytes. It writes the workspace, runs the command under
its limits with stdout and stderr forwarded (each cut after `out_max` bytes, so the server never
reads more), stops every process of the sandbox when the command ends or its time is up, and
hands back on the descriptor the job names a JSON line (exit status, what it cut, the workspace's
files and sizes) followed by the bytes of the files whose size or time changed.

It makes itself non-dumpable first, so the code it runs (same uid) cannot open its descriptors
through /proc or trace it; that code can still kill it, and then the server gets no workspace
back and commits nothing.
"""
import ctypes
import json
import os
import resource
import select
import signal
import stat
import sys
import time

WORKSPACE = "/workspace"


def _undumpable():
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)   # PR_SET_DUMPABLE, 0
    except Exception:
        pass


def _read_exact(fd, n):
    out = bytearray()
    while len(out) < n:
        chunk = os.read(fd, min(1 << 20, n - len(out)))
        if not chunk:
            raise SystemExit("workspace stream ended early")
        out += chunk
    return bytes(out)


def _read_line(fd, limit):
    out = bytearray()
    while True:
        b = os.read(fd, 1)
        if not b:
            raise SystemExit("job stream ended early")
        if b == b"\n":
            return bytes(out)
        out += b
        if len(out) > limit:
            raise SystemExit("job line too long")


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _limits(job):
    def apply():
        os.setsid()
        for name, value in job["limits"].items():
            which = getattr(resource, name)
            resource.setrlimit(which, (value, value))
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    return apply


def _kill_all():
    """SIGKILL every process of the sandbox but this one and the sandbox's init (pid 1)."""
    me = os.getpid()
    for _ in range(50):
        others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]
        if not others:
            return
        for pid in others:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        time.sleep(0.01)


def _relay(spec):
    """With network allowed: listen on the sandbox's own 127.0.0.1 (the only address its network
    namespace has) and relay each connection to the server's proxy socket, bound in from outside
    (server/sandbox/egress.py decides where it may go). At most 32 connections at once."""
    if not spec:
        return
    import socket
    import threading

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", spec["port"]))
    listener.listen(64)
    slots = threading.BoundedSemaphore(32)

    def pump(src, dst, done):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        done()

    def serve():
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            if not slots.acquire(blocking=False):
                client.close()
                continue
            try:
                upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                upstream.connect(spec["socket"])
            except OSError:
                client.close()
                slots.release()
                continue
            left = [2]
            lock = threading.Lock()

            def done(client=client, upstream=upstream, left=left, lock=lock):
                with lock:
                    left[0] -= 1
                    if left[0]:
                        return
                client.close()
                upstream.close()
                slots.release()
            threading.Thread(target=pump, args=(client, upstream, done), daemon=True).start()
            threading.Thread(target=pump, args=(upstream, client, done), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()


def _listing(max_files):
    """[(path, size, mtime_ns)] of the workspace's regular files (readable ones); symlinks and
    other kinds are not memory and are left out; None past `max_files` files."""
    out = []
    for root, _dirs, files in os.walk(WORKSPACE):
        for name in files:
            full = os.path.join(root, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if len(out) >= max_files:
                return None
            if not st.st_mode & stat.S_IRUSR:
                try:
                    os.chmod(full, st.st_mode | stat.S_IRUSR)
                except OSError:
                    continue
            out.append((os.path.relpath(full, WORKSPACE), st.st_size, st.st_mtime_ns))
    return out


def main():
    _undumpable()
    job = json.loads(_read_line(0, 1 << 24))
    before = {}
    for path, size in job["workspace"]:
        data = _read_exact(0, size)
        full = os.path.join(WORKSPACE, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
        st = os.stat(full)
        before[path] = (st.st_size, st.st_mtime_ns)
    for name, text in job.get("tmp", {}).items():
        with open(os.path.join("/tmp", name), "w", encoding="utf-8") as f:
            f.write(text)
    os.close(0)
    os.open("/dev/null", os.O_RDONLY)

    _relay(job.get("egress"))
    result = job["result_fd"]   # the pipe the server reads the workspace back from
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    started = time.monotonic()
    deadline = started + job["timeout"]
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.closerange(3, 65536)
            os.chdir(WORKSPACE)
            _limits(job)()
            os.execve(job["argv"][0], job["argv"], job["env"])
        except BaseException as exc:
            os.write(2, f"could not start {job['argv'][0]}: {exc}\n".encode())
        os._exit(127)
    os.close(out_w)
    os.close(err_w)

    cap = job["out_max"] + 1
    sent = {out_r: 0, err_r: 0}
    seen = {out_r: 0, err_r: 0}
    to = {out_r: 1, err_r: 2}
    status = None
    timed_out = False
    open_fds = [out_r, err_r]
    while True:
        now = time.monotonic()
        if status is None:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
                _kill_all()   # the command ended: nothing it started outlives it
                deadline = min(deadline, now + 1.0)   # what is left in the pipes, then done
        if not open_fds:
            if status is not None:
                break
            time.sleep(0.005)
        if now >= deadline:
            if status is None:
                timed_out = True   # (the child is reaped by _kill_all below)
            break
        if open_fds:
            ready, _, _ = select.select(open_fds, [], [], min(0.05, max(0.0, deadline - now)))
            for fd in ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    open_fds.remove(fd)
                    continue
                seen[fd] += len(chunk)
                room = cap - sent[fd]
                if room > 0:
                    piece = chunk[:room]
                    _write_all(to[fd], piece)
                    sent[fd] += len(piece)
    _kill_all()
    duration_ms = int((time.monotonic() - started) * 1000)

    if timed_out:
        code, sig = -1, 0
    elif os.WIFEXITED(status):
        code, sig = os.WEXITSTATUS(status), 0
    else:
        code, sig = -1, os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
    after = _listing(job["max_files"])
    changed = [] if after is None else [f for f in after if before.get(f[0]) != (f[1], f[2])]
    head = {"exitCode": code, "signal": sig, "timedOut": timed_out, "durationMs": duration_ms,
            "stdoutBytes": seen[out_r], "stderrBytes": seen[err_r], "tooManyFiles": after is None,
            "files": [] if after is None else [[p, s] for p, s, _ in after],
            "changed": [p for p, _, _ in changed]}
    _write_all(result, json.dumps(head).encode() + b"\n")
    for path, size, _ in changed:
        with open(os.path.join(WORKSPACE, path), "rb") as f:
            left = size
            while left > 0:
                chunk = f.read(min(1 << 20, left))
                if not chunk:
                    break
                _write_all(result, chunk)
                left -= len(chunk)
            if left:   # (nothing runs any more, so a file cannot shrink; said rather than hung)
                _write_all(result, b"\0" * left)
    os.close(result)


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException as exc:
        sys.stderr.write(f"sandbox: {type(exc).__name__}: {exc}\n")
        raise SystemExit(70) from None
