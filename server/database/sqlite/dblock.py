"""One server per SQLite database: an OS lock on `<database>.lock` (the database's path with
symlinks resolved), held for the server's life.

`fcntl.flock` belongs to the open file, so the kernel drops it when the process ends however it
ends (SIGKILL included): a crash never leaves a stale lock behind. The file holds the owner's
pid, only to name it in the refusal; the file itself stays (removing it would race a starter).
Several servers share data only through a PostgreSQL storage URL, never through one SQLite file:
the dense event sequence and the per-session caches assume one writer process.
"""
from __future__ import annotations

import errno
import fcntl
import os

from ..errors import StorageError
from ..filemodes import make_private_dir


class DatabaseLocked(StorageError):
    """Another live process holds the database; the message names it."""


class DatabaseLock:
    def __init__(self, db_path: str) -> None:
        self.db_path = db_path
        # Named after the file the path resolves to: a second server given a symlink (or a
        # path through a symlinked folder) to the same database finds the same lock.
        self.path = os.path.realpath(db_path) + ".lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise DatabaseLocked (or OSError when the folder is unusable)."""
        make_private_dir(os.path.dirname(os.path.abspath(self.path)))   # 0700 whatever the umask (store/filemodes.py)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_pid(fd)
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                raise
            who = f"pid {holder}" if holder else "another process"
            raise DatabaseLocked(
                f"another seed-agents server ({who}) is already using the database {self.db_path}; "
                f"stop it first, or give this server its own --data-dir or --db-path") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.ftruncate(fd, 0)
            os.close(fd)   # closing drops the flock


def _read_pid(fd: int) -> int | None:
    try:
        return int(os.pread(fd, 32, 0).decode().strip())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
