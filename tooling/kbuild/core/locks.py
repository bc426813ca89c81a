"""Inter-process locks: a second build or publish of the same thing waits, saying so once."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from kbuild.core import paths


@contextmanager
def hold(lock_file: Path, log: Callable[[str], None], waiting: str) -> Iterator[None]:
    """Hold the lock `lock_file`; while another process holds it, log `waiting` and the lock's path, then wait."""
    if lock_file.is_symlink():
        paths.remove(lock_file)
    lock = FileLock(lock_file)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log(f"{waiting} (lock {lock.lock_file})")
        lock.acquire()
    try:
        yield
    finally:
        lock.release()
