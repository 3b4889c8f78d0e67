"""Read the user's price table (`RB_PRICES_FILE`, TOML or JSON) into the core's `PriceTable`.

The file's format is in deploy/prices.example.toml. Every error is one line naming the file
and the entry (the CLI prints it and exits 2), never a traceback.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from .core.prices import PriceError, PriceTable, parse_prices

MAX_FILE_BYTES = 1 << 20


class PriceFileError(ValueError):
    """The price table file cannot be read or used (one line)."""


def load_prices(path: str | Path) -> PriceTable:
    """The table in `path`: `.json` is read as JSON, anything else as TOML."""
    p = Path(path)
    try:
        if not p.is_file():
            raise PriceFileError(f"price table {str(p)!r}: not a file")
        if p.stat().st_size > MAX_FILE_BYTES:
            raise PriceFileError(f"price table {str(p)!r}: larger than {MAX_FILE_BYTES} bytes")
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise PriceFileError(f"price table {str(p)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise PriceFileError(f"price table {str(p)!r}: not UTF-8 text") from None
    try:
        raw = json.loads(text) if p.suffix.lower() == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        kind = "JSON" if p.suffix.lower() == ".json" else "TOML"
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PriceFileError(f"price table {str(p)!r}: not valid {kind} ({first})"[:400]) from None
    try:
        return parse_prices(raw)
    except PriceError as exc:
        raise PriceFileError(f"price table {str(p)!r}: {exc}") from None
