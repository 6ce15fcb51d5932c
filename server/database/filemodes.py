"""Owner-only files: the data dir is 0700, the database and its -wal/-shm files 0600.

They hold every account's agents, sessions and (sealed) secrets, so no other local user may read
them, whatever the umask. New ones are created that way (SQLite gives -wal and -shm the mode of
the database file); existing ones that are wider are left alone but named in a warning at start,
since changing an operator's choice silently could break a setup that shares them on purpose.
"""
from __future__ import annotations

import logging
import os

log = logging.getLogger("seed_agents.files")

DIR_MODE = 0o700
FILE_MODE = 0o600
DB_SUFFIXES = ("", "-wal", "-shm")


def make_private_dir(path: str) -> None:
    """Create `path` (and missing parents) with mode 0700 when it does not exist yet."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent != path:
        make_private_dir(parent)
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        return
    os.chmod(path, DIR_MODE)  # whatever the umask


def create_private_file(path: str) -> None:
    """Create an empty `path` with mode 0600 if it does not exist (before SQLite opens it, so the
    database, and the -wal and -shm files SQLite derives from it, are owner-only)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, FILE_MODE)  # whatever the umask
    finally:
        os.close(fd)


def wide_modes(data_dir: str, db_path: str | None) -> list[tuple[str, int]]:
    """[(path, mode)] of the data dir and database files (None: not on this disk, e.g.
    PostgreSQL) that group or others may access."""
    found = []
    paths = [(data_dir, DIR_MODE)] + [(db_path + s, FILE_MODE) for s in DB_SUFFIXES if db_path]
    for path, _wanted in paths:
        try:
            mode = os.stat(path).st_mode & 0o777
        except FileNotFoundError:
            continue
        if mode & 0o077:
            found.append((path, mode))
    return found


def warn_if_wide(data_dir: str, db_path: str | None) -> list[tuple[str, int]]:
    wide = wide_modes(data_dir, db_path)
    for path, mode in wide:
        wanted = "700" if os.path.isdir(path) else "600"
        log.warning("%s is accessible to other local users (mode %o); chmod %s it: it holds "
                    "every account's data", path, mode, wanted)
    return wide
