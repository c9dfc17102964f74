"""An exclusive writer lock on an audit directory (``fcntl.flock`` on the file ``lock``).

Every writer (an open :class:`~bayes_eval.Audit` with a path, each CLI command that changes the
directory) holds the lock for its whole life; a second writer fails at once with an error naming
the holder's pid. The kernel releases a ``flock`` when its holder dies, so a crashed writer never
leaves a stale lock. Readers (``status``, ``report``, ``Audit.open(..., read_only=True)``) take no
lock.
"""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .ledger import LedgerError

__all__ = ["LOCK_NAME", "AuditLockedError", "DirectoryLock", "lock_for_writer"]

LOCK_NAME = "lock"


class AuditLockedError(LedgerError):
    """Another process holds the writer lock of an audit directory."""


class DirectoryLock:
    """Exclusive, non-blocking ``flock`` on ``directory/lock``; the file holds the holder's pid."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / LOCK_NAME
        self._fd = -1
        self._pid = -1

    def acquire(self) -> DirectoryLock:
        import fcntl

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            finally:
                os.close(fd)
            raise AuditLockedError(
                f"audit directory {str(self.path.parent)!r} is locked by another writer "
                f"(pid {holder}); wait for it to finish or stop it; readers such as "
                "`bayes-eval status` need no lock"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        self._pid = os.getpid()
        return self

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def release(self) -> None:
        """Release the lock (idempotent); the lock file stays, empty."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            if self._pid == os.getpid():  # not in a forked child sharing the parent's lock
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
            os.close(fd)  # closing the last descriptor releases the flock

    def __enter__(self) -> DirectoryLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()


#: writers holding a lock in this process, by real path of the directory (with the pid, so that
#: a forked child does not take over its parent's writer)
_WRITERS: dict[str, tuple[int, weakref.ref[Any]]] = {}


def lock_for_writer(
    directory: str | Path, owner: Any, supersede: Callable[[Any], None]
) -> DirectoryLock:
    """The writer lock of ``directory`` for ``owner``.

    ``flock`` locks belong to an open file, so two writers in one process would also exclude
    each other; instead a newer writer in the same process supersedes the older one
    (``supersede(old)`` must close it, releasing its lock), so that reopening an audit in a
    notebook or a test keeps working while the older object can no longer write stale state.
    Another process holding the lock raises :class:`AuditLockedError`.
    """
    key = os.path.realpath(directory)
    pid, ref = _WRITERS.get(key, (-1, None))
    old = ref() if ref is not None and pid == os.getpid() else None
    if old is not None and old is not owner:
        supersede(old)
    lock = DirectoryLock(directory).acquire()
    _WRITERS[key] = (os.getpid(), weakref.ref(owner))
    return lock
