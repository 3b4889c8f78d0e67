"""A run's state stored as several table entries: the run's record and the parts it names.

Why: every step writes the run's record to the changelog, and two things in it barely change
from one step to the next. The run's config (its task text among it) is fixed at run_start;
the loop monitor's window gains one entry a step, and each entry stays as written until it
slides out. Together they are about a quarter of a compressed OpenHands state. Stored apart,
a step writes the run's record, and every CHUNK steps a chunk of the window's entries and a
tombstone for the chunk that left (BENCHMARKS.md §12).

Layout. The run's record is the state's JSON with `config` replaced by its part's name (a
string; a state stored whole has an object there, and loads as before) and the loop window by
[entries of the first chunk that have left, the chunks' names..., the newest entries]. A name
is a tag (`c`: the config, `w`: a chunk of window entries) and the hex of 8 bytes of the
blake2b of the part's JSON. A part's key is the run's key, 0xff (a byte UTF-8 never holds, so
no run's key is a part's), the tag and those 8 bytes.

Crash safety. A part is named by its content, so no write ever changes a part a record names.
Within a partition the changelog keeps the order of writes: a step's new parts, then the
run's record, then tombstones for the parts it no longer names. A record is therefore never
read back without its parts, and a crash leaves at most parts that no record names; the table
removes them (`run_table.RunTable`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

import orjson

from ..core.evolve import non_default
from ..core.state import RunConfig, TraceState

SEP = b"\xff"  # between a run's key and a part's tag: never in a UTF-8 run id
CONFIG = "c"
ENTRY = "w"
HASH_BYTES = 8
NAME_CHARS = 1 + 2 * HASH_BYTES

# The names and JSON of the configs and window entries split lately, by identity (`_kept`).
_KEPT = 8192
_entry_cache: dict[int, tuple[Any, str, bytes]] = {}
_config_cache: dict[int, tuple[Any, str, bytes]] = {}
# Where the loop monitor's window begins in a state's JSON: the monitors' memories are written
# loop first (`monitors.suite.STORED_ORDER`); a key's quotes are never unescaped in a string.
_WINDOW_AT = b'"monitors":{"loop":{"window":'


# A sealed chunk of the window: its part's name and the names of its entries, in order.
Chunk = tuple[str, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class Split:
    """A state as the table stores it: the run's record, the parts made for it (name -> JSON:
    its config and the window's chunks sealed now), and every chunk the record names (what the
    run's next split starts from)."""

    record: bytes
    parts: dict[str, bytes]
    chunks: tuple[Chunk, ...] = ()


def is_part(key: bytes) -> bool:
    return SEP in key


def run_key_of(part_key: bytes) -> bytes:
    """The key of the run a part belongs to."""
    return part_key[: part_key.index(SEP)]


def part_key(run_key: bytes, name: str) -> bytes:
    """A part's table key, from its run's key and a name read from a record (ValueError for a
    name no split makes: the record is damaged)."""
    if type(name) is not str or len(name) != NAME_CHARS or name[0] not in (CONFIG, ENTRY):
        raise ValueError(f"run state names a part {str(name)[:40]!r}, which is no part's name")
    try:
        return key_of(run_key, name)
    except ValueError:
        raise ValueError(f"run state names a part {name!r}, which is no part's name") from None


def key_of(run_key: bytes, name: str) -> bytes:
    """A part's table key from a name `split` made."""
    return run_key + SEP + _TAGS[name[0]] + bytes.fromhex(name[1:])


_TAGS = {CONFIG: CONFIG.encode(), ENTRY: ENTRY.encode()}


def _name(tag: str, raw: bytes) -> str:
    return tag + hashlib.blake2b(raw, digest_size=HASH_BYTES).hexdigest()


def _kept(
    cache: dict[int, tuple[Any, str, bytes]], tag: str, obj: Any, make: Callable[[Any], bytes]
) -> tuple[str, bytes]:
    """`obj`'s part name and JSON, made once while `obj` lives: a run's next state holds the
    same config and entry objects (`evolve`), so they are encoded and hashed once, not once a
    step. `make` gives the JSON."""
    kept = cache.get(id(obj))
    if kept is not None and kept[0] is obj:
        return kept[1], kept[2]
    raw = make(obj)
    name = _name(tag, raw)
    if len(cache) >= _KEPT:
        cache.pop(next(iter(cache)))  # the oldest
    cache[id(obj)] = (obj, name, raw)
    return name, raw


def _entry(e: list[Any]) -> tuple[str, bytes]:
    return _kept(_entry_cache, ENTRY, e, orjson.dumps)


def _config(cfg: RunConfig) -> tuple[str, bytes]:
    """The config's name and JSON, as `TraceState.compact` writes it."""
    return _kept(_config_cache, CONFIG, cfg, lambda c: orjson.dumps(non_default(c)))


def _as_dict(memory: Any) -> dict[str, Any] | None:
    """A monitor's memory as the JSON object the state writes for it (a dataclass, as orjson
    writes it: every field in order; or the dict it was stored as)."""
    if type(memory) is dict:
        return dict(memory)
    if is_dataclass(memory) and not isinstance(memory, type):
        return {f.name: getattr(memory, f.name) for f in fields(memory)}
    return None


def _window_of(st: TraceState) -> list[Any] | None:
    loop = st.monitors.get("loop")
    if loop is None:
        return None
    w = loop.get("window") if type(loop) is dict else getattr(loop, "window", None)
    return w if type(w) is list and w and all(type(e) is list for e in w) else None


