"""Named crash points, for testing that an interrupted ingest leaves a recoverable index.

`RAG_FAULT_POINT=<name>[:<n>]` makes the process kill itself with SIGKILL the n-th time (default
the first) it passes `checkpoint(name)`: no cleanup handler, `finally` or atexit runs, exactly
as when the machine loses power or the OOM killer strikes. Unset, a checkpoint is one compare.
The variable is read once, at import.
"""

from __future__ import annotations

import os
import signal


def _parse(spec: str) -> tuple[str, int] | None:
    name, _, nth = spec.strip().partition(":")
    if not name:
        return None
    try:
        return name, max(1, int(nth)) if nth else 1
    except ValueError:
        return None  # a malformed spec disables the hook rather than crashing at import


_TARGET = _parse(os.environ.get("RAG_FAULT_POINT", ""))
_passed = 0


def checkpoint(name: str) -> None:
    """Die here if this is the configured fault point, reached for the configured time."""
    global _passed
    if _TARGET is None or name != _TARGET[0]:
        return
    _passed += 1
    if _passed == _TARGET[1]:
        os.kill(os.getpid(), signal.SIGKILL)
