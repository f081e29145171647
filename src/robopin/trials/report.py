"""Turn a folder of trials into one self-contained HTML page (and the same facts as JSON).

Per trial (a sim trial's log, or a recorder bag of a real session: :mod:`robopin.trials.bag_trials`):
every step's views with the reasoning's anchors drawn (:func:`robopin.pincot.draw_trace`),
the reasoning text, a timeline of the stages and success or the named failure. Per task: RoboPIN's
success table (successes / trials per task and method) and a bar plot of the success rates. Plots are
inline SVG; images are linked as files beside the page (each trial folder's views, and its views with the
anchors drawn, written once into the folder), so the page opens from its folder without a server, and a
batch of hundreds of trials stays a page a browser opens (embedded, 38 trials already made 56 MB) and is
rewritten after each trial without encoding every earlier trial's images again.
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robopin.trials.bag_trials import bag_folders, read_bag_trial
from robopin.trials.log import STAGES, TrialStep, TrialSummary, read_png, read_trial, trial_folders, write_png

__all__ = ["ReportError", "build_report", "write_report"]

_STAGE_COLORS = {"observe": "#4e79a7", "reason": "#f28e2b", "validate": "#edc948", "project": "#59a14f",
                 "plan": "#b07aa1", "execute": "#e15759"}
_METHOD_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1")


class ReportError(ValueError):
    """No trials to report on, or a trial folder that cannot be read."""


@dataclasses.dataclass
class _Trial:
    folder: Path
    summary: TrialSummary
    steps: list[TrialStep]
    images: dict[tuple[int, str], np.ndarray] | None = None  # a recorder bag's views, in memory


def _href(path: Path, base: Path) -> str:
    """``path`` as a link from a page in ``base``."""
    return urllib.parse.quote(Path(os.path.relpath(path, base)).as_posix())


def _drawn_views(trial: _Trial, step: TrialStep, root: Path, base: Path) -> list[tuple[str, str]]:
    """Each view of ``step`` with the reasoning's anchors drawn, as a link to its file (drawn once, then kept).

    A trial folder keeps its drawn views in its ``views/``; a recorder bag's (views only in the bag) go under
    ``<root>/.report-views/<bag>/``. A drawing older than the trial's steps is drawn again.
    """
    from robopin.pincot import draw_trace, parse

    names = list(step.views)
    if trial.images is not None:
        folder, source = root / ".report-views" / trial.folder.name, None
    else:
        folder, source = trial.folder / "views", trial.folder / "steps.jsonl"
    paths = [folder / f"drawn_step{step.step:03d}_{name}.png" for name in names]
    fresh = all(p.is_file() and (source is None or not source.is_file()
                                 or p.stat().st_mtime >= source.stat().st_mtime) for p in paths)
    if not fresh and names:
        if trial.images is not None:
            images = [trial.images[(step.step, name)] for name in names]
        else:
            images = [read_png(trial.folder / step.views[name]) for name in names]
        if step.raw_output:
            images = draw_trace(images, parse(step.raw_output, len(images)))
        folder.mkdir(parents=True, exist_ok=True)
        for path, image in zip(paths, images, strict=True):
            write_png(path, image)
    return [(name, _href(path, base)) for name, path in zip(names, paths, strict=True)]


def _timeline_svg(steps: Sequence[TrialStep]) -> str:
    spans = []  # (step, stage, start, duration)
    cursor = 0.0
    for step in steps:
        for stage in STAGES:
            if stage not in step.durations_s:
                continue
            start = step.stage_starts_s.get(stage, cursor)
            spans.append((step.step, stage, start, step.durations_s[stage]))
            cursor = start + step.durations_s[stage]
    if not spans:
        return "<p class='muted'>no stage durations recorded</p>"
    total = max(start + duration for _, _, start, duration in spans) or 1.0
    width, row = 640.0, 18
    rows = sorted({s for s, *_ in spans})
    height = row * len(rows) + 24
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width + 80:.0f}' height='{height}' class='timeline'>"]
    for index, number in enumerate(rows):
        parts.append(f"<text x='0' y='{index * row + 13}' font-size='11'>step {number}</text>")
    for number, stage, start, duration in spans:
        y = rows.index(number) * row
        x = 60 + start / total * width
        w = max(duration / total * width, 1.0)
        parts.append(f"<rect x='{x:.1f}' y='{y + 2}' width='{w:.1f}' height='{row - 4}' fill='{_STAGE_COLORS[stage]}'>"
                     f"<title>{stage}: {duration:.3f} s</title></rect>")
    parts.append(f"<text x='60' y='{height - 6}' font-size='10'>0 s</text>"
                 f"<text x='{60 + width - 40:.0f}' y='{height - 6}' font-size='10'>{total:.2f} s</text></svg>")
    legend = " ".join(f"<span class='chip' style='background:{c}'>{s}</span>" for s, c in _STAGE_COLORS.items())
    return "".join(parts) + f"<div class='legend'>{legend}</div>"


def _bar_plot_svg(table: dict[str, dict[str, tuple[int, int]]], methods: list[str]) -> str:
    tasks = list(table)
    group = 28 * len(methods) + 20
    width, height, top = max(320, 60 + group * len(tasks)), 220, 20
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height + 60}' class='bars'>",
             f"<line x1='40' y1='{top + height}' x2='{width}' y2='{top + height}' stroke='#333'/>"]
    for tick in (0, 50, 100):
        y = top + height - tick / 100 * height
        parts.append(f"<text x='4' y='{y + 4:.0f}' font-size='10'>{tick}%</text>"
                     f"<line x1='36' y1='{y:.0f}' x2='{width}' y2='{y:.0f}' stroke='#ddd'/>")
    for t, task in enumerate(tasks):
        x0 = 50 + t * group
        for m, method in enumerate(methods):
            successes, trials = table[task].get(method, (0, 0))
            if not trials:
                continue
            rate = successes / trials
            bar = rate * height
            x = x0 + m * 28
            parts.append(f"<rect x='{x}' y='{top + height - bar:.1f}' width='22' height='{bar:.1f}' "
                         f"fill='{_METHOD_COLORS[m % len(_METHOD_COLORS)]}'><title>{html.escape(method)} on "
                         f"{html.escape(task)}: {successes}/{trials}</title></rect>"
                         f"<text x='{x}' y='{top + height - bar - 3:.1f}' font-size='9'>{successes}/{trials}</text>")
        parts.append(f"<text x='{x0}' y='{top + height + 16}' font-size='11'>{html.escape(task)}</text>")
    for m, method in enumerate(methods):
        parts.append(f"<rect x='{50 + m * 110}' y='{top + height + 30}' width='10' height='10' "
                     f"fill='{_METHOD_COLORS[m % len(_METHOD_COLORS)]}'/><text x='{64 + m * 110}' "
                     f"y='{top + height + 39}' font-size='11'>{html.escape(method)}</text>")
    return "".join(parts) + "</svg>"


def _markdown_html(text: str) -> str:
    """The Markdown tables and lines of :mod:`robopin.trials.results` as HTML (tables, paragraphs, code)."""
    import re

    def inline(cell: str) -> str:
        return re.sub(r"`(?P<code>[^`]*)`", r"<code>\g<code></code>", html.escape(cell))

    parts, rows = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            if not set(line) <= set("|-: "):
                rows.append([c.strip() for c in line.strip().strip("|").split("|")])
            continue
        if rows:
            head, *body = rows
            parts.append("<table><tr>" + "".join(f"<th>{inline(c)}</th>" for c in head) + "</tr>"
                         + "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in row) + "</tr>" for row in body)
                         + "</table>")
            rows = []
        if line.strip():
            parts.append(f"<p>{inline(line)}</p>")
    return "".join(parts)


def _judged_sections(trials: list[_Trial]) -> str:
    """Failures by the judge's reason, judge/stack agreement, sub-goal progress and stage timing."""
    from robopin.trials.results import agreement, failures_by_reason, subgoal_progress, timing_summary

    summaries = [t.summary for t in trials]
    timing = "".join(f"<h3>{html.escape(method)}</h3><pre>"
                     f"{html.escape(timing_summary([s for s in summaries if s.method == method]).table())}</pre>"
                     for method in dict.fromkeys(s.method for s in summaries))
    return (f"<h2>Failures by the judge's reason</h2><div id='failures'>{_markdown_html(failures_by_reason(summaries))}"
            f"</div><h2>Judge and stack agreement</h2><div id='agreement'>{_markdown_html(agreement(summaries))}</div>"
            f"<h2>Sub-goal progress (long-horizon)</h2><div id='subgoals'>"
            f"{_markdown_html(subgoal_progress(summaries))}</div><h2>Stage timing</h2>{timing}")


