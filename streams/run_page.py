"""A run's page: its summary and step log as one server-rendered HTML page, no JavaScript.

Pure (no I/O): the worker serves it (`GET /runs/{id}/view`) from the run's state, and
`rb-streams replay --run ID --html OUT.html` writes it offline from a replay. The input is
what the JSON views answer: `summary` is `/runs/{id}`'s body (the page reads `cost_usd` too
when the caller adds it), `steps` the entries of `/runs/{id}/steps`. An entry may carry what
only a replay knows: `steering` (the texts the agent received), `action` and `action_reason`
(the escalation ladder), `gate_refusals`, `cost_usd` (the run's cost after the step).

Every text comes from agents or their operators and is hostile until shown otherwise: each
is cut to `TEXT_MAX` characters before it is escaped (`html.escape`, quotes too; control
characters become U+FFFD), lists and rows are capped, numbers are drawn only when finite,
links are whole or left out, and colours come from a fixed table, never from the input. The
page forbids scripts itself (a CSP meta tag) as well.

`render_runs_page` is `GET /runs` for a browser: the list of runs, each linked to its page.
"""

from __future__ import annotations

import html
import math
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

TEXT_MAX = 500  # characters of any one text shown
ITEMS_MAX = 20  # items of any one list or mapping shown
LINK_MAX = 4000  # characters of a link (a run id is at most 256 characters, 3072 encoded)
ROWS_MAX = 2000  # step rows shown (the worker keeps 20; a replay may have thousands)
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; form-action 'none'; base-uri 'none'"

