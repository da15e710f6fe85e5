"""Checks the files of an index folder before anything opens them.

Measured with chromadb 1.5.9 on copies of a real index, a damaged store does not fail cleanly:
- chroma.sqlite3 truncated to 0 bytes is silently replaced by an empty store (the index
  looks empty); truncated mid-file it fails with "database disk image is malformed".
- A persisted HNSW segment (one that has index_metadata.pickle: collections past the
  sync threshold) with a truncated header.bin makes the process segfault or hang;
  truncated data_level0.bin, link_lists.bin or pickle fail at query time with an
  InternalError, or return nothing.
- A segment that was never persisted (no pickle; small collections) is rebuilt from the
  store's log on open, so damage to its files is harmless and is not reported.
So the files are validated here with plain reads (sqlite header, HNSW file sizes against
their header; ingest adds `PRAGMA quick_check`), which cannot crash or hang. Measured: a few
milliseconds for the seed index; 0.6 s warm, 5.8 s cold for the 180 MB ICML store with
quick_check, a few ms without it.
"""

from __future__ import annotations

import sqlite3
import struct
from pathlib import Path

SQLITE_MAGIC = b"SQLite format 3\x00"
# chromadb's hnswlib fork: persistence version (int32), offsetLevel0, max_elements,
# cur_element_count, size_data_per_element, label_offset, offsetData (6 x uint64), maxlevel
# (int32), enterpoint (uint32), maxM, maxM0, M (3 x uint64), mult (double), ef_construction.
HNSW_HEADER = struct.Struct("<i6QiI3QdQ")
HNSW_VECTOR_SEGMENT = "urn:chroma:segment/vector/hnsw-local-persisted"


def _connect(path: Path) -> sqlite3.Connection:
    # Not read-only: after a writer was killed mid-transaction, opening rolls its hot journal
    # back, as chromadb would on open; a read-only connection would fail on it instead.
    # The timeout bounds the wait for a live writer's lock.
    return sqlite3.connect(path, timeout=5)


def _cut_tail(path: Path) -> str | None:
    """The file is shorter than its header says (quick_check misses a cut tail of free pages)."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(100)
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    # The page count in the header is valid when written by the same change as the counter.
    if head[24:28] == head[92:96] and size < pages * page_size:
        return f"{path.name} is truncated ({size} of {pages * page_size} bytes)"
    return None


def check_sqlite(path: Path, thorough: bool = True) -> str | None:
    """Why this SQLite file is unusable, or None; a missing file is not a problem here.

    `thorough` adds `PRAGMA quick_check`, which reads every page: milliseconds for the seed
    index, but seconds for a 180 MB store out of a cold cache, so only ingest pays for it.
    """
    if not path.exists():
        return None
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(100)
    if size == 0 or len(head) < 100 or not head.startswith(SQLITE_MAGIC):
        return f"{path.name} is not a SQLite database ({size} bytes)"
    journal = path.with_name(path.name + "-journal")
    # A killed writer's journal is rolled back on open; until then the file may look short.
    if not (journal.exists() and journal.stat().st_size) and (problem := _cut_tail(path)):
        return problem
    if not thorough:
        return None
    try:
        db = _connect(path)
        try:
            rows = db.execute("PRAGMA quick_check(3)").fetchall()
        finally:
            db.close()
    except sqlite3.Error as err:
        return f"{path.name} cannot be read: {err}"
    if rows != [("ok",)]:
        found = "; ".join(" ".join(str(r[0]).split()) for r in rows)  # one line
        return f"{path.name} failed its integrity check: {found}"
    return _cut_tail(path)


def _persisted_vector_segments(db_path: Path) -> set[str]:
    """Ids of the HNSW segments whose progress is recorded, i.e. that were written to disk."""
    db = _connect(db_path)
    try:
        rows = db.execute(
            "SELECT id FROM segments WHERE type = ? AND id IN (SELECT segment_id FROM max_seq_id)",
            (HNSW_VECTOR_SEGMENT,),
        )
        return {str(sid) for (sid,) in rows}
    finally:
        db.close()


def check_hnsw(folder: Path) -> str | None:
    """Why this persisted HNSW segment folder is unusable, or None."""
    pickle = folder / "index_metadata.pickle"
    if not pickle.exists():
        return f"{folder.name}/index_metadata.pickle is missing"
    blob = pickle.read_bytes()
    if not blob.endswith(b"."):  # every pickle ends with the STOP opcode
        return f"{folder.name}/index_metadata.pickle is truncated ({len(blob)} bytes)"
    header = folder / "header.bin"
    raw = header.read_bytes() if header.exists() else b""
    if len(raw) != HNSW_HEADER.size:
        return f"{folder.name}/header.bin has {len(raw)} bytes, not {HNSW_HEADER.size}"
    fields = HNSW_HEADER.unpack(raw)
    version, count, per_element = fields[0], fields[3], fields[4]
    if version != 1:
        return None  # a format this check does not know; leave it to chromadb
    sizes = {
        "data_level0.bin": count * per_element,
        "length.bin": count * 4,  # one float32 norm per element
    }
    for name, want in sizes.items():
        have = (folder / name).stat().st_size if (folder / name).exists() else -1
        if have < want:
            return f"{folder.name}/{name} is truncated ({max(have, 0)} of {want} bytes)"
    # link_lists.bin: per element a uint32 byte count, then that many bytes of links.
    link_file = folder / "link_lists.bin"
    links = link_file.read_bytes() if link_file.exists() else b""
    pos = 0
    for _ in range(count):
        if pos + 4 > len(links):
            return f"{folder.name}/link_lists.bin is truncated ({len(links)} bytes)"
        pos += 4 + int.from_bytes(links[pos : pos + 4], "little")
    if pos > len(links):
        return f"{folder.name}/link_lists.bin is truncated ({len(links)} of {pos} bytes)"
    return None


def check_store(folder: Path, thorough: bool = False) -> list[str]:
    """What is wrong with an embedded Chroma store folder; empty when it looks sound."""
    if not folder.is_dir():
        return []
    db_path = folder / "chroma.sqlite3"
    segment_dirs = [p for p in folder.iterdir() if p.is_dir() and (p / "header.bin").exists()]
    if not db_path.exists():
        # Chroma would start an empty store beside the vectors and lose them silently.
        return ["chroma.sqlite3 is missing"] if segment_dirs else []
    problem = check_sqlite(db_path, thorough)
    if problem:
        return [problem]
    try:
        persisted = _persisted_vector_segments(db_path)
    except sqlite3.Error as err:
        return [f"chroma.sqlite3 has no readable segment table: {err}"]
    problems = []
    for sid in sorted(persisted):
        if not (folder / sid).is_dir():
            problems.append(f"the vector segment folder {sid} is missing")
            continue
        problem = check_hnsw(folder / sid)
        if problem:
            problems.append(problem)
    return problems
