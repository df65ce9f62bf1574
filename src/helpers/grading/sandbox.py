"""The trusted side of a grading worker: one bubblewrap sandbox holding one warm zygote.

The sandbox (``bwrap``) sees a read-only minimal root: the system's ``/usr`` (and ``/etc``,
``/sys``), the Python installation and the ``helpers`` package — nothing else of the host,
so neither the submissions, nor the output folder, nor ``solutions/``. It has no network
(``--unshare-net``: only a loopback of its own), its own PID/IPC/UTS namespaces, a small
private ``/tmp`` (the only writable place), no new privileges, and dies with the grader.
The zygote is the namespace's init (``--as-pid-1``): signals from the submissions cannot
reach it, and when it dies the kernel kills everything inside.

The grader talks to the zygote over the sandbox's stdin/stdout (8-byte framed JSON);
the notebook goes in that way, so the sandbox needs no view of any file.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .protocol import SANDBOX_VIEW, ProtocolError, dumps, frame

STARTUP_TIMEOUT = 300.0  # importing torch + TensorFlow on a busy machine
GRACE = 30.0  # beyond the zygote's own deadline before the grader kills the whole sandbox
ZYGOTE = "from helpers.grading.zygote import main; main()"
ZYGOTE_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER")


# Unprivileged uids for the submissions: one per worker, from a range systemd documents as unused
# (1879048192…2147483647: above the nspawn container ranges, below the 32-bit sign bit), so
# they collide neither with real users nor with DynamicUser= services (61184…65519).
UID_RANGE = 1_879_048_192


def uid_base_for(pid: int) -> int:
    """The first worker uid of the grader whose process id is ``pid`` (64 workers each)."""
    return UID_RANGE + 64 * (pid % 4_000_000)


class SandboxError(RuntimeError):
    """The sandbox could not be started (message says why)."""


def find_bwrap() -> str | None:
    return shutil.which("bwrap")


def probe_bwrap() -> str | None:
    """None when bubblewrap can build this grader's kind of sandbox here, else why not.

    An installed ``bwrap`` may still be unable to create namespaces (e.g. in an unprivileged
    container); this tries the namespaces the grader uses.
    """
    bwrap = find_bwrap()
    if bwrap is None:
        return "bwrap (bubblewrap) is not installed"
    cmd = [bwrap, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--unshare-net", "--unshare-pid",
           "--unshare-ipc", "--die-with-parent", "--as-pid-1", "--new-session"]
    cmd += ["--cap-drop", "ALL"] if os.geteuid() == 0 else ["--unshare-user"]
    try:
        proc = subprocess.run([*cmd, "--", "/bin/sh", "-c", "exit 0"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not be run ({exc})"
    if proc.returncode != 0:
        return f"bwrap cannot create a sandbox here: {proc.stderr.strip()[:300] or f'exit code {proc.returncode}'}"
    return None


@dataclass
class Settings:
    sandboxed: bool = True
    timeout: float = 600.0
    memory_mb: int = 4096
    file_mb: int = 64
    max_bytes: int = 64 << 20
    nproc: int = 64
    threads: int = 1
    tmp_mb: int = 512
    hide: list[Path] = field(default_factory=list)  # host paths that must never be visible inside
    frameworks: tuple[str, ...] = ("torch", "tensorflow")  # preloaded in the zygote
    carry_forward: bool = True  # a step right on top of a wrong earlier answer gets its points
    uid_base: int = field(default_factory=lambda: uid_base_for(os.getpid()))


def _python_roots() -> list[str]:
    """Every host folder the sandboxed Python needs, outermost first, without /usr."""
    import helpers

    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    candidates.add(os.path.dirname(os.path.realpath(sys.executable)))
    candidates.add(os.path.dirname(os.path.dirname(os.path.realpath(helpers.__file__))))
    cwd = os.getcwd()
    for entry in sys.path:  # installed packages only: never the current folder (`python -m` puts it first)
        if (entry and os.path.isabs(entry) and os.path.exists(entry) and entry != cwd
                and ("site-packages" in entry or "dist-packages" in entry or entry.endswith(".zip"))):
            candidates.add(entry)
    roots: list[str] = []
    for path in sorted({os.path.realpath(c) for c in candidates} | candidates, key=len):
        if not os.path.exists(path) or path == "/":
            continue
        if any(path == r or path.startswith(r.rstrip("/") + "/") for r in ["/usr", *roots]):
            continue
        roots.append(path)
    return roots


def _traversable(paths: Iterable[str]) -> bool:
    """Can any user reach (and read) these folders? Checks every parent's "others" bits."""
    import stat

    for path in paths:
        p = os.path.realpath(path)
        while True:
            try:
                mode = os.stat(p).st_mode
            except OSError:
                return False
            if not mode & stat.S_IXOTH or (p == os.path.realpath(path) and not mode & stat.S_IROTH):
                return False
            if p == "/":
                break
            p = os.path.dirname(p)
    return True