# FSM state -> colour (the only colours the page uses; an unknown state is grey)
COLOURS = {
    "INIT": "#9e9e9e",
    "FAST": "#2e7d32",
    "NORMAL": "#1565c0",
    "SLOW": "#ef6c00",
    "SKIP": "#c62828",
    "END": "#212121",
}
UNKNOWN_COLOUR = "#bdbdbd"
ELLIPSIS = "\u2026"

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#212121}
h1{font-size:1.3em;word-break:break-all}
table{border-collapse:collapse;font-size:.85em}
th,td{border:1px solid #ddd;padding:.25em .5em;vertical-align:top;text-align:left}
td.text{max-width:40em;white-space:pre-wrap;word-break:break-word}
dl.head{display:grid;grid-template-columns:max-content auto;gap:.15em 1em}
dl.head dt{font-weight:600}
.state{font-weight:600}
.legend span{margin-right:1em}
"""


# control characters (C0 but tab and newlines, DEL, C1) -> U+FFFD: HTML has no place for them
# (a browser drops a NUL, shows others as boxes or not at all)
_CONTROLS = {c: "\ufffd" for c in [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0x7F, 0xA0)]}


def text(value: Any, limit: int = TEXT_MAX) -> str:
    """`value` as text for the page: cut to `limit` characters, control characters replaced
    (U+FFFD), then escaped (quotes too)."""
    s = value if isinstance(value, str) else "" if value is None else str(value)
    if len(s) > limit:
        s = s[:limit] + ELLIPSIS
    return html.escape(s.translate(_CONTROLS), quote=True)


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _num(v: Any, digits: int = 3) -> str:
    f = _number(v)
    if f is None:
        return "" if v is None else text(v, 40)
    return str(int(f)) if isinstance(v, int) else f"{f:.{digits}f}"


def _usd(v: Any) -> str:
    f = _number(v)
    return "" if f is None else f"${f:.4f}"


def _items(v: Any) -> list[Any]:
    if isinstance(v, str) or not isinstance(v, Iterable):
        return [] if v is None else [v]
    out: list[Any] = []
    for x in v:
        if len(out) == ITEMS_MAX:
            out.append(ELLIPSIS)
            break
        out.append(x)
    return out


def _list(v: Any) -> str:
    return ", ".join(text(x, 100) if x != ELLIPSIS else ELLIPSIS for x in _items(v))


def _mapping(v: Any) -> str:
    if not isinstance(v, Mapping):
        return text(v) if v is not None else ""
    parts = []
    for i, (k, x) in enumerate(v.items()):
        if i == ITEMS_MAX:
            parts.append(ELLIPSIS)
            break
        parts.append(f"{text(k, 100)}: {_num(x) if _number(x) is not None else text(x, 100)}")
    return ", ".join(parts)


def _colour(state: Any) -> str:
    return COLOURS.get(state, UNKNOWN_COLOUR) if isinstance(state, str) else UNKNOWN_COLOUR


def _state(state: Any) -> str:
    return f'<span class="state" style="color:{_colour(state)}">{text(state, 20)}</span>'


def chart(steps: Sequence[Mapping[str, Any]], width: int = 720, height: int = 140) -> str:
    """An inline SVG of difficulty per step (0 at the bottom, 1 at the top), each point
    coloured by its FSM state and titled with step, state and difficulty."""
    pts: list[tuple[Any, Any, float]] = []
    for e in steps[:ROWS_MAX]:  # the steps the table shows
        d = _number(e.get("difficulty"))
        if d is not None:
            pts.append((e.get("step"), e.get("fsm_state"), min(max(d, 0.0), 1.0)))
    pad = 24
    w, h = width - 2 * pad, height - 2 * pad
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="difficulty per step">',
        f'<rect x="{pad}" y="{pad}" width="{w}" height="{h}" fill="#fafafa" stroke="#ddd"/>',
        f'<text x="2" y="{pad + 4}" font-size="10">1</text>',
        f'<text x="2" y="{pad + h}" font-size="10">0</text>',
    ]
    if not pts:
        out.append(f'<text x="{pad + 8}" y="{pad + h // 2}" font-size="12">no scored step</text>')
    else:
        n = len(pts)

        def xy(i: int, d: float) -> tuple[float, float]:
            x = pad + (w * i / (n - 1) if n > 1 else w / 2)
            return round(x, 1), round(pad + h * (1 - d), 1)

        coords = [xy(i, d) for i, (_, _, d) in enumerate(pts)]
        line = " ".join(f"{x},{y}" for x, y in coords)
        out.append(f'<polyline points="{line}" fill="none" stroke="#90a4ae" stroke-width="1"/>')
        r = 3 if n <= 200 else 1.5
        for (step, state, d), (x, y) in zip(pts, coords, strict=True):
            title = f"step {text(step, 20)}: {text(state, 20)}, difficulty {d:.3f}"
            out.append(
                f'<circle cx="{x}" cy="{y}" r="{r}" fill="{_colour(state)}"><title>{title}</title></circle>'
            )
    out.append("</svg>")
    legend = " ".join(f'<span style="color:{c}">&#9679; {s}</span>' for s, c in COLOURS.items())
    return "".join(out) + f'<div class="legend">{legend}</div>'


def _sources(v: Any) -> str:
    """Injection sources with their counts, in order (`e3` fourteen times, then `monitor`:
    `e3 \u00d714, monitor`)."""
    counts: dict[str, int] = {}
    more = False
    for x in v if isinstance(v, list | tuple) else [v] if v is not None else []:
        k = x if isinstance(x, str) else str(x)
        if k in counts or len(counts) < ITEMS_MAX:
            counts[k] = counts.get(k, 0) + 1
        else:
            more = True
    shown = [text(k, 100) + (f" \u00d7{n}" if n > 1 else "") for k, n in counts.items()]
    return ", ".join(shown + ([ELLIPSIS] if more else []))


def _steering(e: Mapping[str, Any]) -> str:
    texts = [text(t) if t != ELLIPSIS else ELLIPSIS for t in _items(e.get("steering"))]
    if not texts:
        sources = _sources(e.get("injection_sources"))
        return f"({sources})" if sources else ""
    return "<hr>".join(texts)


def _action(e: Mapping[str, Any]) -> str:
    act = text(e.get("action"), 40)
    why = e.get("action_reason")
    if isinstance(why, Mapping) and why.get("text") is not None:
        act += (": " if act else "") + text(why.get("text"))
    sup = e.get("suppressed")
    if sup:
        act += (" " if act else "") + f"(suppressed: {text(sup, 40)})"
    skipped = e.get("skipped_reason")
    if skipped:
        act += (" " if act else "") + f"(skipped: {text(skipped, 100)})"
    return act


def _rows(steps: Sequence[Mapping[str, Any]], gate: bool) -> list[str]:
    rows = []
    for e in steps[:ROWS_MAX]:
        cells = [
            _num(e.get("step")),
            _state(e.get("fsm_state")),
            _num(e.get("difficulty")),
            text(e.get("model"), 100),
            _list(e.get("monitors_fired")),
            f'<td class="text">{_steering(e)}</td>',
            f'<td class="text">{_action(e)}</td>',
        ]
        if gate:
            cells.append(
                f'<td class="text">{"<hr>".join(text(t) for t in _items(e.get("gate_refusals")))}</td>'
            )
        cells.append(_usd(e.get("cost_usd")))
        rows.append("<tr>" + "".join(c if c.startswith("<td") else f"<td>{c}</td>" for c in cells) + "</tr>")
    if len(steps) > ROWS_MAX:
        rows.append(f'<tr><td colspan="9">{len(steps) - ROWS_MAX} more steps not shown</td></tr>')
    return rows


def render_run_page(summary: Mapping[str, Any], steps: Sequence[Mapping[str, Any]] = ()) -> str:
    """The run's page (a whole HTML document) from `/runs/{id}`'s body and its step entries."""
    run_id = text(summary.get("run_id"), 200)
    head: list[tuple[str, str]] = [
        ("run", run_id),
        ("org", text(summary.get("org_id"), 100)),
        ("state", _state(summary.get("state"))),
        ("step", _num(summary.get("step"))),
        ("finished", "yes" if summary.get("finished") else "no"),
        ("outcome", text(summary.get("outcome"), 100) or "(running)"),
    ]
    if summary.get("experiment") is not None or summary.get("arm") is not None:
        head.append(
            ("experiment", f"{text(summary.get('experiment'), 100)} arm {text(summary.get('arm'), 40)}")
        )
    if "cost_usd" in summary:
        est = " (estimated)" if summary.get("cost_estimated") else ""
        head.append(("cost so far", _usd(summary.get("cost_usd")) + est))
    tokens = _num(summary.get("tokens_used"))
    if summary.get("token_budget"):
        tokens += f" of {_num(summary.get('token_budget'))} ({_num(summary.get('budget_used'))} used)"
    head += [
        ("tokens", tokens),
        ("monitor injections", _num(summary.get("monitor_injections"))),
        ("injections by source", _mapping(summary.get("injections_by_source"))),
        ("E-trace calls", _mapping(summary.get("e_trace_calls"))),
        (
            "rung",
            f"{text(summary.get('rung'), 40)} (ignored warnings: {_num(summary.get('ignored_warnings'))})",
        ),
    ]
    why = summary.get("rung_reason")
    if isinstance(why, Mapping):
        head.append(("rung reason", text(why.get("text"))))
    dl = summary.get("deadletter")
    if isinstance(dl, Mapping):
        head.append(("dead-lettered", f"{text(dl.get('reason'), 100)}: {text(dl.get('detail'))}"))
    gate = any(e.get("gate_refusals") for e in steps)
    cols = ["step", "FSM state", "difficulty", "model", "monitors fired", "steering text", "action"]
    cols += ["gate refusals"] if gate else []
    cols.append("cost so far")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        f"<title>run {run_id}</title><style>{_STYLE}</style></head><body>",
        f"<h1>run {run_id}</h1>",
        '<dl class="head">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in head) + "</dl>",
        "<h2>Difficulty per step</h2>",
        chart(steps),
        f"<h2>Steps ({len(steps)})</h2>",
        "<table><thead><tr>" + "".join(f"<th>{c}</th>" for c in cols) + "</tr></thead><tbody>",
        *_rows(steps, gate),
        "</tbody></table></body></html>",
    ]
    return "\n".join(parts)


def view_url(run_id: str) -> str:
    """The path of a run's page on the worker (`/runs/{id}/view`), the id percent-encoded."""
    return f"/runs/{urllib.parse.quote(run_id, safe='')}/view"


def render_runs_page(runs: Sequence[Mapping[str, Any]], next_query: Mapping[str, str] | None = None) -> str:
    """`GET /runs` for a browser: the runs a worker holds (its JSON list's entries), each
    run id a link to its page, and a link to the next page (`next_query`: its query, None:
    this is the last)."""
    rows = []
    for r in runs[:ROWS_MAX]:
        rid = r.get("run_id")
        link = r.get("view") or (view_url(rid) if isinstance(rid, str) else "")
        cell = text(rid, 200)
        if isinstance(link, str) and link and len(link) <= LINK_MAX:  # a link is whole or none
            cell = f'<a href="{html.escape(link, quote=True)}">{cell}</a>'
        rows.append(
            "<tr>"
            + f"<td>{cell}</td>"
            + f"<td>{text(r.get('org_id'), 100)}</td><td>{_state(r.get('state'))}</td>"
            + f"<td>{_num(r.get('step'))}</td><td>{'yes' if r.get('finished') else 'no'}</td>"
            + f"<td>{text(r.get('outcome'), 100)}</td></tr>"
        )
    more = ""
    if next_query is not None:
        query = urllib.parse.urlencode(dict(next_query))
        if len(query) <= LINK_MAX:
            more = f'<p><a href="?{html.escape(query, quote=True)}">next page</a></p>'
    cols = ["run", "org", "FSM state", "step", "finished", "outcome"]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
            f"<title>runs</title><style>{_STYLE}</style></head><body>",
            f"<h1>Runs held by this worker ({len(runs)})</h1>",
            "<table><thead><tr>" + "".join(f"<th>{c}</th>" for c in cols) + "</tr></thead><tbody>",
            *rows,
            "</tbody></table>",
            more,
            "</body></html>",
        ]
    )


