"""How the run table stores a run's state: its JSON, compressed with zstd and a dictionary
shipped in the package.

Why a dictionary: the state is written with every step, and a partition sees a few steps a
second, so the producer's batches of the changelog hold one state each: the producer's own
zstd compresses each state alone and keeps ~1/3 of it. What every state shares (field names,
the shapes of the monitors' memories, their common words) is what a trained dictionary holds;
with it one state alone is 1/3.7 to 1/6 of its JSON, where the producer's zstd kept 1/3 to
1/3.4 (BENCHMARKS.md §12). The local store, the changelog and the broker's disk all hold the
smaller bytes, and the producer's codec then has little left to do.

The encoding is told by the first bytes: "{" is plain JSON (every state written before, and
`RB_STATE_CODEC=json`), zstd's frame magic a compressed state, whose frame names its
dictionary. Every dictionary ever shipped stays in `streams/data/state/`, so a state written
by an older release loads in a newer one, and either codec reads both encodings. The
dictionaries are trained on synthetic fleets only (`scripts/train_state_dict.py`), never on
the dev runs whose figures measure them.
"""

from __future__ import annotations

import functools
from importlib.resources import files
from typing import Protocol

import zstandard

from ..settings import StateCodecName

MAGIC = b"\x28\xb5\x2f\xfd"  # a zstd frame
CURRENT_DICT = 1  # the dictionary new states are written with
LEVEL = 3  # zstd's level: against 1, 5-8 % fewer bytes for ~35-40 % more CPU to pack (~35-110 us)
# A stored state larger than this once decompressed is refused (the engine caps a state's
# JSON at `Limits.max_state_bytes`, 64 KB by default; this bounds what a damaged record costs).
MAX_STATE_BYTES = 16 * 1024 * 1024


class StateCodec(Protocol):
    """Table bytes from a state's JSON and back. `unpack` reads every encoding ever written."""

    name: str

    def pack(self, state_json: bytes) -> bytes: ...

    def unpack(self, raw: bytes) -> bytes: ...


def dictionary_path(dict_id: int) -> str:
    return f"data/state/rb-state-{dict_id}.zdict"


@functools.cache
def dictionary(dict_id: int) -> zstandard.ZstdCompressionDict:
    """A shipped dictionary by its id (as a zstd frame names it)."""
    res = files("streams").joinpath(dictionary_path(dict_id))
    if not res.is_file():
        raise ValueError(f"run state compressed with dictionary {dict_id}, which this release does not have")
    d = zstandard.ZstdCompressionDict(res.read_bytes())
    if d.dict_id() != dict_id:
        raise ValueError(f"state dictionary file {dict_id} holds dictionary {d.dict_id()}")
    return d


@functools.cache
def _decompressor(dict_id: int) -> zstandard.ZstdDecompressor:
    return zstandard.ZstdDecompressor(dict_data=dictionary(dict_id) if dict_id else None)


def unpack(raw: bytes) -> bytes:
    """A state's JSON from its table bytes, in any encoding written (ValueError when neither)."""
    return _unpack(raw, b"{")


def unpack_part(raw: bytes) -> bytes:
    """A part's JSON (`state_parts`: an object or a list) from its table bytes."""
    return _unpack(raw, b"{[")


def _unpack(raw: bytes, first: bytes) -> bytes:
    if raw[:1] and raw[:1] in first:
        return raw
    if raw[:4] != MAGIC:
        raise ValueError(f"run state in an unknown encoding (first byte {raw[:1]!r})")
    try:
        frame = zstandard.get_frame_parameters(raw)
    except zstandard.ZstdError as exc:
        raise ValueError(f"run state: damaged zstd frame ({exc})") from None
    size = frame.content_size
    if size == zstandard.CONTENTSIZE_UNKNOWN or size > MAX_STATE_BYTES:
        raise ValueError(f"run state: zstd frame of {size} bytes (at most {MAX_STATE_BYTES})")
    try:
        out = _decompressor(frame.dict_id).decompress(raw)
    except zstandard.ZstdError as exc:
        raise ValueError(f"run state: damaged zstd frame ({exc})") from None
    if not out[:1] or out[:1] not in first:
        raise ValueError("run state: a zstd frame that holds no state")
    return out


class ZstdStateCodec:
    """States written compressed with the current dictionary (the default)."""

    name = "zstd"

    def __init__(self, dict_id: int = CURRENT_DICT, level: int = LEVEL) -> None:
        self.dict_id = dict_id
        d = dictionary(dict_id)
        d.precompute_compress(level=level)  # once: each compress then skips loading the dictionary
        self._compressor = zstandard.ZstdCompressor(
            level=level, dict_data=d, write_checksum=False, write_content_size=True, write_dict_id=True
        )

    def pack(self, state_json: bytes) -> bytes:
        return self._compressor.compress(state_json)

    def unpack(self, raw: bytes) -> bytes:
        return unpack(raw)


class JsonStateCodec:
    """States written as their JSON (`RB_STATE_CODEC=json`: to read the table by eye, or to
    measure the codec); compressed ones written before still load."""

    name = "json"

    def pack(self, state_json: bytes) -> bytes:
        return state_json

    def unpack(self, raw: bytes) -> bytes:
        return unpack(raw)


def state_codec(name: StateCodecName = "zstd") -> StateCodec:
    if name == "json":
        return JsonStateCodec()
    return ZstdStateCodec()