def split(st: TraceState, wire: bytes | None = None, prior: tuple[Chunk, ...] = ()) -> Split:
    """The run's record and parts for `st`; `join` of them gives `st.encode()`'s object.

    The loop window goes in chunks of CHUNK entries, each a part, sealed once full; the newest
    entries (fewer than CHUNK) stay in the record. `prior`: the chunks the run's last record
    named: those still in the window are named again (the oldest with the count of its
    entries that have left), so a step writes a chunk every CHUNK steps and removes one as
    often. Without them (a run's first write since a recovery) the window is chunked anew.
    `wire`: `st.encode()` when the caller has it; the record is then cut from it (no second
    encoding of the state), else, or if it is not laid out as expected, made anew."""
    cname, cfg = _config(st.config)
    window = _window_of(st)
    parts = {cname: cfg}
    entries = [_entry(e) for e in window] if window else []
    chunks, skip, inline, sealed = _chunked(entries, prior)
    parts.update(sealed)
    refs: list[Any] = [skip, *(n for n, _ in chunks)] if chunks else []
    if wire is not None:
        record = _cut(st, wire, cname, cfg, entries, refs, inline)
        if record is not None:
            return Split(record, parts, chunks)
    d = st.compact()
    d["config"] = cname
    mon = d.get("monitors")
    if chunks and mon:
        loop = _as_dict(mon.get("loop"))
        if loop is not None:
            loop["window"] = [*refs, *window[len(entries) - inline :]] if window else refs
            d["monitors"] = {**mon, "loop": loop}
    return Split(orjson.dumps(d), parts, chunks)


CHUNK = 4  # window entries a chunk: a part written, and one removed, every CHUNK steps


def _chunked(
    entries: list[tuple[str, bytes]], prior: tuple[Chunk, ...]
) -> tuple[tuple[Chunk, ...], int, int, dict[str, bytes]]:
    """The window's chunks (the prior ones it still holds, then any it has filled), how many
    entries of the first have left, how many newest entries stay in the record, and the
    chunks sealed now (name -> JSON: the parts to write)."""
    names = [n for n, _ in entries]
    kept: list[Chunk] = []
    at, skip = 0, 0
    for chunk in prior:
        ents = chunk[1]
        if at == 0 and not kept:
            try:
                p = ents.index(names[0]) if names else -1
            except ValueError:
                continue  # every entry of it has left the window
            if p < 0 or tuple(names[: len(ents) - p]) != ents[p:]:
                break
            kept.append(chunk)
            at, skip = len(ents) - p, p
            continue
        if tuple(names[at : at + len(ents)]) != ents:
            break
        kept.append(chunk)
        at += len(ents)
    sealed: dict[str, bytes] = {}
    while len(names) - at >= CHUNK:
        group = entries[at : at + CHUNK]
        raw = b"[" + b",".join(r for _, r in group) + b"]"
        name = _name(ENTRY, raw)
        sealed[name] = raw
        kept.append((name, tuple(n for n, _ in group)))
        at += CHUNK
    return tuple(kept), skip, len(names) - at, sealed


def _cut(
    st: TraceState,
    wire: bytes,
    cname: str,
    cfg: bytes,
    entries: list[tuple[str, bytes]],
    refs: list[Any],
    inline: int,
) -> bytes | None:
    """The record made from the state's own JSON: its config and the window's chunked entries
    replaced by their names, each checked to be exactly where and what the encoding puts
    (None: not)."""
    head = b'{"run_id":' + orjson.dumps(st.run_id) + b',"config":'
    at = len(head)
    if not wire.startswith(head) or wire[at : at + len(cfg)] != cfg:
        return None
    rest = at + len(cfg)
    out = head + orjson.dumps(cname)
    if not refs:
        return out + wire[rest:]
    i = wire.find(_WINDOW_AT, rest)
    if i < 0:
        return None
    j = i + len(_WINDOW_AT)
    window = b"[" + b",".join(raw for _, raw in entries) + b"]"
    if wire[j : j + len(window)] != window:
        return None
    kept = [raw for _, raw in entries[len(entries) - inline :]] if inline else []
    new = b"[" + b",".join([orjson.dumps(r) for r in refs] + kept) + b"]"
    return out + wire[rest:j] + new + wire[j + len(window) :]


def names(d: dict[str, Any]) -> list[str]:
    """The parts a decoded run record names (none for a state stored whole)."""
    cfg = d.get("config")
    if type(cfg) is not str:
        return []
    out = [cfg]
    window = _window(d)
    if window and type(window[0]) is int:
        out.extend(n for n in window[1:] if type(n) is str)
    return out


def _window(d: dict[str, Any]) -> Any:
    mon = d.get("monitors")
    loop = mon.get("loop") if type(mon) is dict else None
    return loop.get("window") if type(loop) is dict else None


def join(d: dict[str, Any], read: Callable[[str], bytes]) -> dict[str, Any]:
    """A decoded run record with the parts it names put back (`read`: a part's JSON by its
    name; it raises ValueError for a part the table does not hold). A state stored whole is
    returned as it is."""
    cfg = d.get("config")
    if type(cfg) is dict:
        return d
    if type(cfg) is not str:
        raise ValueError(
            f"run state: its config is a {type(cfg).__name__}, neither an object nor a part's name"
        )
    d["config"] = orjson.loads(read(cfg))
    window = _window(d)
    if window and type(window[0]) is int:
        entries: list[Any] = []
        for item in window[1:]:
            if type(item) is str:
                chunk = orjson.loads(read(item))
                if type(chunk) is not list:
                    raise ValueError(f"run state: part {item} holds no window entries")
                entries.extend(chunk)
            else:
                entries.append(item)
        skip = window[0]
        if not 0 <= skip <= len(entries):
            raise ValueError(f"run state: its window skips {skip} of {len(entries)} entries")
        d["monitors"]["loop"]["window"] = entries[skip:]
    return d
