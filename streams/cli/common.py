"""What the commands share: settings from flags and the environment, one-line user errors, progress
bars, JSON output, the dead-letter lines of `replay` and `cost`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from ..kafka.client_settings import SettingsError
from ..settings import Settings
from ..shared.logsafe import safe_for_log

# Settings that are never flags: secrets, and what `replay` does not use.
# Secrets never go on a command line; the experiment settings are JSON (env only: RB_EXPERIMENT,
# RB_ORG_EXPERIMENT), and `demo`/`simulate --experiment` is the simulator's switch.
_NO_FLAG = set(Settings.SECRETS) | {"experiment", "org_experiment"}


# what streams.pipeline adds to an unknown_run detail when the run's run_start was refused
REFUSED_START_MARK = "its run_start was refused ("  # set to show tracebacks of internal errors


class UserError(Exception):
    """One line for the user; `code` 2 for usage, 1 for failure."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def _add_settings_flags(p: argparse.ArgumentParser, only: Sequence[str] | None = None) -> None:
    names = only if only is not None else Settings.field_names()
    for name in names:
        if name in _NO_FLAG:
            continue
        p.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            default=None,
            type=_flag_type(name),
            help=f"(env {Settings.env_name(name)}, default {Settings.default(name)!r})",
        )


def _flag_type(name: str) -> Any:
    def parse(raw: str) -> Any:
        try:
            return Settings.parse_value(name, raw)
        except SettingsError as exc:
            # argparse names the flag ("argument --partitions: ..."): the variable is not in play
            raise argparse.ArgumentTypeError(exc.detail) from None

    return parse


def _settings(args: argparse.Namespace) -> Settings:
    given = {n: getattr(args, n, None) for n in Settings.field_names() if n not in _NO_FLAG}
    try:
        return Settings.from_env(**given)
    except SettingsError as exc:
        # a value the user typed as a flag is named as typed, one from the environment by its variable
        if exc.field is not None and given.get(exc.field) is not None:
            raise exc.named_as("--" + exc.field.replace("_", "-")) from None
        raise


def _progress(total: int | None, desc: str, unit: str) -> Any:
    """A progress bar on stderr, only when stderr is a terminal."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=None, file=sys.stderr, leave=False)


class _Bar:
    """A `progress(done, total)` callback drawing a bar (made on the first call, when the
    total is known)."""

    def __init__(self, desc: str, unit: str) -> None:
        self.desc, self.unit = desc, unit
        self.bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = _progress(total, self.desc, self.unit)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _stop_on_sigterm() -> None:
    """SIGTERM before Faust installs its handlers (while the models load and the embedding
    child starts, ~10 s) raises SystemExit(143), as SIGINT raises KeyboardInterrupt: the
    start-up unwinds and its `finally` kills the child. The default action ended the process
    on the spot, and a child caught loading the model outlived it (issue 48)."""
    import signal

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


class _DeadLetterLines:
    """`replay`'s refused lines on stderr, each with its line number and reason (the first
    `shown`, then a count): "1 dead-letters" alone does not say which line or why."""

    def __init__(self, name: str, shown: int = 20, command: str = "replay") -> None:
        self.name = "<stdin>" if name == "-" else name
        self.command = command
        self.shown = shown
        self.seen = 0
        self.printed = 0
        # run id -> [first line, count] of its later events refused because its run_start was
        # (streams.pipeline): one line per run at the end, not one per event
        self.after_refused_start: dict[str, list[int]] = {}

    def __call__(self, lineno: int, record: dict[str, Any]) -> None:
        self.seen += 1
        run_id = record.get("run_id")
        if record.get("reason") == "unknown_run" and REFUSED_START_MARK in str(record.get("detail")):
            self.after_refused_start.setdefault(str(run_id), [lineno, 0])[1] += 1
            return
        self.printed += 1
        if self.printed <= self.shown:
            detail = safe_for_log(str(record.get("detail") or ""), 200)  # the file's own text
            where = f"{self.name}:{lineno}"
            print(
                f"{self.command}: {where}: {record.get('reason')}" + (f": {detail}" if detail else ""),
                file=sys.stderr,
            )
        elif self.printed == self.shown + 1:
            if self.command == "replay":
                rest = "further dead-lettered lines not shown; --deadletter FILE keeps them all"
            else:
                rest = "further invalid lines not shown"
            print(f"{self.command}: ({rest})", file=sys.stderr)

    def finish(self) -> None:
        """One line per run whose later events were refused for its refused run_start."""
        for n, (run_id, (first, count)) in enumerate(self.after_refused_start.items()):
            if n == self.shown:
                print(
                    f"{self.command}: (and {len(self.after_refused_start) - n} more such runs)",
                    file=sys.stderr,
                )
                break
            print(
                f"{self.command}: {self.name}:{first}: unknown_run: {count} later events of run "
                f"{safe_for_log(run_id, 100)!r} (from this line on), dead-lettered because its run_start was refused",
                file=sys.stderr,
            )


def _print_json(data: Any) -> None:
    from ..kafka import wire

    sys.stdout.buffer.write(wire.dumps(data) + b"\n")


def _fail(message: str, code: int) -> int:
    print(f"rb-streams: {message}", file=sys.stderr)
    return code


def _alpha(raw: str) -> float:
    try:
        x = float(raw)
    except ValueError:
        x = 0.0
    if not 0 < x < 1:
        raise argparse.ArgumentTypeError(f"expected a level between 0 and 1, got {raw!r}")
    return x


def _non_negative_int(raw: str) -> int:
    try:
        n = int(raw)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {raw!r}")
    return n


def _positive_float(raw: str) -> float:
    try:
        x = float(raw)
    except ValueError:
        x = 0.0
    if not 0 < x < 1e6:
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {raw!r}")
    return x


def _positive_int(raw: str) -> int:
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {raw!r}")
    return n
