"""`rb-streams worker`: run the Faust worker (one per data dir, its web port checked first)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import IO

from ..kafka.security import unreachable
from .common import UserError, _fail, _settings, _stop_on_sigterm


def cmd_worker(args: argparse.Namespace) -> int:
    import faust

    from ..admin.topics import ensure_topics
    from ..embeddings.process import kill_all
    from ..plugins import load_policy
    from ..worker.assemble import assemble

    _stop_on_sigterm()  # until Faust handles it: a stop during start-up unwinds (issue 48)
    s = _settings(args)
    s.check_web_exposure()  # before the broker is asked anything
    s.check_decision_key()  # multi-tenant mode signs its decisions
    policy = load_policy(s)  # a bad plugin stops the worker here, before it joins the group
    s.data_path.mkdir(parents=True, exist_ok=True)
    lock = _lock_data_dir(s.data_path)  # held (open) for the worker's lifetime
    _check_web_port(s.web_host, s.web_port)
    if (why := unreachable(s)) is not None:
        return _fail(why, 1)
    # the app id is this prefix's, or the worker refuses it (streams.admin.ownership). asyncio.run,
    # not a bare loop: a stop mid-call (SIGTERM raises SystemExit in it) cancels the call and lets
    # its clients close before the loop does, where a closed loop left their tasks to die noisily.
    counts = asyncio.run(ensure_topics(s, claim=True))
    asyncio.set_event_loop(asyncio.new_event_loop())
    try:
        w = assemble(s, counts[s.steering_topic], policy)
        worker = faust.Worker(w.app, loglevel=s.log_level, quiet=True)
        # Faust's terminal spinner hooks the root logger at DEBUG so it can spin on every record,
        # which makes every library debug() call format a record: ~10% of the hot path.
        worker.spinner = None
        worker.execute_from_commandline()
    finally:  # however the worker ends (a signal while the child loads the model, too): no child left
        kill_all()
    lock.close()
    return 0


def _lock_data_dir(path: Path) -> IO[bytes]:
    """An exclusive lock on the worker's data directory, or UserError: a second worker on the
    same directory would otherwise wait on the tables' locks for 30 s and die with a long log."""
    import fcntl

    fh = open(path / ".worker.lock", "ab")  # noqa: SIM115 (held until the worker exits)
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        raise UserError(
            f"the data directory {path} is in use by another worker: give each worker on this "
            "machine its own RB_DATA_DIR (and RB_WEB_PORT); see docs/production.md"
        ) from None
    return fh


def _check_web_port(host: str, port: int) -> None:
    """UserError when another process listens on the worker's web port: found out after the
    worker has joined the group, it is a ~60-line OSError traceback from the web server."""
    import socket

    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError:
        return  # an address that does not resolve: the web server says so
    family, kind, proto, _, addr = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the web server binds
        try:
            probe.bind(addr)
        except OSError as exc:
            raise UserError(
                f"the web port {host}:{port} (RB_WEB_PORT) is in use by another process ({exc.strerror}): "
                "give each worker on this machine its own RB_WEB_PORT (and RB_DATA_DIR)"
            ) from None
