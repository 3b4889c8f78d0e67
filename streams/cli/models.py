"""`rb-streams models build`: the embedding model artifacts the monitors use."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from .common import UserError, _Bar


def cmd_models(args: argparse.Namespace) -> int:

    from ..embeddings.model_build import STATIC_MODEL_NAME, build_static_model
    from ..embeddings.paths import ModelNotAvailable, default_models_dir

    out = Path(args.out) if args.out else default_models_dir() / STATIC_MODEL_NAME
    try:
        with contextlib.closing(_Bar("models: distilling", " tokens")) as bar:
            r = build_static_model(out, force=args.force, progress=bar)
    except ModelNotAvailable as exc:
        raise UserError(str(exc), 2) from None
    if r.built:
        print(
            f"models: built {r.path} ({r.tokens} tokens x {r.dim} dims, "
            f"explained variance {r.explained_variance_ratio:.3f}) in {r.seconds:.1f}s",
            file=sys.stderr,
        )
    else:
        print(f"models: {r.path} is up to date", file=sys.stderr)
    return 0