def _verdicts(summary: TrialSummary) -> str:
    """Who judged the trial and what the stack itself said (trials judged by robopin trial)."""
    judgement, stack = summary.extra.get("judgement") or {}, summary.extra.get("stack") or {}
    if not judgement:
        return ""
    text = f"judged by the {html.escape(str(judgement.get('judge', 'operator')))}"
    if judgement.get("source"):
        text += f" ({html.escape(str(judgement['source']))})"
    if judgement.get("note"):
        text += f": {html.escape(str(judgement['note']))}"
    if judgement.get("subgoals_total"):
        text += f" · sub-goals {judgement.get('subgoals_reached')}/{judgement['subgoals_total']}"
    if stack:
        said = "success" if stack.get("success") else f"failure: {stack.get('failure', '')}"
        if stack.get("world_success") is not None:
            said += "; world check " + ("success" if stack["world_success"] else "failure")
        text += f" · the stack said {html.escape(said)}"
    return f"<p class='judgement'>{text}</p>"


def _initial_views(trial: _Trial, base: Path) -> str:
    images = sorted((trial.folder / "views").glob("initial_*.png"))
    if not images:
        return ""
    figures = "".join(f"<figure><img src='{_href(path, base)}' alt='{path.stem}'/>"
                      f"<figcaption>{html.escape(path.stem.replace('initial_', 'before: '))}</figcaption></figure>"
                      for path in images)
    return f"<div class='views initial'>{figures}</div>"