def steps_from_decisions(
    decisions: Iterable[Mapping[str, Any]], costs: Mapping[int, float] | None = None
) -> list[dict[str, Any]]:
    """Step entries from a run's decision records (what a replay has, and the step log does
    not: the texts the agent received, the ladder's action). `costs`: step -> the run's cost
    after it."""
    out = []
    for d in decisions:
        mon = d.get("monitors") or {}
        texts = [i.get("text") for i in d.get("injections") or () if isinstance(i, Mapping)]
        if not texts and d.get("injection_text"):
            texts = [d.get("injection_text")]
        entry: dict[str, Any] = {
            "step": d.get("step"),
            "fsm_state": d.get("fsm_state"),
            "difficulty": d.get("difficulty"),
            "model": d.get("model"),
            "injection_sources": [
                i.get("source") for i in d.get("injections") or () if isinstance(i, Mapping)
            ],
            "monitors_fired": list(mon.get("fired") or ()) if isinstance(mon, Mapping) else [],
            "suppressed": d.get("suppressed"),
            "skipped_reason": d.get("skipped_reason"),
            "steering": texts,
            "action": d.get("action"),
            "action_reason": d.get("action_reason"),
        }
        if costs is not None and d.get("step") in costs:
            entry["cost_usd"] = costs[d["step"]]
        out.append(entry)
    return out
