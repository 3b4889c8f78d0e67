"""deploy/kafka/kafka.sh: what it prints while resolving the broker's jars."""

from __future__ import annotations

import re
import subprocess

from ._support import ROOT

SCRIPT = ROOT / "deploy" / "kafka" / "kafka.sh"


def test_maven_runs_in_batch_mode_without_colour_and_its_output_loses_every_escape_code() -> None:
    text = SCRIPT.read_text(encoding="utf-8")
    # the mvn command with its continuation lines
    call = re.search(r"^\s*mvn (?:.*\\\n)*.*$", text, re.M)
    assert call is not None and call.group(0).rstrip().endswith("| no_escapes >&2"), call
    assert " -B " in call.group(0) and "-Dstyle.color=never" in call.group(0)
    (define,) = re.findall(r"^no_escapes\(\) \{.*\}$", text, re.M)
    # what Maven 3.8 -q writes despite -B: bare resets, and a coloured line
    maven = "\x1b[0m\x1b[0m\n\x1b[1;31m[ERROR]\x1b[m could not resolve\n\x1b[0m\n"
    out = subprocess.run(
        ["bash", "-c", f"{define}\nno_escapes"], input=maven, capture_output=True, text=True, check=True
    ).stdout
    assert out == "[ERROR] could not resolve\n"
