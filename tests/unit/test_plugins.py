"""Plugins: installed distributions' entry points and the profiles file become the Policy; a
plugin the worker cannot run with is one error naming it. Each test installs a real
distribution (tests/plugin_dist.py) on sys.path, found by importlib.metadata."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.core.fsm import FSMParams, FSMState
from streams.core.policy import Policy
from streams.core.reading.features import extract
from streams.plugins import (
    PROFILES,
    SCORERS,
    TEXT_SCORERS,
    TRANSITIONS,
    PluginError,
    load_plugins,
    load_policy,
    load_profiles,
)
from streams.settings import Settings
from tests.plugin_dist import CONSTANT_DIFFICULTY, write_dist


def settings(**kw: str) -> Settings:
    return Settings.from_env({}, **kw)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory on sys.path, as a venv's site-packages is."""
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    return root


def test_without_plugins_the_policy_is_the_default_one() -> None:
    policy, loaded = load_plugins(settings())
    assert loaded == []
    assert policy == Policy()


def test_every_group_of_an_installed_plugin_enters_the_policy(site: Path) -> None:
    mod = write_dist(
        site,
        {
            SCORERS: {"constant": "constant"},
            TEXT_SCORERS: {"shouting": "shouting"},
            TRANSITIONS: {"end_at_three": "end_at_three"},
            PROFILES: {"oncall": "SRE"},
        },
    )
    policy, loaded = load_plugins(settings())
    assert policy.scorer("constant")(extract({}, 10), {"seen": 1}) == (CONSTANT_DIFFICULTY, {"seen": 2})
    assert policy.scorer("shouting")(extract({"thought": "HELP ME"}, 100), None) == (1.0, None)
    assert policy.scorer("shouting")(extract({"thought": "HELP me"}, 4), None) == (1.0, None)  # cut to 4
    assert policy.transition("end_at_three")(FSMState.NORMAL, [0.5] * 3, FSMParams()) is FSMState.END
    sre = policy.weights("oncall", None)
    assert sre["semantic_loop"] == 0.5 and sre["claim_contradiction"] == 0.30  # the rest: coding
    assert {"trajectory", "heuristic"} <= set(policy.scorers)  # the defaults stay
    assert [(x.group, x.name) for x in loaded] == [
        (SCORERS, "constant"),
        (TEXT_SCORERS, "shouting"),
        (TRANSITIONS, "end_at_three"),
        (PROFILES, "oncall"),
    ]
    assert loaded[0].origin == f"{mod} 1.0, {mod}:constant"


def test_a_plugin_that_fails_to_import_names_itself_and_the_error(site: Path) -> None:
    write_dist(site, {SCORERS: {"broken": "constant"}}, module="raise RuntimeError('no GPU here')\n")
    with pytest.raises(
        PluginError,
        match=r"plugin 'broken' in rb_streams.scorers \(.*\) failed to load: RuntimeError: no GPU here",
    ):
        load_policy(settings())


def test_a_plugin_naming_a_missing_object_fails_to_load(site: Path) -> None:
    write_dist(site, {TRANSITIONS: {"gone": "no_such_function"}})
    with pytest.raises(PluginError, match=r"plugin 'gone' .* failed to load: AttributeError"):
        load_policy(settings())


@pytest.mark.parametrize(
    ("group", "attr", "why"),
    [
        (SCORERS, "NOT_A_FUNCTION", "expected a function of 2 argument.*got int"),
        (SCORERS, "three_args", r"expected a function of 2 argument.*\(event, memory, max_chars\)"),
        (TEXT_SCORERS, "constant", "expected a function of 1 argument"),
        (TRANSITIONS, "shouting", "expected a function of 3 argument"),
        (PROFILES, "NOT_A_FUNCTION", "expected a mapping of monitor -> weight, got int"),
    ],
)
def test_a_plugin_of_the_wrong_type_for_its_group_is_refused(
    site: Path, group: str, attr: str, why: str
) -> None:
    write_dist(site, {group: {"bad": attr}})
    with pytest.raises(PluginError, match=f"plugin 'bad' in {group} \\(.*\\): {why}"):
        load_policy(settings())


def test_a_profile_plugin_with_an_unknown_monitor_is_refused(site: Path) -> None:
    write_dist(site, {PROFILES: {"typo": "TYPO"}}, module="TYPO = {'semantic_lop': 0.3}\n")
    with pytest.raises(PluginError, match=r"plugin 'typo' .*unknown monitors \['semantic_lop'\]"):
        load_policy(settings())


@pytest.mark.parametrize(
    ("group", "name"),
    [(SCORERS, "trajectory"), (TEXT_SCORERS, "heuristic"), (TRANSITIONS, "default"), (PROFILES, "coding")],
)
def test_a_plugin_cannot_replace_a_name_already_taken(site: Path, group: str, name: str) -> None:
    attr = {SCORERS: "constant", TEXT_SCORERS: "shouting", TRANSITIONS: "end_at_three", PROFILES: "SRE"}[
        group
    ]
    write_dist(site, {group: {name: attr}})
    with pytest.raises(PluginError, match=f"the name '{name}' is already taken"):
        load_policy(settings())


def test_two_plugins_cannot_take_the_same_name(site: Path) -> None:
    write_dist(site, {SCORERS: {"mine": "constant"}})
    write_dist(site, {TEXT_SCORERS: {"mine": "shouting"}})
    with pytest.raises(PluginError, match="the name 'mine' is already taken"):
        load_policy(settings())


def test_the_profiles_file_adds_its_profiles_after_the_plugins(tmp_path: Path) -> None:
    f = tmp_path / "profiles.json"
    f.write_text(json.dumps({"sre": {"semantic_loop": 0.5}}))
    policy, loaded = load_plugins(settings(monitor_profiles=str(f)))
    assert policy.weights("sre", None)["semantic_loop"] == 0.5
    assert [(x.group, x.name, x.origin) for x in loaded] == [("file", "sre", str(f))]


def test_load_profiles_reads_json_and_toml_and_completes_with_the_coding_weights(tmp_path: Path) -> None:
    j = tmp_path / "profiles.json"
    j.write_text(json.dumps({"sre": {"semantic_loop": 0.5, "silent_topic_drift": 0.4}}))
    t = tmp_path / "profiles.toml"
    t.write_text("[docs_writer]\nlate_sprawl = 0.3\nverification_skip = 0.0\n")
    sre = load_profiles(j)["sre"]
    assert sre["semantic_loop"] == 0.5 and sre["claim_contradiction"] == 0.30
    assert load_profiles(t) == {
        "docs_writer": {**Policy().weights("coding", None), "late_sprawl": 0.3, "verification_skip": 0.0}
    }


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ('{"bad": {"semantic_lop": 0.3}}', r"unknown monitors \['semantic_lop'\]"),
        ('["sre"]', "expected a mapping of profile name"),
        ("{not json", "JSONDecodeError"),
    ],
)
def test_a_bad_profiles_file_is_one_error_naming_the_file(tmp_path: Path, content: str, why: str) -> None:
    f = tmp_path / "profiles.json"
    f.write_text(content)
    with pytest.raises(PluginError, match=f"monitor profiles {f}: .*{why}"):
        load_policy(settings(monitor_profiles=str(f)))


def test_a_missing_profiles_file_is_one_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(PluginError, match=r"monitor profiles .*nope\.json: No such file"):
        load_policy(settings(monitor_profiles=str(tmp_path / "nope.json")))
