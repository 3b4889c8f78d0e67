"""Pattern records, the Qdrant store (embedded local mode, real qdrant-client), the CLI."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from qdrant_client import QdrantClient

from streams.cli.main import main
from streams.core import etrace_rules
from streams.core.etrace_rules import Query
from streams.etraces.pattern_store import E2_ALL, E3_COLLECTION, QdrantPatternStore, StoreInUse, e1_collection
from streams.etraces.patterns import LineError, Pattern, PatternError, parse_pattern, read_jsonl
from tests.models import models

ROOT = Path(__file__).resolve().parents[3]
STARTER = ROOT / "patterns" / "starter.jsonl"


def rec(**kw: Any) -> dict[str, Any]:
    base = {"id": "p1", "tier": "e2", "title": "T", "guidance": "G", "situation": "S"}
    base.update(kw)
    return {k: v for k, v in base.items() if v is not None}


# -- records ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (rec(tier="e9"), "tier: must be one of e1, e2, e3"),
        (rec(tier="e1"), "org_id: required"),
        (rec(org_id="acme"), "org_id: only E1 patterns are org-scoped"),
        (rec(situation=None), "situation: required"),
        (rec(guidance=""), "guidance: required"),
        (rec(failure_type="bogus"), "failure_type: must be one of"),
        (rec(gate_threshold=1.5), "gate_threshold: must be a number in [0, 1]"),
        (rec(gate_threshold=True), "gate_threshold"),
        (rec(dead_ends=[1, 2]), "dead_ends: must be a string or a list of strings"),
        (rec(colour="red"), "unknown field(s): colour"),
        (rec(id=""), "id: required"),
    ],
)
def test_invalid_records_are_refused_with_the_field_named(record: dict[str, Any], message: str) -> None:
    with pytest.raises(PatternError, match=re.escape(message)):
        parse_pattern(record)


def test_jsonl_errors_name_the_line_and_the_rest_still_loads() -> None:
    lines = [
        orjson.dumps(rec(id="a")),
        b"",
        b"{not json",
        orjson.dumps(rec(id="b", tier="x")),
        orjson.dumps(rec(id="c")),
    ]
    got = list(read_jsonl(lines))
    assert [n for n, _ in got] == [1, 3, 4, 5]
    assert isinstance(got[1][1], LineError) and str(got[1][1]).startswith("line 3: not valid JSON")
    assert str(got[2][1]).startswith("line 4: tier")
    assert [p.id for _, p in got if isinstance(p, Pattern)] == ["a", "c"]


def test_the_starter_library_is_valid_and_covers_every_tier_and_failure_type() -> None:
    parsed = [p for _, p in read_jsonl(STARTER.read_bytes().splitlines())]
    assert not [p for p in parsed if isinstance(p, LineError)]
    pats = [p for p in parsed if isinstance(p, Pattern)]
    assert len({p.id for p in pats}) == len(pats)
    tiers = {p.tier for p in pats}
    assert tiers == {"e1", "e2", "e3"}
    types = {p.failure_type for p in pats if p.tier == "e2"}
    assert {"contradiction", "loop", "verification_skip", "context_churn", "sprawl", "drift"} <= types
    assert len([p for p in pats if p.tier == "e3"]) <= etrace_rules.E3_MAX


# -- the store ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> Any:
    return models().full


def pats(*records: dict[str, Any]) -> list[Pattern]:
    return [parse_pattern(r) for r in records]


SIT = "The session token expiry check raises KeyError expires_at when I run the auth tests."


def test_upsert_is_idempotent_and_moves_a_shared_pattern_that_changed_tier_or_type(
    minilm: Any, tmp_path: Path
) -> None:
    store = QdrantPatternStore(minilm, path=tmp_path / "p")
    p = pats(rec(id="x", failure_type="loop"))
    store.upsert(p)
    store.upsert(p)
    assert store.stats()["collections"] == {E2_ALL: 1, f"{E2_ALL}_loop": 1}
    store.upsert(pats(rec(id="x")))
    assert store.stats()["collections"] == {E2_ALL: 1, f"{E2_ALL}_loop": 0}
    store.upsert(pats(rec(id="x", tier="e3", situation=None)))
    assert store.stats()["collections"] == {E2_ALL: 0, f"{E2_ALL}_loop": 0, E3_COLLECTION: 1}
    # an org's E1 pattern with the same id is the org's own: the shared one stays
    store.upsert(pats(rec(id="x", tier="e1", org_id="acme")))
    assert store.stats()["collections"][E3_COLLECTION] == 1
    assert store.stats()["collections"][e1_collection("acme")] == 1
    assert store.delete(["x", "missing"]) == 1  # the shared one
    assert [(p.tier, p.org_id) for p in store.iter_patterns()] == [("e1", "acme")]
    assert store.delete(["x"], org_id="acme") == 1
    assert list(store.iter_patterns()) == []
    store.close()


def _e1_file(path: Path, org: str, guidance: str, *ids: str) -> Path:
    lines = [orjson.dumps(rec(id=i, tier="e1", org_id=org, guidance=guidance, situation=SIT)) for i in ids]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_loading_another_orgs_file_with_the_same_ids_never_touches_the_owners_patterns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32: pattern ids were global, so globex loading a file with acme's id removed
    acme's pattern. Through the CLI and a local store on disk, as an operator does it."""
    where = ["--patterns-path", str(tmp_path / "store")]
    acme = _e1_file(tmp_path / "acme.jsonl", "acme", "Acme: rotate the token.", "fix-1", "fix-2")
    globex = _e1_file(tmp_path / "globex.jsonl", "globex", "Globex: call the vault.", "fix-1")
    shared = tmp_path / "shared.jsonl"
    shared.write_bytes(orjson.dumps(rec(id="fix-1", situation=SIT, guidance="Shared.")) + b"\n")
    for f in (acme, globex, shared, globex):  # globex twice: idempotent
        assert main(["patterns", "load", str(f), *where]) == 0
    capsys.readouterr()
    assert main(["patterns", "list", "--json", *where]) == 0
    listed = [orjson.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert sorted((p["tier"], p["org_id"], p["pattern_id"], p["guidance"]) for p in listed) == [
        ("e1", "acme", "fix-1", "Acme: rotate the token."),
        ("e1", "acme", "fix-2", "Acme: rotate the token."),
        ("e1", "globex", "fix-1", "Globex: call the vault."),
        ("e2", None, "fix-1", "Shared."),
    ]
    # deleting globex's fix-1 leaves acme's and the shared one
    assert main(["patterns", "delete", "fix-1", "--org", "globex", *where]) == 0
    assert main(["patterns", "delete", "fix-2", "--org", "globex", *where]) == 1  # not globex's
    store = QdrantPatternStore(models().full, path=tmp_path / "store")
    try:
        hits = store.answer(Query("e1", SIT, "acme", None, 4, 0.5)).hits
        assert sorted(h.pattern_id for h in hits) == ["fix-1", "fix-2"]
        assert {h.payload["org_id"] for h in hits} == {"acme"}
        assert store.answer(Query("e1", SIT, "globex", None, 4, 0.5)).hits == ()
        assert [h.pattern_id for h in store.answer(Query("e2", SIT, None, None, 4, 0.5)).hits] == ["fix-1"]
    finally:
        store.close()


def test_e1_points_stored_before_ids_were_scoped_are_replaced_by_their_own_org(
    minilm: Any, tmp_path: Path
) -> None:
    """A store written by an earlier version holds acme's E1 pattern at the id's point alone;
    reloading acme's file leaves one copy, and nothing of another org is touched."""
    from qdrant_client import models as qm

    from streams.etraces.pattern_store import point_id

    store = QdrantPatternStore(minilm, path=tmp_path / "p")
    old, other = pats(
        rec(id="fix-1", tier="e1", org_id="acme", situation=SIT),
        rec(id="fix-1", tier="e1", org_id="globex", situation=SIT),
    )
    store.upsert([other])
    store._ensure(e1_collection("acme"))
    vec = minilm.embed([old.vector_text])[0].tolist()
    legacy = qm.PointStruct(id=point_id("fix-1"), vector=vec, payload=old.payload())
    store.client.upsert(e1_collection("acme"), points=[legacy])
    store.upsert([old])
    counts = store.stats()["collections"]
    assert counts == {e1_collection("acme"): 1, e1_collection("globex"): 1}
    store.client.upsert(e1_collection("acme"), points=[legacy])  # once more, then deleted by org
    assert store.delete(["fix-1"], org_id="acme") == 1
    assert store.stats()["collections"] == {e1_collection("acme"): 0, e1_collection("globex"): 1}
    store.close()


def test_local_store_survives_a_reopen_and_refuses_a_second_process(minilm: Any, tmp_path: Path) -> None:
    path = tmp_path / "p"
    store = QdrantPatternStore(minilm, path=path)
    store.upsert(pats(rec(id="x", tier="e3")))
    with pytest.raises(StoreInUse, match="open in another process"):
        QdrantPatternStore(minilm, path=path)
    store.close()
    again = QdrantPatternStore(minilm, path=path)
    assert [p.id for p in again.iter_patterns()] == ["x"]
    again.close()


def test_search_returns_the_situation_match_with_its_cosine(minilm: Any) -> None:
    store = QdrantPatternStore(minilm)
    store.upsert(
        pats(
            rec(id="tok", situation=SIT),
            rec(id="css", situation="The hero banner CSS is blurry on retina screens."),
        )
    )
    a = store.answer(Query("e2", SIT, None, None, 2, 0.7))
    assert [h.pattern_id for h in a.hits] == ["tok"] and a.hits[0].similarity == pytest.approx(1.0, abs=1e-4)
    assert store.answer(Query("e2", "Compile the rust crate with cargo.", None, None, 2, 0.7)).hits == ()


def test_e2_failure_type_query_uses_its_own_collection(minilm: Any) -> None:
    store = QdrantPatternStore(minilm)
    store.upsert(pats(rec(id="loop", situation=SIT, failure_type="loop"), rec(id="any", situation=SIT)))
    typed = store.answer(Query("e2", SIT, None, "loop", 2, 0.7))
    assert [h.pattern_id for h in typed.hits] == ["loop"]
    assert store.answer(Query("e2", SIT, None, "drift", 2, 0.7)).hits == ()
    assert {h.pattern_id for h in store.answer(Query("e2", SIT, None, None, 2, 0.7)).hits} == {"loop", "any"}


def test_org_isolation_near_identical_patterns_never_cross_orgs(minilm: Any) -> None:
    store = QdrantPatternStore(minilm)
    store.upsert(
        pats(
            rec(id="acme-1", tier="e1", org_id="acme", situation=SIT),
            rec(id="globex-1", tier="e1", org_id="globex", situation=SIT + " "),
            rec(id="globex-2", tier="e1", org_id="globex", situation=SIT.replace("auth", "login")),
        )
    )
    cross = 0
    for i in range(25):
        text = SIT if i % 2 else SIT.replace("auth", "login")
        for org, own in (("acme", "acme-"), ("globex", "globex-")):
            q = Query("e1", text, org, None, 1, 0.8)
            chosen = etrace_rules.select(q, store.answer(q).hits, "generic")
            cross += sum(1 for h in chosen if not h.pattern_id.startswith(own))
            assert all(h.payload["org_id"] == org for h in store.answer(q).hits)
    assert cross == 0
    assert store.answer(Query("e1", SIT, "initech", None, 1, 0.8)).hits == ()  # org without patterns


def test_e3_rules_come_sorted_by_id_and_without_similarity(minilm: Any) -> None:
    store = QdrantPatternStore(minilm)
    store.upsert(pats(*(rec(id=f"r{i}", tier="e3", situation=None) for i in (3, 1, 2))))
    a = store.answer(Query("e3", None, None, None, 32, None))
    assert [h.pattern_id for h in a.hits] == ["r1", "r2", "r3"] and all(h.similarity is None for h in a.hits)


def test_server_mode_code_path_creates_payload_indexes(minilm: Any) -> None:
    """Server mode differs only in creating keyword payload indexes; exercised through the
    same client interface (an in-process client) since no Qdrant server runs here."""
    client = QdrantClient(":memory:")
    calls: list[tuple[str, str]] = []
    real = client.create_payload_index

    def spy(name: str, field: str, **kw: Any) -> Any:
        calls.append((name, field))
        return real(name, field, **kw)

    client.create_payload_index = spy  # type: ignore[method-assign]
    store = QdrantPatternStore(minilm, client=client, server_mode=True)
    store.upsert(pats(rec(id="x", failure_type="loop")))
    assert {f for _, f in calls} == {"tier", "org_id", "failure_type", "pattern_id"}
    assert {n for n, _ in calls} == {E2_ALL, f"{E2_ALL}_loop"}
    assert store.stats()["mode"] == "server"


# -- CLI ----------------------------------------------------------------------------------


def test_cli_load_list_delete_stats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "p.jsonl"
    f.write_bytes(
        b"\n".join([orjson.dumps(rec(id="a")), orjson.dumps(rec(id="b", tier="e3")), b"oops"]) + b"\n"
    )
    where = ["--patterns-path", str(tmp_path / "store")]
    assert main(["patterns", "load", str(f), *where]) == 1  # one bad line: non-zero exit
    err = capsys.readouterr().err
    assert "line 3: not valid JSON" in err and "2 loaded" in err and "1 bad line(s)" in err
    assert main(["patterns", "load", str(f), *where]) == 1  # idempotent
    assert main(["patterns", "list", *where]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[:2] for line in out] == [["e2", "a"], ["e3", "b"]]
    assert main(["patterns", "list", "--json", "--tier", "e3", *where]) == 0
    assert [orjson.loads(x)["pattern_id"] for x in capsys.readouterr().out.splitlines()] == ["b"]
    assert main(["patterns", "delete", "a", *where]) == 0
    assert main(["patterns", "delete", "a", *where]) == 1  # already gone
    capsys.readouterr()
    assert main(["patterns", "stats", "--json", *where]) == 0
    stats = orjson.loads(capsys.readouterr().out)
    assert main(["patterns", "stats", *where]) == 0
    assert "patterns_by_tier\t{'e3': 1}" in capsys.readouterr().out
    assert stats["patterns_by_tier"] == {"e3": 1} and stats["mode"] == "local"
