"""late_sprawl: new fronts opening late instead of converging."""

from __future__ import annotations

from .trajectories import Run, bash, edit, step, view

SPRAWL = "late_sprawl"
TOPICS = [
    "The Kubernetes ingress annotations might need a rewrite rule for the websocket path.",
    "Maybe the Grafana dashboard JSON has a stale datasource uid that breaks the panel queries.",
    "The Terraform state for the S3 bucket could be drifting from the live lifecycle policy.",
    "Perhaps the Android build's gradle wrapper version conflicts with the Kotlin plugin.",
    "The Postgres autovacuum settings may be too aggressive for the events table partitions.",
    "I wonder whether the CDN cache headers on the marketing site are set correctly.",
    "The LDAP group sync job might be failing silently on nested groups.",
    "Let me check if the mobile push notification certificates expire this month.",
    "The billing cron in the legacy PHP app might double-charge on leap years.",
    "Maybe the Elasticsearch shard allocation is unbalanced after the node replacement.",
    "The CI runner's docker layer cache could be corrupt, causing slow image builds.",
    "Possibly the GraphQL schema stitching drops deprecated fields for older clients.",
]


def _focused_steps(n: int) -> list[dict]:
    out = []
    for i in range(n):
        if i % 3 == 0:
            out.append(view("src/auth/session.py", thought="Reading the session refresh logic again."))
        elif i % 3 == 1:
            out.append(edit("src/auth/session.py", f"a{i}", f"b{i}", thought="Adjusting the refresh window."))
        else:
            out.append(
                bash("pytest tests/test_session.py -q", f"{i} passed", thought="Running session tests.")
            )
    return out


def test_converging_run_does_not_sprawl(sem):
    run = Run(sem, task="Fix the session refresh bug")
    run.feed(
        view("README.md", thought="Getting an overview of the repository layout first."),
        bash("ls src", "auth billing api", thought="Listing the source tree to find the auth code."),
        view("src/auth/session.py", thought="The session refresh code lives in the auth package."),
    )
    run.feed(*_focused_steps(45))
    assert not run.fired_anywhere(SPRAWL)


def test_run_that_keeps_opening_new_fronts_late_fires(sem):
    run = Run(sem, task="Fix the session refresh bug")
    run.feed(*_focused_steps(24))
    tools = [
        "kubectl",
        "terraform",
        "gradle",
        "psql",
        "curl",
        "ldapsearch",
        "openssl",
        "php",
        "es_cli",
        "docker",
    ]
    for i, thought in enumerate(TOPICS):
        run.feed(step(thought, tools[i % len(tools)], {"path": f"infra/area{i}/config{i}.yaml"}, "ok"))
    assert run.fired_anywhere(SPRAWL)
    fired = next(r for r in run.results if SPRAWL in r.fired)
    assert "new tools, files or topics" in fired.text and "session refresh" in fired.text


def test_early_exploration_is_not_sprawl(sem):
    run = Run(sem, task="Fix the session refresh bug")
    tools = ["ls", "grep", "find", "git_log", "cat", "tree", "rg", "read_file", "search", "open"]
    for i in range(12):
        run.feed(step(TOPICS[i], tools[i % len(tools)], {"path": f"src/m{i}.py"}, "ok"))
    run.feed(*_focused_steps(20))
    assert not run.fired_anywhere(SPRAWL)


def test_the_tests_of_the_fix_late_in_the_run_are_not_new_fronts(sem):
    run = Run(sem, task="Fix the session refresh bug")
    run.feed(*_focused_steps(24))
    for i, thought in enumerate(TOPICS):
        if i % 2:
            run.feed(view(f"tests/area{i}/test_case{i}.py", thought=thought))
        else:
            run.feed(bash(f"pytest tests/area{i} -q", f"{i} passed", thought=thought))
    assert not run.fired_anywhere(SPRAWL)


def test_steps_that_name_a_changed_file_are_on_the_same_front(sem):
    run = Run(sem, task="Fix the session refresh bug")
    run.feed(*_focused_steps(24))
    for i, thought in enumerate(TOPICS):
        run.feed(
            step(f"{thought} It may touch session.py again.", "probe", {"path": f"infra/c{i}.yaml"}, "ok")
        )
    assert not run.fired_anywhere(SPRAWL)