def user_tasks(uid: int | None = None) -> int:
    """Processes + threads this user runs now (RLIMIT_NPROC counts them all, machine-wide)."""
    uid = os.getuid() if uid is None else uid
    count = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                count += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
    return count


def _inside(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def bwrap_command(bwrap: str, settings: Settings, config: dict[str, Any]) -> list[str]:
    cmd = [bwrap, "--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            cmd += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            cmd += ["--ro-bind", top, top]
    cmd += ["--ro-bind", "/etc", "/etc", "--ro-bind-try", "/sys", "/sys", "--proc", "/proc", "--dev", "/dev"]
    cmd += ["--size", str(settings.tmp_mb << 20), "--tmpfs", "/tmp"]
    made: set[str] = {"/", "/tmp", "/usr", "/etc", "/sys", "/proc", "/dev"}
    roots = _python_roots()
    for root in roots:
        parents = []
        parent = os.path.dirname(root)
        while parent not in made and parent != "/":
            parents.append(parent)
            parent = os.path.dirname(parent)
        for p in reversed(parents):  # readable by the unprivileged uid (bwrap would copy 0700 from /root)
            cmd += ["--perms", "0755", "--dir", p]
            made.add(p)
        cmd += ["--ro-bind", root, root]
        made.add(root)
    cmd += helpers_view()
    for hidden in settings.hide:  # only matters if it lies inside a folder the sandbox needs
        h = os.path.realpath(hidden)
        if _inside(h, ["/usr", "/etc", *roots]) and os.path.exists(h):
            cmd += ["--tmpfs", h] if os.path.isdir(h) else ["--ro-bind", "/dev/null", h]
    cmd += ["--remount-ro", "/"]
    cmd += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    cmd += ["--die-with-parent", "--as-pid-1", "--new-session", "--hostname", "grading-sandbox"]
    if os.geteuid() == 0:
        cmd += ["--cap-drop", "ALL"]
        for cap in ZYGOTE_CAPS:
            cmd += ["--cap-add", cap]
    else:
        cmd += ["--unshare-user"]
    env = {
        "PATH": f"{sys.prefix}/bin:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "TF_ENABLE_ONEDNN_OPTS": "0",
        "MPLBACKEND": "Agg",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    cmd += ["--clearenv"]
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    cmd += ["--chdir", "/tmp", "--", sys.executable, "-I", "-c", ZYGOTE, json.dumps(config)]
    return cmd


def helpers_view() -> list[str]:
    """bwrap arguments that replace the ``helpers`` package, wherever it is installed, by its
    sandbox view: an empty folder holding only the entries of ``SANDBOX_VIEW``. The registry
    (``course/``: references, wrong variants, solutions), the student-side checks built on it and
    the grader itself are not in the sandbox at all."""
    import helpers

    root = os.path.dirname(os.path.realpath(helpers.__file__))
    args = ["--perms", "0755", "--tmpfs", root]
    made: set[str] = set()
    for entry in SANDBOX_VIEW:
        source = os.path.join(root, entry)
        if not os.path.exists(source):
            continue
        parent = os.path.dirname(entry)
        if parent and parent not in made:
            args += ["--perms", "0755", "--dir", os.path.join(root, parent)]
            made.add(parent)
        args += ["--ro-bind", source, source]
    return args


class Worker:
    """One sandbox + zygote; grades one submission at a time; restarts itself when needed."""

    def __init__(self, index: int, settings: Settings):
        self.index = index
        self.settings = settings
        self.proc: subprocess.Popen[bytes] | None = None
        self.info: dict[str, Any] = {}
        self._buf = bytearray()
        self._log = tempfile.TemporaryFile(prefix="grader-sandbox-")
        self._state_dir: str | None = None
        self.restarts = 0

    # -- lifecycle -------------------------------------------------------------------
    def _config(self) -> dict[str, Any]:
        root = os.geteuid() == 0
        uid = self.settings.uid_base + self.index % 64 if root else None
        if uid is not None and not self.settings.sandboxed and not _traversable(_python_roots()):
            uid = None  # another uid could not even read Python here (e.g. it lives under /root)
        config: dict[str, Any] = {"sandboxed": self.settings.sandboxed, "uid": uid, "gid": uid,
                                  "threads": self.settings.threads, "frameworks": list(self.settings.frameworks)}
        if self.settings.sandboxed:
            config["state_dir"] = "/tmp/zygote"
        else:
            self._state_dir = tempfile.mkdtemp(prefix="grader-zygote-")
            os.chmod(self._state_dir, 0o755)
            config["state_dir"] = self._state_dir
        return config

    def start(self) -> None:
        self.kill()
        config = self._config()
        if self.settings.sandboxed:
            bwrap = find_bwrap()
            if bwrap is None:
                raise SandboxError("bwrap (bubblewrap) is not installed")
            cmd = bwrap_command(bwrap, self.settings, config)
            env = None
        else:
            cmd = [sys.executable, "-I", "-c", ZYGOTE, json.dumps(config)]
            env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0", "MPLBACKEND": "Agg"}
        self._log.seek(0)
        self._log.truncate()
        self._buf.clear()
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, start_new_session=True, env=env
        )
        try:
            msg = self._read_message(time.monotonic() + STARTUP_TIMEOUT)
        except (EOFError, TimeoutError, ProtocolError, ValueError) as exc:
            self.kill()
            raise SandboxError(f"the sandbox did not start ({exc}).\n{self.log_tail()}") from None
        if msg.get("t") != "ready":
            self.kill()
            raise SandboxError(f"the sandbox sent {msg!r} instead of 'ready'")
        self.info = msg

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream:
                    stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        self.proc = None
        if self._state_dir:
            shutil.rmtree(self._state_dir, ignore_errors=True)
            self._state_dir = None

    def close(self) -> None:
        """Let the zygote exit on its own (EOF on stdin), then make sure it is gone."""
        if self.proc is not None and self.proc.poll() is None and self.proc.stdin:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        self._log.close()

    def log_tail(self, chars: int = 3000) -> str:
        try:
            self._log.seek(0, os.SEEK_END)
            size = self._log.tell()
            self._log.seek(max(0, size - chars))
            return self._log.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

    # -- one job ---------------------------------------------------------------------
    def run(self, job: dict[str, Any], cells: list[str]) -> tuple[dict[str, Any], bytes]:
        """Send one job; return the zygote's header and the child's raw records.

        The cells follow the job header on the same pipe; the zygote leaves them there for
        the child to read, so they never enter the zygote's memory.
        """
        if not self.alive():
            self.restarts += bool(self.info)  # it ran before: this is a restart
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        payload = dumps(cells)
        if self.info.get("uid") is None:  # the submission shares the grader's uid: count what it runs
            job = {**job, "nproc": user_tasks() + int(job["nproc"])}
        deadline = time.monotonic() + float(job["timeout"]) + GRACE
        try:
            self._write(frame(dumps({**job, "payload_bytes": len(payload)}), 8) + frame(payload, 8), deadline)
        except (OSError, TimeoutError):
            tail = self.log_tail()
            self.kill()
            return {"state": "sandbox_died", "message": f"the sandbox did not take the notebook. {tail}"}, b""
        try:
            header = self._read_message(deadline)
            blob = self._read_frame(deadline, limit=int(job["max_bytes"]) + 1024)
        except TimeoutError:
            self.kill()
            return {"state": "timeout", "message": "the sandbox did not answer in time", "seconds": None}, b""
        except (EOFError, ProtocolError, ValueError) as exc:
            self.kill()
            return {"state": "sandbox_died", "message": f"the sandbox stopped unexpectedly ({exc})"}, b""
        if not isinstance(header, dict) or header.get("t") != "result":
            self.kill()
            return {"state": "sandbox_died", "message": "the sandbox answered out of protocol"}, b""
        return header, blob

    # -- reading and writing with a deadline -----------------------------------------
    def _write(self, data: bytes, deadline: float) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        fd = self.proc.stdin.fileno()
        view = memoryview(data)
        os.set_blocking(fd, False)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the sandbox does not read")
            _, ready, _ = select.select([], [fd], [], remaining)
            if ready:
                try:
                    view = view[os.write(fd, view):]
                except BlockingIOError:
                    continue

    def _fill(self, n: int, deadline: float) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while len(self._buf) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no answer from the sandbox")
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise EOFError("the sandbox closed its output")
            self._buf += chunk

    def _read_frame(self, deadline: float, limit: int = 1 << 30) -> bytes:
        self._fill(8, deadline)
        (n,) = struct.unpack(">Q", bytes(self._buf[:8]))
        if n > limit:
            raise ProtocolError(f"a message of {n} bytes")
        self._fill(8 + n, deadline)
        data = bytes(self._buf[8 : 8 + n])
        del self._buf[: 8 + n]
        return data

    def _read_message(self, deadline: float) -> Any:
        return json.loads(self._read_frame(deadline, limit=16 << 20).decode("utf-8"))