def _load(root: Path) -> list[_Trial]:
    trials = []
    for folder in trial_folders(root):
        summary, steps = read_trial(folder)
        if summary is None:
            continue  # still running: nothing to judge yet
        trials.append(_Trial(folder, summary, steps))
    for folder in bag_folders(root):  # recorder bags of real sessions: the outcome as recorded
        trial = read_bag_trial(folder, root)
        trials.append(_Trial(folder, trial.summary, trial.steps, trial.images))
    if not trials:
        raise ReportError(f"no finished trials (folders with summary.json) and no recorder bags under {str(root)!r}")
    return trials


def build_report(root: str | Path, base: str | Path | None = None) -> tuple[str, dict[str, Any]]:
    """Return (HTML page, JSON-ready facts) for every finished trial under ``root``.

    ``base``: the folder the page will be written into (its image links are relative to it; default ``root``).
    """
    root = Path(root)
    base = Path(base) if base is not None else root
    trials = _load(root)
    methods = sorted({t.summary.method for t in trials})
    table: dict[str, dict[str, tuple[int, int]]] = {}
    for trial in trials:
        successes, count = table.setdefault(trial.summary.task, {}).get(trial.summary.method, (0, 0))
        table[trial.summary.task][trial.summary.method] = (successes + int(trial.summary.success), count + 1)
    facts: dict[str, Any] = {
        "methods": methods,
        "table": {task: {m: {"successes": s, "trials": n} for m, (s, n) in row.items()} for task, row in table.items()},
        "trials": [{**dataclasses.asdict(t.summary), "folder": str(t.folder.relative_to(root))} for t in trials],
    }
    head_cells = "".join(f"<th>{html.escape(m)}</th>" for m in methods)
    rows = []
    for task, row in table.items():
        cells = "".join(f"<td>{row[m][0]}/{row[m][1]}</td>" if m in row else "<td>–</td>" for m in methods)
        rows.append(f"<tr><th>{html.escape(task)}</th>{cells}</tr>")
    totals = "".join(
        f"<td>{sum(table[t][m][0] for t in table if m in table[t])}/"
        f"{sum(table[t][m][1] for t in table if m in table[t])}</td>" for m in methods)
    sections = []
    for trial in trials:
        s = trial.summary
        verdict = ("<span class='ok'>success</span>" if s.success
                   else f"<span class='fail'>failure: {html.escape(s.failure)}</span>")
        steps_html = []
        for step in trial.steps:
            views = "".join(f"<figure><img src='{uri}' alt='{html.escape(name)}'/><figcaption>{html.escape(name)}"
                            f"</figcaption></figure>" for name, uri in _drawn_views(trial, step, root, base))
            errors = "".join(f"<li>{html.escape(e)}</li>" for e in step.errors)
            steps_html.append(
                f"<div class='step'><h4>step {step.step}: {html.escape(step.instruction)}</h4>"
                f"<div class='views'>{views}</div>"
                f"<details open><summary>reasoning ({html.escape(step.model or 'model')})</summary>"
                f"<pre>{html.escape(step.raw_output)}</pre></details>"
                f"<p>planner: {html.escape(step.planner_status or '–')} in {step.planning_time_s:.3f} s; "
                f"execution: {html.escape(step.execution or '–')}</p>"
                + (f"<ul class='errors'>{errors}</ul>" if errors else "") + "</div>")
        sections.append(
            f"<section class='trial' id='{html.escape(s.trial_id)}'><h3>{html.escape(s.trial_id)} — "
            f"{html.escape(s.task)} / {html.escape(s.method)}: {verdict}</h3>"
            f"<p class='muted'>{html.escape(s.instruction)} · {s.steps} step(s) · {s.duration_s:.2f} s</p>"
            f"{_verdicts(s)}{_initial_views(trial, base)}"
            f"{_timeline_svg(trial.steps)}{''.join(steps_html)}</section>")
    judged = _judged_sections(trials)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>robopin trial report</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }} th, td {{ border: 1px solid #bbb; padding: 4px 10px; }}
.ok {{ color: #1a7f37; }} .fail {{ color: #b42318; }} .muted {{ color: #666; }}
.views {{ display: flex; flex-wrap: wrap; gap: 8px; }} figure {{ margin: 0; }} img {{ max-width: 420px; }}
pre {{ white-space: pre-wrap; background: #f6f6f6; padding: 6px; max-height: 16em; overflow: auto; }}
.chip {{ color: #fff; padding: 1px 6px; border-radius: 3px; font-size: 11px; }}
section.trial {{ border-top: 2px solid #ddd; }}
</style></head><body>
<h1>robopin trial report</h1>
<p class="muted">{len(trials)} trial(s), {len(table)} task(s), method(s): {html.escape(", ".join(methods))}</p>
<h2>Success per task (RoboPIN Table 6 format, from the judgements)</h2>
<table id="success-table"><tr><th>task</th>{head_cells}</tr>{''.join(rows)}<tr><th>all</th>{totals}</tr></table>
{_bar_plot_svg(table, methods)}
{judged}
<h2>Trials</h2>
{''.join(sections)}
</body></html>
"""
    return page, facts


def write_report(root: str | Path, output: str | Path | None = None) -> tuple[Path, Path]:
    """Write ``report.html`` and ``report.json`` (default: into ``root``); return both paths."""
    root = Path(root)
    html_path = Path(output) if output is not None else root / "report.html"
    page, facts = build_report(root, html_path.parent)
    html_path.parent.mkdir(parents=True, exist_ok=True)
    html_path.write_text(page, encoding="utf-8")
    json_path = html_path.with_suffix(".json")
    json_path.write_text(json.dumps(facts, indent=2), encoding="utf-8")
    return html_path, json_path
