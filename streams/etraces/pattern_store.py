"""The pattern store over qdrant-client: embedded local mode on disk, or a Qdrant server.

Collection layout keeps the hot path free of payload filters (local mode evaluates filters
in Python, slow at 10k+ points): one collection per E1 org, one E2 collection per failure
type plus one with every E2 pattern, one for E3. Server mode also gets keyword payload
indexes on tier/org_id/failure_type for ad-hoc queries.

A pattern is named by its id within its scope: E2 and E3 patterns are shared (one id names
one pattern), an E1 pattern belongs to its org (its point id derives from org and id). So two
orgs may use the same id, and loading one org's file never overwrites or removes another
org's pattern, nor a shared one (a shared pattern that changed tier or failure type moves).
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import orjson

from ..core.embedding_port import Embedder
from ..core.etrace_rules import E3_MAX, Answer, Hit, Query
from .patterns import FAILURE_TYPE_VALUES, Pattern

log = logging.getLogger(__name__)
PREFIX = "rb_"
E3_COLLECTION = "rb_e3"
E2_ALL = "rb_e2"
E1_PREFIX = f"{PREFIX}e1_"
_ID_NS = uuid.UUID("6f1c3a52-8f0e-4c1e-9d55-2b7e0c1f9a10")
_SAFE = re.compile(r"[^a-z0-9_-]+")
E3_CACHE_S = 10.0
CANDIDATES_PER_HIT = 4  # extra candidates so family/gate filtering still leaves top-k


class PatternStore(Protocol):
    """What the retrieval adapter needs; swap in another vector store behind it."""

    def answer(self, query: Query) -> Answer: ...

    def cached(self, query: Query) -> Answer | None:
        """The answer if the store holds it without I/O (E3's rules, while fresh), else None:
        the retriever answers it on the event loop instead of handing it to a thread."""
        ...

    def close(self) -> None: ...


class StoreInUse(RuntimeError):
    """Local mode: another process holds the store directory."""


def point_id(pattern_id: str, org_id: str | None = None) -> str:
    """A shared pattern's point id (`org_id` None), or an org's E1 pattern's: from (org, id),
    so the same id in two orgs names two patterns."""
    if org_id is None:
        return str(uuid.uuid5(_ID_NS, pattern_id))
    return str(uuid.uuid5(_ID_NS, orjson.dumps(["e1", org_id, pattern_id]).decode("utf-8")))


def pattern_point(p: Pattern) -> str:
    return point_id(p.id, p.org_id if p.tier == "e1" else None)


def e1_collection(org_id: str) -> str:
    """Per-org collection; the hash keeps distinct org ids distinct after sanitising."""
    safe = _SAFE.sub("_", org_id.lower())[:40]
    return f"{E1_PREFIX}{safe}_{hashlib.sha1(org_id.encode('utf-8')).hexdigest()[:10]}"


def e2_collection(failure_type: str | None) -> str:
    return E2_ALL if failure_type is None else f"{E2_ALL}_{failure_type}"


def collections_for(p: Pattern) -> list[str]:
    if p.tier == "e1":
        assert p.org_id is not None
        return [e1_collection(p.org_id)]
    if p.tier == "e2":
        return [E2_ALL] + ([e2_collection(p.failure_type)] if p.failure_type else [])
    return [E3_COLLECTION]


class QdrantPatternStore:
    """Patterns in Qdrant, queried with the same embedder that embedded them."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        path: str | Path | None = None,
        url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 5.0,
        client: Any = None,
        server_mode: bool | None = None,
    ) -> None:
        from qdrant_client import QdrantClient

        self.embedder = embedder
        self.location = url or (str(path) if path is not None else ":memory:")
        if client is not None:
            self.client = client
        elif url:
            self.client = QdrantClient(
                url=url, api_key=api_key or None, timeout=max(1, int(timeout_s)), check_compatibility=False
            )
        else:
            if path is not None:
                Path(path).mkdir(parents=True, exist_ok=True)
            try:
                self.client = QdrantClient(path=str(path)) if path is not None else QdrantClient(":memory:")
            except RuntimeError as exc:
                if "already accessed" in str(exc):
                    raise StoreInUse(
                        f"the pattern store at {path} is open in another process (a running worker?). "
                        "Stop it first, or run Qdrant as a server (RB_QDRANT_URL) to change patterns live."
                    ) from None
                raise
        self.server_mode = bool(url) if server_mode is None else server_mode
        self._known: set[str] = set()
        self._lock = threading.Lock()
        self._e3: tuple[float, tuple[Hit, ...]] | None = None

    # -- reads (hot path) ----------------------------------------------------
    def _exists(self, name: str) -> bool:
        if name in self._known:
            return True
        if self.client.collection_exists(name):
            self._known.add(name)
            return True
        return False

    def embed(self, text: str) -> list[float]:
        vec: list[float] = self.embedder.embed([text])[0].tolist()
        return vec

    def answer(self, query: Query) -> Answer:
        """Candidates for one tier; the core applies the exact rules to them."""
        if query.tier == "e3":
            return Answer("e3", self._e3_rules())
        assert query.text is not None
        if query.tier == "e1":
            if not query.org_id:
                return Answer("e1")
            name = e1_collection(query.org_id)
        else:
            name = e2_collection(query.failure_type)
        if not self._exists(name):
            return Answer(query.tier)
        vec = self.embed(query.text)
        res = self.client.query_points(
            name,
            query=vec,
            limit=query.limit * CANDIDATES_PER_HIT,
            score_threshold=query.min_similarity,
            with_payload=True,
        )
        return Answer(
            query.tier,
            tuple(Hit(str(p.payload["pattern_id"]), float(p.score), p.payload) for p in res.points),
        )

    def cached(self, query: Query) -> Answer | None:
        hits = self._fresh_e3(time.monotonic()) if query.tier == "e3" else None
        return None if hits is None else Answer("e3", hits)

    def _fresh_e3(self, now: float) -> tuple[Hit, ...] | None:
        cached = self._e3
        return cached[1] if cached is not None and now - cached[0] < E3_CACHE_S else None

    def _e3_rules(self) -> tuple[Hit, ...]:
        now = time.monotonic()
        fresh = self._fresh_e3(now)
        if fresh is not None:
            return fresh
        hits: list[Hit] = []
        if self._exists(E3_COLLECTION):
            pts, _ = self.client.scroll(E3_COLLECTION, limit=E3_MAX * CANDIDATES_PER_HIT, with_payload=True)
            hits = [Hit(str(p.payload["pattern_id"]), None, p.payload) for p in pts]
        hits.sort(key=lambda h: h.pattern_id)
        self._e3 = (now, tuple(hits))
        return self._e3[1]

    # -- writes (CLI, seeding) -------------------------------------------------
    def _ensure(self, name: str) -> None:
        if self._exists(name):
            return
        from qdrant_client import models

        with self._lock:
            if self.client.collection_exists(name):
                self._known.add(name)
                return
            self.client.create_collection(
                name,
                vectors_config=models.VectorParams(size=self.embedder.dim, distance=models.Distance.COSINE),
            )
            if self.server_mode:
                for f in ("tier", "org_id", "failure_type", "pattern_id"):
                    self.client.create_payload_index(name, f, field_schema=models.PayloadSchemaType.KEYWORD)
            self._known.add(name)

    def collections(self) -> list[str]:
        return sorted(c.name for c in self.client.get_collections().collections if c.name.startswith(PREFIX))

    def upsert(
        self, patterns: Sequence[Pattern], batch: int = 64, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Idempotent by pattern (an org's E1 pattern by org and id, a shared one by id); a
        shared pattern that changed tier or failure type leaves its old place. Never touches
        another org's patterns: an org's E1 collection is only ever written by its own."""
        from qdrant_client import models

        done = 0
        existing = self.collections()
        for i in range(0, len(patterns), batch):
            chunk = list(patterns[i : i + batch])
            vecs = self.embedder.embed([p.vector_text for p in chunk])
            ids = [pattern_point(p) for p in chunk]
            targets: dict[str, list[models.PointStruct]] = {}
            stale: dict[str, list[str]] = {}
            for p, pid, v in zip(chunk, ids, vecs, strict=True):
                payload = {**p.payload(), "embedder": self.embedder.name}
                places = collections_for(p)
                for name in places:
                    targets.setdefault(name, []).append(
                        models.PointStruct(id=pid, vector=v.tolist(), payload=payload)
                    )
                if p.tier != "e1":  # a shared pattern leaves the shared places it no longer has
                    for name in existing:
                        if not name.startswith(E1_PREFIX) and name not in places:
                            stale.setdefault(name, []).append(pid)
                elif places[0] in existing:  # stored before ids were scoped by org: its id alone
                    stale.setdefault(places[0], []).append(point_id(p.id))
            for name, pids in stale.items():
                self.client.delete(name, points_selector=models.PointIdsList(points=pids))  # type: ignore[arg-type]
            for name, points in targets.items():
                self._ensure(name)
                self.client.upsert(name, points=points)
            existing = sorted(set(existing) | set(targets))
            done += len(chunk)
            if progress:
                progress(done, len(patterns))
        self._e3 = None
        return done

    def delete(self, pattern_ids: Iterable[str], org_id: str | None = None) -> int:
        """Remove shared (E2, E3) patterns by id, or with `org_id` that org's E1 patterns (and
        nothing of any other org); returns how many of the ids were found."""
        from qdrant_client import models

        wanted = list(dict.fromkeys(pattern_ids))
        if org_id is None:
            names = [n for n in self.collections() if not n.startswith(E1_PREFIX)]
            by_point = {point_id(p): p for p in wanted}
        else:
            own = e1_collection(org_id)
            names = [n for n in self.collections() if n == own]
            by_point = {point_id(p, org_id): p for p in wanted}
            by_point.update({point_id(p): p for p in wanted})  # stored before ids were scoped by org
        found: set[str] = set()
        for name in names:
            got = self.client.retrieve(name, ids=list(by_point), with_payload=False)
            if got:
                found.update(by_point[str(p.id)] for p in got)
                self.client.delete(name, points_selector=models.PointIdsList(points=[p.id for p in got]))
        self._e3 = None
        return len(found)

    def iter_patterns(self) -> Iterable[Pattern]:
        """Every pattern once (E2 patterns live in two collections)."""
        for name in self.collections():
            if name.startswith(f"{E2_ALL}_"):
                continue
            offset = None
            while True:
                pts, offset = self.client.scroll(name, limit=256, offset=offset, with_payload=True)
                for p in pts:
                    yield Pattern.from_payload(dict(p.payload))
                if offset is None:
                    break

    def stats(self) -> dict[str, Any]:
        by_tier: dict[str, int] = {}
        by_org: dict[str, int] = {}
        by_type: dict[str, int] = {}
        for p in self.iter_patterns():
            by_tier[p.tier] = by_tier.get(p.tier, 0) + 1
            if p.org_id:
                by_org[p.org_id] = by_org.get(p.org_id, 0) + 1
            if p.tier == "e2":
                key = p.failure_type or "(any)"
                by_type[key] = by_type.get(key, 0) + 1
        return {
            "location": self.location,
            "mode": "server" if self.server_mode else "local",
            "embedder": self.embedder.name,
            "collections": {n: self.client.count(n).count for n in self.collections()},
            "patterns_by_tier": by_tier,
            "e1_patterns_by_org": by_org,
            "e2_patterns_by_failure_type": by_type,
            "failure_types": list(FAILURE_TYPE_VALUES),
        }

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:  # closing a dead server connection must not mask the real error
            log.debug("closing the pattern store failed", exc_info=True)
