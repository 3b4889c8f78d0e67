"""The command line: a user's mistake gets one line and an exit code, never a traceback."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from streams import __version__
from streams.cli.main import build_parser, main
from streams.plugins import SCORERS, TRANSITIONS
from tests.factories import b, run_start, step
from tests.plugin_dist import CONSTANT_DIFFICULTY, write_dist


def one_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_version_prints_and_exits_0() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "streams", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0 and out.stdout.strip() == f"rb-streams {__version__}"


def test_replay_of_a_missing_file_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "/nonexistent.jsonl"]) == 1
    assert one_line(capsys.readouterr().err) == "rb-streams: /nonexistent.jsonl: No such file or directory"


def test_patterns_load_of_a_missing_file_is_one_line_and_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["patterns", "load", "/nonexistent.jsonl", "--data-dir", str(tmp_path)]) == 1
    assert one_line(capsys.readouterr().err) == "rb-streams: /nonexistent.jsonl: no such file"


def test_kafka_status_without_a_broker_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "streams", "kafka", "status", "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stdout.strip() == "not running"


@pytest.mark.parametrize("command", ["worker", "simulate"])
def test_a_command_with_no_broker_to_reach_is_one_line_and_exit_1_within_seconds(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RB_BROKER", f"127.0.0.1:{free_port()}")  # nothing listens there
    monkeypatch.setenv("RB_DATA_DIR", str(tmp_path))
    t0 = time.monotonic()
    assert main([command]) == 1
    assert time.monotonic() - t0 < 15
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot reach the broker at 127.0.0.1:" in err[0] and "RB_BROKER" in err[0]


def test_a_multi_tenant_worker_without_a_decision_key_refuses_to_start_with_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Its tenants' steering topics would trust whoever can write them (docs/production.md)."""
    monkeypatch.setenv("RB_BROKER", f"127.0.0.1:{free_port()}")
    monkeypatch.setenv("RB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("RB_TENANTS", "acme")
    monkeypatch.setenv("RB_CONTROL_KEY", "k")
    assert main(["worker"]) == 2  # before the broker is asked anything
    line = one_line(capsys.readouterr().err)
    assert line.startswith("rb-streams: invalid configuration: RB_DECISION_KEY: required with RB_TENANTS")


def test_a_worker_with_an_absurd_price_refuses_to_start_with_one_line_naming_file_model_and_field(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 48: a price of 1e300 was accepted, and poisoned every routed run."""
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."claude-x"]\ninput = 3\noutput = 1e300\n')
    monkeypatch.setenv("RB_BROKER", f"127.0.0.1:{free_port()}")
    monkeypatch.setenv("RB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("RB_PRICES_FILE", str(prices))
    assert main(["worker"]) == 2  # before the broker is asked anything
    line = one_line(capsys.readouterr().err)
    assert line.startswith("rb-streams: invalid configuration: RB_PRICES_FILE: ")
    assert f"{str(prices)!r}: models.'claude-x'.output: 1e+300 is above the ceiling" in line


@pytest.mark.parametrize("broker", ["bad:value", "localhost"])
def test_a_broker_that_is_no_host_port_is_one_line_and_exit_2(
    broker: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RB_BROKER", broker)
    assert main(["config"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "RB_BROKER" in err[0] and "expected host:port" in err[0]


def test_a_replay_whose_every_line_is_invalid_fails(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_text("{broken\nnot json either\n")
    assert main(["replay", str(src), "-o", str(tmp_path / "out.jsonl")]) == 1
    assert "0 decisions, 2 dead-letters" in capsys.readouterr().err


def test_replay_strict_fails_on_any_dead_letter(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "mixed.jsonl"
    src.write_bytes(b(run_start("r")) + b"\n" + b(step("r", 1)) + b"\n{broken\n")
    out = str(tmp_path / "out.jsonl")
    assert main(["replay", str(src), "-o", out]) == 0
    assert main(["replay", str(src), "-o", out, "--strict", "--json"]) == 1
    assert orjson.loads(capsys.readouterr().err.splitlines()[-1]) == {"decisions": 2, "deadletters": 1}


def test_a_bad_setting_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RB_PARTITIONS", "many")
    assert main(["config"]) == 2
    assert one_line(capsys.readouterr().err).startswith(
        "rb-streams: invalid configuration: RB_PARTITIONS: 'many'"
    )


def test_a_bad_flag_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as e:
        main(["config", "--partitions", "three"])
    assert e.value.code == 2


def test_secrets_are_not_flags() -> None:
    for argv in (
        ["config", "--sasl-password", "x"],
        ["worker", "--web-token", "x"],
        ["config", "--control-key", "k"],
    ):
        with pytest.raises(SystemExit) as e:
            build_parser().parse_args(argv)
        assert e.value.code == 2


def test_pattern_commands_are_subcommands_with_only_their_own_flags() -> None:
    p = build_parser()
    assert p.parse_args(["patterns", "list", "--tier", "e2", "--json"]).tier == "e2"
    assert p.parse_args(["patterns", "delete", "a", "b"]).ids == ["a", "b"]
    for argv in (["patterns", "stats", "--partitions", "3"], ["patterns", "list", "x"]):
        with pytest.raises(SystemExit) as e:
            p.parse_args(argv)
        assert e.value.code == 2


def test_config_prints_json_with_secrets_masked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RB_WEB_TOKEN", "hunter2")
    assert main(["config", "--json", "--partitions", "3"]) == 0
    shown = orjson.loads(capsys.readouterr().out)
    assert shown["partitions"] == 3 and shown["web_token"] == "****"
    assert main(["config"]) == 0
    text = capsys.readouterr().out
    assert "RB_PARTITIONS" in text and "hunter2" not in text


def test_an_internal_error_is_one_line_unless_debugging(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import streams.cli.main as cli

    def broken(args: object) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(cli, "cmd_config", broken)
    monkeypatch.delenv("RB_DEBUG", raising=False)
    assert main(["config"]) == 1
    assert (
        one_line(capsys.readouterr().err)
        == "rb-streams: internal error: RuntimeError: boom (set RB_DEBUG=1 for the traceback)"
    )


@pytest.mark.parametrize(
    ("content", "says"),
    [(b"", "is empty"), (b"\xff\xfe\x00\x81", "is not UTF-8 text"), (None, "is not a regular file")],
)
def test_a_bad_secret_file_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    content: bytes | None,
    says: str,
) -> None:
    secret = tmp_path / "token"
    if content is None:
        secret.mkdir()
    else:
        secret.write_bytes(content)
    monkeypatch.setenv("RB_WEB_TOKEN_FILE", str(secret))
    assert main(["config"]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"rb-streams: invalid configuration: RB_WEB_TOKEN_FILE: '{secret}' {says}")


def test_a_missing_secrets_directory_is_one_line_and_exit_2_in_a_real_process(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "RB_SECRETS_DIR": str(tmp_path / "unmounted")}
    proc = subprocess.run(
        [sys.executable, "-m", "streams", "config"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert one_line(proc.stderr) == (
        f"rb-streams: invalid configuration: RB_SECRETS_DIR: '{tmp_path / 'unmounted'}' does not exist"
    )


def test_a_binary_secret_is_one_line_and_exit_2_in_a_real_process(tmp_path: Path) -> None:
    import os

    secret = tmp_path / "control.key"
    secret.write_bytes(b"\x00\xff\xfe binary")
    env = {**os.environ, "RB_CONTROL_KEY_FILE": str(secret)}
    proc = subprocess.run(
        [sys.executable, "-m", "streams", "config"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert proc.returncode == 2
    line = one_line(proc.stderr)
    assert line.endswith("RB_CONTROL_KEY_FILE: " + repr(str(secret)) + " is not UTF-8 text")
    assert "internal error" not in line and "UnicodeDecodeError" not in line


def test_a_worker_on_a_public_address_without_a_token_refuses_before_asking_the_broker(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The broker named here does not exist: the refusal comes first, in one line.
    monkeypatch.setenv("RB_WEB_HOST", "0.0.0.0")
    monkeypatch.delenv("RB_WEB_TOKEN", raising=False)
    args = ["worker", "--broker", f"kafka://127.0.0.1:{free_port()}", "--data-dir", str(tmp_path)]
    assert main(args) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith("rb-streams: invalid configuration: RB_WEB_HOST: '0.0.0.0' is reachable")
    assert "RB_WEB_ALLOW_ANONYMOUS=true" in line


def test_replay_with_a_tenant_applies_the_tenant_rule(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(
        b'{"type":"run_start","schema_version":1,"run_id":"a"}\n'
        b'{"type":"run_start","schema_version":1,"run_id":"b","org_id":"globex"}\n'
    )
    dl = tmp_path / "dl.jsonl"
    assert (
        main(
            [
                "replay",
                str(src),
                "-o",
                str(tmp_path / "out.jsonl"),
                "--deadletter",
                str(dl),
                "--tenant",
                "acme",
            ]
        )
        == 0
    )
    assert [json.loads(x)["reason"] for x in dl.read_text().splitlines()] == ["org_mismatch"]
    with pytest.raises(SystemExit) as e:
        main(["replay", str(src), "--tenant", "a.b"])
    assert e.value.code == 2
    assert "is not a tenant name" in capsys.readouterr().err


def test_a_worker_with_a_broken_plugin_refuses_to_start_with_one_line_naming_it(tmp_path: Path) -> None:
    """Before it asks the broker anything (none listens on the configured port)."""
    site = tmp_path / "site"
    write_dist(
        site, {SCORERS: {"gpu_scorer": "constant"}}, module="raise ImportError('no module named torch')\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("RB_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH")) if p)
    env["RB_BROKER"] = f"kafka://127.0.0.1:{free_port()}"
    env["RB_DATA_DIR"] = str(tmp_path / "data")
    proc = subprocess.run(
        [sys.executable, "-m", "streams", "worker"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    line = one_line(proc.stderr)
    assert line.startswith("rb-streams: invalid configuration: plugin 'gpu_scorer' in rb_streams.scorers (")
    assert line.endswith("failed to load: ImportError: no module named torch")


def test_replay_scores_with_an_installed_plugin_and_refuses_a_bad_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    monkeypatch.syspath_prepend(str(site))
    write_dist(site, {SCORERS: {"constant": "constant"}})
    src = tmp_path / "events.jsonl"
    src.write_bytes(b(run_start("r", scorer="constant")) + b"\n" + b(step("r", 1)) + b"\n")
    out = tmp_path / "out.jsonl"
    assert main(["replay", str(src), "-o", str(out), "--strict"]) == 0
    decisions = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert decisions[1]["difficulty"] == CONSTANT_DIFFICULTY and decisions[1]["difficulty_source"] == "scorer"
    capsys.readouterr()
    write_dist(site, {TRANSITIONS: {"nothing": "NOT_A_FUNCTION"}})
    assert main(["replay", str(src), "-o", str(out)]) == 2
    assert "plugin 'nothing' in rb_streams.transitions" in one_line(capsys.readouterr().err)


def test_plugins_lists_what_runs_may_name_and_where_it_comes_from(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    monkeypatch.syspath_prepend(str(site))
    mod = write_dist(site, {SCORERS: {"constant": "constant"}})
    profiles = tmp_path / "profiles.toml"
    profiles.write_text("[docs_writer]\nlate_sprawl = 0.3\n")
    assert main(["plugins", "--json", "--monitor-profiles", str(profiles)]) == 0
    rows = {(r["kind"], r["name"]): r["origin"] for r in json.loads(capsys.readouterr().out)}
    assert rows[("scorer", "constant")] == f"{mod} 1.0, {mod}:constant"
    assert rows[("scorer", "trajectory")] == rows[("transition", "default")] == "built in"
    assert rows[("profile", "docs_writer")] == str(profiles)
    assert {name for kind, name in rows if kind == "profile"} == {"coding", "pr_review", "qa", "docs_writer"}


def test_a_worker_on_a_data_directory_in_use_is_one_line_and_exit_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import fcntl

    monkeypatch.setenv("RB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("RB_BROKER", f"127.0.0.1:{free_port()}")
    with open(tmp_path / ".worker.lock", "ab") as held:  # what a running worker holds
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        t0 = time.monotonic()
        assert main(["worker"]) == 1
        assert time.monotonic() - t0 < 3  # before the broker is even tried
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"the data directory {tmp_path} is in use by another worker" in err[0]
    assert "RB_DATA_DIR" in err[0]


# -- issue 40, item 5: the first hour's small mistakes ----------------------------------------


def test_a_broker_with_another_scheme_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RB_BROKER", "ftp://x:1")
    assert main(["config"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "RB_BROKER" in line and "kafka://" in line


def test_the_unreachable_broker_hint_names_a_command_every_install_has(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    port = free_port()
    monkeypatch.setenv("RB_BROKER", f"127.0.0.1:{port}")
    assert main(["simulate"]) == 1
    line = one_line(capsys.readouterr().err)
    assert f"`rb-streams kafka start --port {port}`" in line and "make" not in line


def test_a_second_worker_on_the_same_web_port_is_one_line_and_exit_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with socket.socket() as taken:  # what the first worker's web server holds
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv("RB_DATA_DIR", str(tmp_path))  # its own data directory
        monkeypatch.setenv("RB_WEB_PORT", str(port))
        monkeypatch.setenv("RB_BROKER", f"127.0.0.1:{free_port()}")
        t0 = time.monotonic()
        assert main(["worker"]) == 1
        assert time.monotonic() - t0 < 3  # before the broker is tried
    line = one_line(capsys.readouterr().err)
    assert f"the web port 127.0.0.1:{port} (RB_WEB_PORT) is in use by another process" in line


def test_replay_names_each_malformed_line_by_number_and_reason(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src = tmp_path / "mixed.jsonl"
    src.write_bytes(b(run_start("r")) + b"\n\n" + b(step("r", 1)) + b"\n{broken\n")
    assert main(["replay", str(src), "-o", str(tmp_path / "out.jsonl")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"replay: {src}:4: invalid_json: ") and "Traceback" not in "".join(err)
    assert err[-1] == "replay: 2 decisions, 1 dead-letters"


def test_help_says_the_whole_description_and_the_demo_flags_have_help() -> None:
    text = build_parser().format_help()
    assert "deadletters, experiment, kafka, models." in " ".join(text.split())
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    demo = sub.choices["demo"]
    helps = {a.dest: a.help for a in demo._actions}
    assert all(helps[f] for f in ("runs", "steps", "port"))


def test_patterns_list_on_an_empty_store_says_so(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["patterns", "list", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr()
    assert out.out == "" and "patterns: no pattern in" in out.err and "--starter" in out.err


@pytest.mark.parametrize(
    ("reply", "said"),
    [(b"HTTP/1.1 400 Bad Request\r\n\r\n", "it answered b'HTTP/1.1'"), (None, "no answer within")],
)
def test_a_worker_pointed_at_a_port_that_is_not_kafka_says_so_within_seconds(
    reply: bytes | None,
    said: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A web server (answers something else) or a silent service (answers nothing) on
    RB_BROKER's port: one line naming it, not "internal error: KafkaConnectionError" after 32 s."""
    import threading

    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]

        def serve() -> None:
            conn, _ = srv.accept()
            with conn:
                conn.recv(1024)
                if reply is not None:
                    conn.sendall(reply)
                time.sleep(7)  # silent past the probe's 5 s

        threading.Thread(target=serve, daemon=True).start()
        monkeypatch.setenv("RB_BROKER", f"127.0.0.1:{port}")
        monkeypatch.setenv("RB_DATA_DIR", str(tmp_path))
        t0 = time.monotonic()
        assert main(["worker"]) == 1
        assert time.monotonic() - t0 < 10
    line = one_line(capsys.readouterr().err)
    assert f"127.0.0.1:{port} accepts connections but is not a Kafka broker" in line and said in line
    assert "RB_BROKER" in line


def test_replay_writes_a_runs_page_and_names_an_unknown_run_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src = tmp_path / "runs.jsonl"
    evs = [
        run_start("r"),
        run_start("other"),
        step("r", 1, thought="<script>alert(1)</script>"),
        step("r", 2),
    ]
    src.write_bytes(b"\n".join(b(e) for e in evs) + b"\n")
    page = tmp_path / "r.html"
    assert main(["replay", str(src), "--run", "r", "--html", str(page)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""  # --html without -o: the page is the output
    text = page.read_text("utf-8")
    assert text.startswith("<!DOCTYPE html>") and "run r" in text and "<script" not in text
    assert text.count("<tr>") == 1 + 3  # the header row; decisions 0, 1, 2
    out = tmp_path / "d.jsonl"
    assert main(["replay", str(src), "-o", str(out), "--run", "r", "--html", str(page)]) == 0
    assert len(out.read_bytes().splitlines()) == 4
    capsys.readouterr()
    assert main(["replay", str(src), "--run", "nobody", "--html", str(tmp_path / "n.html")]) == 1
    assert one_line(capsys.readouterr().err) == (
        f"rb-streams: replay: run 'nobody' is not in {src} (no event of it was applied)"
    )
    assert not (tmp_path / "n.html").exists()
    assert main(["replay", str(src), "--run", "r"]) == 2
    assert "--run and --html go together" in capsys.readouterr().err


def _subparser(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def test_worker_help_lists_worker_options_not_the_agent_only_ones() -> None:
    text = _subparser("worker").format_help()
    for agent_only in (
        "--client-gate-mode",
        "--client-call-gate",
        "--client-gate-policy",
        "--client-extra-names",
    ):
        assert agent_only not in text
    assert "--tenant " not in text and "--tenants" in text
    # the worker checks its E-trace timeout against the client deadline: that one stays
    assert "--broker" in text and "--client-deadline-ms" in text
    assert "--client-gate-mode" in _subparser("simulate").format_help()


def test_every_kafka_option_has_help() -> None:
    helps = {a.dest: a.help for a in _subparser("kafka")._actions}
    assert helps["port"] and helps["data_dir"]


def test_a_bad_value_is_named_by_the_flag_when_typed_and_by_the_variable_when_from_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RB_BROKER", raising=False)
    assert main(["config", "--broker", "http://x"]) == 2
    err = one_line(capsys.readouterr().err)
    assert (
        err.startswith("rb-streams: invalid configuration: --broker: 'http://x' is not valid")
        and "RB_" not in err
    )
    monkeypatch.setenv("RB_BROKER", "http://x")
    assert main(["config"]) == 2
    assert one_line(capsys.readouterr().err).startswith(
        "rb-streams: invalid configuration: RB_BROKER: 'http://x'"
    )
    # a flag argparse refuses is named by argparse alone
    with pytest.raises(SystemExit):
        main(["config", "--partitions", "three"])
    err = capsys.readouterr().err
    assert "argument --partitions: 'three' is not valid" in err and "RB_PARTITIONS" not in err


def test_replay_says_once_that_a_runs_later_events_follow_its_refused_run_start(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src = tmp_path / "misspelt.jsonl"
    events = [run_start("r", escalaton={"stop_after": 2}), *(step("r", n) for n in range(1, 6))]
    src.write_bytes(b"\n".join(b(e) for e in events) + b"\n")
    assert main(["replay", str(src), "-o", str(tmp_path / "out.jsonl")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"replay: {src}:1: invalid_run_start: unknown field 'escalaton'")
    assert err[1] == (
        f"replay: {src}:2: unknown_run: 5 later events of run 'r' (from this line on), "
        "dead-lettered because its run_start was refused"
    )
    assert err[2:] == ["replay: 0 decisions, 6 dead-letters"]
