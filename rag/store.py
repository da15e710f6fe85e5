"""Reaching the Chroma store: clients whose every request is bounded in time, the errors a
command reports plainly, and the ingest lock that lives on a shared Chroma server.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag.settings import Settings

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

log = logging.getLogger(__name__)

REPAIR = "python -m rag.ingest --repair"


class IndexError_(RuntimeError):
    """Base of index errors that a command reports without a traceback."""


class IndexBusy(IndexError_):
    """Another ingest holds the lock on this RAG_HOME or on the shared Chroma server."""


class StoreUnavailable(IndexError_):
    """The Chroma store cannot be reached or opened."""


class StoreTimeout(StoreUnavailable):
    """The Chroma server accepted a request and did not answer within RAG_CHROMA_TIMEOUT."""


class IndexDamaged(IndexError_):
    """A file of the index folder is damaged; `ingest --repair` moves it aside and rebuilds."""


def store_name(settings: Settings) -> str:
    """The store as error messages name it."""
    if settings.chroma.host:
        return f"the Chroma server at {settings.chroma.host}:{settings.chroma.port}"
    return f"the Chroma store in {settings.home / 'chroma'}"


def timed_out(settings: Settings) -> StoreTimeout:
    return StoreTimeout(
        f"cannot reach {store_name(settings)}: no reply within "
        f"{settings.chroma.timeout:g} s (RAG_CHROMA_TIMEOUT)"
    )


# What SQLite says of damage the quick start-up checks do not look for.
DAMAGE_SIGNS = re.compile(r"malformed|not a database|file is not a database", re.IGNORECASE)


def make_client(settings: Settings) -> ClientAPI:
    import chromadb
    from chromadb.config import Settings as ChromaConfig

    config = ChromaConfig(anonymized_telemetry=False, allow_reset=False)
    try:
        if settings.chroma.host:
            return _http_client(settings, config)
        path = settings.home / "chroma"
        path.mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=str(path), settings=config)
    except (KeyboardInterrupt, SystemExit, IndexError_):
        raise
    # chromadb raises bare ValueError/ConnectionError variants, and its Rust core may panic
    # (pyo3's PanicException derives from BaseException).
    except BaseException as err:
        if not settings.chroma.host and DAMAGE_SIGNS.search(str(err)):
            raise damaged_store(settings.home, str(err)) from err
        raise StoreUnavailable(f"cannot open {store_name(settings)}: {err}") from err


def _http_client(settings: Settings, config: Any) -> ClientAPI:
    """chromadb's HTTP client, with RAG_CHROMA_TIMEOUT on connect, read, write and pool.

    chromadb 1.5 creates its httpx session with no timeout, and asks the server twice while
    the client is built. So one bounded heartbeat goes first (a server that accepts and
    never replies fails it), then the session chromadb made gets the same bound.
    """
    import chromadb
    import httpx

    chroma = settings.chroma
    timeout = httpx.Timeout(chroma.timeout)
    scheme = "https" if chroma.ssl else "http"
    host = f"[{chroma.host}]" if ":" in str(chroma.host) else chroma.host
    try:
        reply = httpx.get(f"{scheme}://{host}:{chroma.port}/api/v2/heartbeat", timeout=timeout)
        reply.raise_for_status()
    except httpx.TimeoutException as err:
        raise timed_out(settings) from err
    except httpx.HTTPError as err:
        raise StoreUnavailable(f"cannot reach {store_name(settings)}: {err}") from err
    client = chromadb.HttpClient(
        host=str(chroma.host), port=chroma.port, ssl=chroma.ssl, settings=config
    )
    session = getattr(getattr(client, "_server", None), "_session", None)
    if not isinstance(session, httpx.Client):  # a chromadb upgrade moved it: say so, loudly
        raise StoreUnavailable(
            "this chromadb version does not expose its HTTP session, so requests to "
            f"{store_name(settings)} cannot be bounded in time; pin chromadb as pyproject.toml does"
        )
    session.timeout = timeout
    return client


def damaged_store(home: Path, why: str) -> IndexDamaged:
    busy = ""
    if lock_held(home):
        busy = " (an ingest is running on this folder: if it says so again once it ends,"
        busy += " repair it)"
    return IndexDamaged(
        f"the Chroma store in {home / 'chroma'} is damaged: {why}{busy}. "
        f"Repair it with `{REPAIR}`: it moves the damaged store to "
        f"{home / 'broken-<time>'} (nothing is deleted) and rebuilds the "
        "index from the catalog and the source files."
    )


def store_failure(settings: Settings, err: Exception) -> IndexError_:
    """A chromadb error met while using the store, as an error a command reports plainly."""
    if settings.chroma.host:
        where = f"{settings.chroma.host}:{settings.chroma.port}"
        return StoreUnavailable(f"the Chroma server at {where} failed: {err}")
    return damaged_store(settings.home, f"chromadb failed with: {err}")


def lock_held(home: Path) -> bool:
    from filelock import FileLock, Timeout

    if not (home / "ingest.lock").exists():
        return False
    lock = FileLock(str(home / "ingest.lock"))
    try:
        lock.acquire(timeout=0)
    except (Timeout, OSError):
        return True
    lock.release()
    return False


class ServerLock:
    """The ingest lock of one collection on a shared Chroma server, for ingests started from
    several machines (the per-RAG_HOME file lock only serialises one machine's).

    The lock is a collection named after the index: the server creates a name once, so one
    creator wins. Its metadata names the owner and an expiry in the server's own clock (the
    machines' clocks may disagree), renewed every third of RAG_CHROMA_LOCK_TTL while the
    ingest runs; a lock past its expiry, left by an ingest that was killed, is taken over.
    Taking over is itself won by one creator (a marker collection per expired owner), so
    two waiters cannot both remove a lock and one of them remove the other's new one.
    """

    def __init__(self, client: ClientAPI, index_name: str, ttl: float, where: str) -> None:
        self.client = client
        self.name = f"{index_name}-ingest-lock"
        self.ttl = ttl
        self.where = where
        self.token = uuid.uuid4().hex[:16]
        self.lost = ""
        self._held: Collection | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _now(self) -> float:
        return float(self.client.heartbeat()) / 1e9

    def _holder(self, name: str | None = None) -> dict[str, Any] | None:
        from chromadb.errors import NotFoundError

        try:
            found = self.client.get_collection(name or self.name, embedding_function=None)
            return dict(found.metadata or {})
        except NotFoundError:
            return None

    def acquire(self, timeout: float) -> None:
        from chromadb.errors import ChromaError

        deadline = time.monotonic() + timeout
        while True:
            now = self._now()
            meta = {
                "owner": self.token,
                "host": socket.gethostname()[:100],
                "pid": os.getpid(),
                "started": now,
                "expires": now + self.ttl,
            }
            try:
                self._held = self.client.create_collection(
                    self.name, metadata=meta, embedding_function=None
                )
                break
            except ChromaError as err:
                held = self._holder()
                if held is None:
                    if "exists" not in str(err):
                        raise
                    continue  # released between the two requests
            if float(held.get("expires", 0)) < now and self._take_over(held, now):
                continue
            if time.monotonic() >= deadline:
                started = time.strftime("%H:%M:%S", time.localtime(float(held.get("started", 0))))
                raise IndexBusy(
                    f"another ingest is writing to {self.where} (host {held.get('host')}, "
                    f"pid {held.get('pid')}, started {started}); waited {timeout:.0f}s "
                    "(RAG_INGEST_LOCK_TIMEOUT). Try again when it has finished."
                )
            time.sleep(min(0.5, max(0.05, deadline - time.monotonic())))
        self._renewer = threading.Thread(target=self._renew, name="ingest-lock", daemon=True)
        self._renewer.start()

    def _take_over(self, held: dict[str, Any], now: float) -> bool:
        """Remove an expired lock; False while another waiter is removing it."""
        from chromadb.errors import ChromaError

        marker = f"{self.name}-expired-{held.get('owner')}"
        try:
            self.client.create_collection(
                marker, metadata={"by": self.token, "at": now}, embedding_function=None
            )
        except ChromaError:
            # Another waiter is taking it over. A marker whose creator died mid-way is
            # cleared once it is older than a lock could be.
            seen = self._holder(marker)
            if seen is not None and now - float(seen.get("at", now)) > self.ttl:
                self._delete(marker)
            return False
        try:
            again = self._holder()
            if (
                again is not None
                and again.get("owner") == held.get("owner")
                and float(again.get("expires", 0)) < now
            ):
                log.warning(
                    "taking over the ingest lock of host %s pid %s on %s: it expired",
                    again.get("host"),
                    again.get("pid"),
                    self.where,
                )
                self._delete(self.name)
        finally:
            self._delete(marker)
        return True

    def _delete(self, name: str) -> None:
        from chromadb.errors import NotFoundError

        with contextlib.suppress(NotFoundError):
            self.client.delete_collection(name)

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            held = self._held
            if held is None:
                return
            try:
                mine = self._holder()
                if mine is None or mine.get("owner") != self.token:
                    self.lost = f"the ingest lock on {self.where} was taken over by another ingest"
                    return
                # Through the handle of the collection this lock created: if it was removed
                # and created again by another ingest, this fails instead of renewing theirs.
                held.modify(metadata={**mine, "expires": self._now() + self.ttl})
            except Exception as err:  # the ingest's own requests report a lost server
                log.warning("could not renew the ingest lock on %s: %s", self.where, err)

    def check(self) -> None:
        """Raise if the lock was lost (taken over after an expiry): stop writing at once."""
        if self.lost:
            raise IndexBusy(self.lost + "; this ingest stopped, run it again")

    def release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=5)
        if self._held is None:
            return
        self._held = None
        try:
            mine = self._holder()
            if mine is not None and mine.get("owner") == self.token:
                self._delete(self.name)
        except Exception as err:  # it expires on its own
            log.warning("could not release the ingest lock on %s: %s", self.where, err)
