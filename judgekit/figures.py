"""Tables and figures of the report objects — pandas frames and plotly figures, no Streamlit.

Where this sits: :mod:`judgekit.reports` computes report objects (and never imports this module); this
module, the layer above, draws them. The dashboard pages (through :mod:`judgekit.ui`), the exported HTML
report (:func:`render_html`) and the Python API (``report.to_frame()`` / ``report.figure()``,
:mod:`judgekit.api`) all use these builders, so a phi heatmap looks the same wherever it appears:
:func:`matrix_figure` is the one builder of criterion × criterion matrices (the page's side-by-side
matrices with the audit drawn on them, a single source's heatmap, a difference).

Frames come in two forms from one builder: ``formatted=True`` (the pages: numbers as display strings,
"undefined" where a statistic is undefined) and ``formatted=False`` (notebooks: numbers, NaN where
undefined). Untrusted names are escaped with :func:`html.escape` before they reach plotly, whose titles
understand a few HTML tags.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from judgekit import reports
from judgekit.numtext import fmt, interval_text

OUTCOMES = ("pass", "fail")  # index 0 = pass, 1 = fail (stats.PASS / stats.FAIL; reports.OUTCOMES)


def crosstab_table(ct: reports.CrosstabReport, formatted: bool = True) -> pd.DataFrame:
    """Seed 003's layout: rows = row criterion pass/fail, cols = column criterion pass/fail, the row total
    (in parentheses when formatted), and the column criterion's failure rate within each row."""
    t = ct.table
    rows = []
    for i, outcome in enumerate(OUTCOMES):
        total, rate = int(t.row_totals[i]), float(t.col_fail_rate[i])
        rows.append(
            {
                "": f"{ct.row} {outcome}",
                f"{ct.col} pass": int(t.counts[i, 0]),
                f"{ct.col} fail": int(t.counts[i, 1]),
                "row total": f"({total})" if formatted else total,
                f"{ct.col} fails": fmt(rate, ".1%", "undefined (empty row)") if formatted else rate,
            }
        )
    return pd.DataFrame(rows).set_index("")


def crosstab_figure(ct: reports.CrosstabReport) -> go.Figure:
    """The 2×2 counts as a heatmap, each cell's count and share of its row written in it."""
    t = ct.table
    counts = np.asarray(t.counts, dtype=float)
    totals = np.asarray(t.row_totals, dtype=float)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        share = counts / totals
    text = [[f"{int(c)} ({fmt(r, '.0%', 'n/a')})" for c, r in zip(crow, srow, strict=True)]
            for crow, srow in zip(counts, share, strict=True)]
    fig = go.Figure(_heat_trace(counts, text, x=[f"{ct.col} {o}" for o in OUTCOMES],
                                y=[f"{ct.row} {o}" for o in OUTCOMES], zmin=0, zmax=max(1.0, float(counts.max())),
                                colorscale="Blues", hovertemplate="%{y} · %{x}: %{text}<extra></extra>"))
    fig.update_layout(title=html.escape(f"{ct.source} — {ct.row} × {ct.col} — n = {t.n}"), height=420,
                      yaxis={"autorange": "reversed"}, margin={"l": 10, "r": 10, "t": 60, "b": 10})
    return fig


# --------------------------------------------------------------------------------------------- figures


def _heat_trace(M: np.ndarray, text: list[list[str]], **trace) -> go.Heatmap:
    """A heatmap trace of ``M`` (NaN: undefined, drawn blank) with ``text`` written in its cells."""
    return go.Heatmap(z=np.where(np.isfinite(M), M, np.nan), text=text, texttemplate="%{text}", **trace)


CONTENT_PX = 940
"""Width of the main column at a 1400-px window with the menu open: matrices are laid out for it."""
MIN_CELL_PX = 38  # a cell this wide still holds "−0.42" at 13 px
MAX_CELL_PX = 64  # a lone matrix does not need to fill the page
CHAR_PX = 7.2  # one character of a 12-px axis label
COLORBAR_PX = 80


class Panel(NamedTuple):
    """One criterion × criterion matrix of a figure: its title, values (NaN = undefined), the hover text
    of every cell (HTML-escaped), the page's key of its source (for clicks) and the report's (for the
    audit's verdicts), and ``text`` to write in the cells (default: the values, "n/a" where undefined)."""

    title: str
    values: np.ndarray
    hover: list[list[str]]
    key: str = ""
    source: str = ""


class Mark(NamedTuple):
    """How an audit verdict is drawn on a cell: a plotly marker symbol and the legend's words."""

    symbol: str
    legend: str
    outline: bool = False  # a cell-sized outline (else a small marker in the cell's corner)


VERDICT_MARKS: dict[str, Mark] = {
    "real": Mark("square-open", "real: the humans see it too", outline=True),
    "induced": Mark("triangle-up", "induced by this harness (the humans do not see it)"),
    "distorted": Mark("diamond", "size distorted by this harness"),
    "undecided": Mark("circle-open", "undecided: the human column cannot tell yet"),
}
"""Audit verdicts drawn on the matrices; a verdict word not listed here gets a star and its own word."""
UNDRAWN_VERDICTS = frozenset({"none", "no human column"})


def verdict_marks(audit: Sequence[reports.AuditRow], panels: Sequence[Panel], human: str | None
                  ) -> dict[str, list[tuple[int, str]]]:
    """Which panel shows which verdict on which pair: verdict word → [(panel index, "a|b")].

    A verdict that names harnesses (*induced* or *distorted* by …) is drawn on those harnesses' matrices;
    *real* on every matrix (it is a fact about the answers); any other verdict on the human column's matrix.
    ``none`` and ``no human column`` are not drawn."""
    index = {p.source: i for i, p in enumerate(panels)}
    out: dict[str, list[tuple[int, str]]] = {}
    for row in audit:
        if row.verdict in UNDRAWN_VERDICTS:
            continue
        blamed = row.induced_by or row.distorted_by
        if blamed:
            where = [index[k] for k in blamed if k in index]
        elif row.verdict == "real":
            where = list(range(len(panels)))
        else:
            where = [index[human]] if human in index else []
        out.setdefault(row.verdict, []).extend((i, f"{row.a}|{row.b}") for i in where)
    return out


def _label_px(keys: Sequence[str]) -> float:
    """Width of the row labels ("2 · criterion")."""
    return CHAR_PX * (max((len(k) for k in keys), default=4) + 4) + 10


def matrix_layout(n_panels: int, keys: Sequence[str]) -> tuple[int, int]:
    """(panels per row, cell size in px) for lower-triangle matrices of ``keys`` in :data:`CONTENT_PX`:
    as many panels side by side as keep a cell at least :data:`MIN_CELL_PX` wide."""
    cells = max(1, len(keys) - 1)
    room = CONTENT_PX - _label_px(keys) - COLORBAR_PX
    per_row = max(1, min(n_panels, int(room // (cells * MIN_CELL_PX + 16))))
    return per_row, int(min(MAX_CELL_PX, (room / per_row - 16) / cells))


def matrix_width(n_panels: int, keys: Sequence[str]) -> int:
    """The width in px at which :func:`matrix_figure`'s cells come out square (a page stretches the figure
    to its column, about :data:`CONTENT_PX`; a standalone figure — the exported report — is given this)."""
    per_row, cell = matrix_layout(n_panels, keys)
    return int(_label_px(keys) + per_row * (max(1, len(keys) - 1) * cell + 16) + COLORBAR_PX + 20)


def _lines(items: Sequence[str], width: int) -> list[str]:
    """``items`` joined with wide gaps into lines of at most ``width`` characters (an item is never split)."""
    lines = [""]
    for item in items:
        if lines[-1] and len(lines[-1]) + 4 + len(item) > width:
            lines.append(item)
        else:
            lines[-1] = f"{lines[-1]}    {item}" if lines[-1] else item
    return lines


def _wrap(text: str, width: int) -> str:
    """``text`` escaped for a plotly title and broken into lines of at most ``width`` characters."""
    words, lines, line = str(text).split(" "), [], ""
    for w in words:
        while len(w) > width:
            if line:
                lines.append(line)
                line = ""
            lines.append(w[:width])
            w = w[width:]
        if line and len(line) + 1 + len(w) > width:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}".strip()
    lines.append(line)
    return "<br>".join(html.escape(x) for x in lines)


def matrix_figure(
    panels: Sequence[Panel], keys: Sequence[str], *, marks: dict[str, list[tuple[int, str]]] | None = None,
    colorbar: str = "phi", colorscale: str = "RdBu_r", clickable: bool = False,
) -> go.Figure:
    """Criterion × criterion matrices on one shared colour scale (−1…1), side by side and wrapped into rows
    that keep every cell legible (:func:`matrix_layout`). Each matrix is its lower triangle — every pair
    once: rows are criteria 2…k, columns 1…k−1, numbered; the row labels carry the full names and a
    line under the figure decodes the column numbers. Values are written in the cells ("n/a" where
    undefined); ``marks`` (verdict → cells, :func:`verdict_marks`) draw the audit on the cells with a
    legend. With ``clickable`` every cell is a point whose ``customdata`` is ``[panel key, a, b]``, for
    ``st.plotly_chart(on_select=…)`` (plotly heatmaps themselves cannot be selected)."""
    from plotly.subplots import make_subplots

    keys = list(keys)
    k = len(keys)
    per_row, cell = matrix_layout(len(panels), keys)
    n_rows = -(-len(panels) // per_row)
    # rows: criteria 2…k; columns: 1…k−1 (a single criterion: its one diagonal cell)
    rows_keys, cols_keys = (keys[1:], keys[:-1]) if k > 1 else (keys, keys)
    shift = 1 if k > 1 else 0
    lower = [(i, j) for i in range(len(rows_keys)) for j in range(len(cols_keys)) if j <= i or k == 1]
    # the column numbers decoded under the figure, wrapped to its width
    legend = _lines(["columns:", *(f"{j + 1} · {key}" for j, key in enumerate(cols_keys))],
                    int((matrix_width(len(panels), keys) - 20) / CHAR_PX))
    bottom = 60 + 16 * (len(legend) - 1)
    row_px = cell * len(rows_keys)
    gap_px = 80  # between rows of panels: the column numbers above, the next titles below
    plot_px = n_rows * row_px + (n_rows - 1) * gap_px
    height = plot_px + 90 + bottom
    fig = make_subplots(rows=n_rows, cols=per_row, horizontal_spacing=0.02,
                        vertical_spacing=gap_px / plot_px if n_rows > 1 else 0.0,
                        subplot_titles=[_wrap(p.title, max(14, int(cell * len(cols_keys) / 7))) for p in panels])
    for n, p in enumerate(panels):
        r, c = n // per_row + 1, n % per_row + 1
        M = np.asarray(p.values, dtype=float)
        sub = np.full((len(rows_keys), len(cols_keys)), np.nan)
        text = [["" for _ in cols_keys] for _ in rows_keys]
        hover = [["" for _ in cols_keys] for _ in rows_keys]
        for i, j in lower:
            sub[i, j] = M[i + shift, j]
            text[i][j] = fmt(sub[i, j], ".2f", "n/a")
            hover[i][j] = p.hover[i + shift][j]
        fig.add_trace(_heat_trace(sub, text, textfont={"size": 13}, coloraxis="coloraxis", customdata=hover,
                                  hovertemplate="%{customdata}<extra></extra>", xgap=2, ygap=2), row=r, col=c)
        if clickable and lower:
            fig.add_trace(go.Scatter(
                x=[j for _, j in lower], y=[i for i, _ in lower], mode="markers", name="open in Cross-tabs",
                marker={"symbol": "square", "size": cell - 2, "opacity": 0.0},
                customdata=[[p.key, cols_keys[j], rows_keys[i]] for i, j in lower],
                text=[hover[i][j] for i, j in lower], hovertemplate="%{text}<extra></extra>", showlegend=False),
                row=r, col=c)
        fig.update_xaxes(showgrid=False, zeroline=False, tickfont={"size": 12}, tickvals=list(range(len(cols_keys))),
                         ticktext=[str(j + 1) for j in range(len(cols_keys))], range=[-0.5, len(cols_keys) - 0.5],
                         fixedrange=True, row=r, col=c)
        fig.update_yaxes(showgrid=False, zeroline=False, tickfont={"size": 12}, tickvals=list(range(len(rows_keys))),
                         ticktext=[html.escape(f"{i + 1 + shift} · {key}") for i, key in enumerate(rows_keys)],
                         showticklabels=c == 1, range=[len(rows_keys) - 0.5, -0.5], fixedrange=True, row=r, col=c)
    position = {key: i for i, key in enumerate(keys)}
    for verdict, cells in (marks or {}).items():
        mark = VERDICT_MARKS.get(verdict, Mark("star", verdict))
        by_panel: dict[int, list[tuple[int, int]]] = {}
        for n, pair in cells:
            a, b = pair.split("|")
            if a in position and b in position and k > 1:
                hi, lo = sorted((position[a], position[b]), reverse=True)
                by_panel.setdefault(n, []).append((hi - 1, lo))
        for first, (n, where) in enumerate(sorted(by_panel.items())):
            dx, dy = (0.0, 0.0) if mark.outline else (0.3, -0.28)  # small marks: the cell's top-right corner
            if mark.outline:
                marker = {"symbol": mark.symbol, "size": cell - 6, "color": "#111", "line": {"width": 3}}
            else:
                marker = {"symbol": mark.symbol, "size": 10, "color": "#111", "line": {"width": 1.5, "color": "#111"}}
            fig.add_trace(go.Scatter(x=[j + dx for _, j in where], y=[i + dy for i, _ in where], mode="markers",
                                     marker=marker, name=html.escape(mark.legend), legendgroup=verdict,
                                     showlegend=first == 0, hoverinfo="skip"),
                          row=n // per_row + 1, col=n % per_row + 1)
    fig.update_layout(
        height=height,
        showlegend=bool(marks),
        coloraxis={"colorscale": colorscale, "cmin": -1, "cmax": 1,
                   "colorbar": {"title": {"text": html.escape(colorbar)}, "len": min(1.0, 360 / height),
                                "yanchor": "top", "y": 1}},
        plot_bgcolor="rgba(0,0,0,0)",
        margin={"l": 10, "r": 10, "t": 90, "b": bottom},
        legend={"orientation": "h", "x": 0, "y": 1, "yanchor": "top", "yref": "container", "font": {"size": 13}},
        hoverlabel={"align": "left"},
    )
    fig.add_annotation(text="<br>".join(html.escape(x) for x in legend), showarrow=False, align="left",
                       xref="paper", yref="paper", x=0, y=0, yshift=-42, xanchor="left", yanchor="top",
                       font={"size": 12})
    return fig


def _cell_hover(a: str, b: str, col: reports.PhiColumn, i: int, j: int, notes: dict[str, str], extra: str = "") -> str:
    """Hover text of one phi cell: the pair, phi with its CI and n, or why it is undefined (escaped)."""
    p = col.phi[i, j]
    if math.isfinite(p):
        text = (f"{a} × {b}: phi {fmt(p)} [{fmt(col.ci_low[i, j])}, {fmt(col.ci_high[i, j])}], "
                f"n {int(col.n_matrix[i, j]):,}")
    else:
        text = f"{a} × {b}: {notes.get(a) or notes.get(b) or 'phi undefined: not enough answers scored on both'}"
    return html.escape(text + extra)


def phi_panels(report: reports.PhiReport, keys: Sequence[str], names: Sequence[str], notes: Sequence[dict[str, str]],
               *, diff_from_human: bool = False) -> list[Panel]:
    """One panel per source of ``report`` (``keys``: the page's source keys, ``names``: display names), the
    human column first. With ``diff_from_human`` every other panel shows phi(source) − phi(human)."""
    crit = report.criteria
    order = sorted(range(len(report.columns)), key=lambda n: report.columns[n].source != report.human)
    human = next((c for c in report.columns if c.source == report.human), None)
    verdicts = {(a.a, a.b): a for a in report.audit}
    panels = []
    for n in order:
        col, note = report.columns[n], notes[n]
        M = np.asarray(col.phi, dtype=float)
        title = f"{names[n]} · n = {col.n:,}"
        diff = diff_from_human and human is not None and col is not human
        if diff:
            M = M - np.asarray(human.phi, dtype=float)
            title = f"{names[n]} − human · n = {col.n:,}"
        hover = []
        for i, a in enumerate(crit):
            row = []
            for j, b in enumerate(crit):
                v = verdicts.get((b, a)) or verdicts.get((a, b))
                extra = ""
                if diff and math.isfinite(M[i, j]):
                    extra = f"; {fmt(M[i, j], '+.2f')} from the human column"
                if v is not None and v.verdict not in UNDRAWN_VERDICTS:
                    extra += f"; audit: {reports.audit_verdict_text(v)}"
                row.append(_cell_hover(a, b, col, i, j, note, extra))
            hover.append(row)
        panels.append(Panel(title, M, hover, key=keys[n], source=col.source))
    return panels


def diff_heatmap(a: reports.PhiColumn, b: reports.PhiColumn, keys: Sequence[str], title: str) -> go.Figure:
    """phi(a) − phi(b) per criterion pair, one matrix; "n/a" where either is undefined."""
    D = np.asarray(a.phi, float) - np.asarray(b.phi, float)
    hover = [[html.escape(f"{x} × {y}: Δphi {fmt(D[i, j], '+.2f', 'undefined')}") for j, y in enumerate(keys)]
             for i, x in enumerate(keys)]
    return matrix_figure([Panel(title, D, hover)], keys, colorbar="Δphi", colorscale="PuOr")


PHI_TITLE = "phi — {source} — {judge} — n = {n}"
"""Title of one source's phi heatmap (the exported report and ``PhiReport.figure(source)``)."""


def phi_heatmap(col: reports.PhiColumn, keys: Sequence[str], title: str, notes: dict[str, str]) -> go.Figure:
    """One source's phi matrix (:func:`matrix_figure`; −1…1, diverging). Undefined entries read "n/a" and
    their hover text says why (``notes``, from :func:`judgekit.reports.undefined_phi_notes`)."""
    hover = [[_cell_hover(a, b, col, i, j, notes) for j, b in enumerate(keys)] for i, a in enumerate(keys)]
    return matrix_figure([Panel(title, np.asarray(col.phi, dtype=float), hover, source=col.source)], keys)


def phi_figure(report: reports.PhiReport, source: str | None = None) -> go.Figure:
    """One source's phi heatmap (``source``), or every source's side by side on one colour scale."""
    if source:
        c = report.column(source)
        return phi_heatmap(c, report.criteria, PHI_TITLE.format(source=c.source, judge=c.judge, n=c.n),
                           c.criterion_notes)
    sources = [c.source for c in report.columns]
    panels = phi_panels(report, sources, sources, [c.criterion_notes for c in report.columns])
    return matrix_figure(panels, report.criteria)


def phi_frame(report: reports.PhiReport) -> pd.DataFrame:
    """One row per source and criterion pair: phi, its CI and n (NaN where undefined), and the audit's
    verdict for the pair."""
    verdicts = {(a.a, a.b): (a.verdict, ", ".join(a.induced_by)) for a in report.audit}
    keys = report.criteria
    rows = []
    for c in report.columns:
        for i in range(len(keys)):
            for j in range(i + 1, len(keys)):
                verdict, induced = verdicts.get((keys[i], keys[j]), ("", ""))
                rows.append({"source": c.source, "a": keys[i], "b": keys[j], "phi": float(c.phi[i, j]),
                             "ci_low": float(c.ci_low[i, j]), "ci_high": float(c.ci_high[i, j]),
                             "n": int(c.n_matrix[i, j]), "verdict": verdict, "induced_by": induced})
    return pd.DataFrame(rows, columns=["source", "a", "b", "phi", "ci_low", "ci_high", "n", "verdict", "induced_by"])


def audit_frame(report: reports.PhiReport, names: dict[str, str]) -> pd.DataFrame:
    """The association audit as a table: the pair, ``phi [lo, hi]`` under each source ("undefined" where it
    has none; columns named by ``names``: report source key → display name), the verdict with whom it
    blames (real / induced by … / distorted by … / none / undecided / no human column), the evidence in
    words, for an undecided pair how many more labels would decide it, and -- with repeat runs -- the pair's
    noise floor (a shift within it blames no harness)."""
    rows = []
    for a in report.audit:
        row = {"pair": f"{a.a} × {a.b}"}
        for key, v in a.values.items():
            row[names.get(key, key)] = reports.phi_with_interval(v)
        if report.noise_floor is not None:
            row["noise floor ±"] = fmt(a.noise_floor, ".2f", missing="undefined")
        lm = a.label_more
        rows.append(row | {
            "verdict": with_run_names(reports.audit_verdict_text(a), names),
            "evidence": with_run_names(a.note, names),
            "label next": f"about {lm.k} more" + ("" if lm.feasible else " (more than are unlabelled)") if lm else "",
        })
    return pd.DataFrame(rows)


def with_run_names(text: str, names: dict[str, str]) -> str:
    """``text`` with every run's source key (``run:NAME``) replaced by its display name -- only run keys:
    "human" is also a word of the sentences."""
    for key in sorted((k for k in names if k.startswith("run:")), key=len, reverse=True):  # run:a-1 before run:a
        text = text.replace(key, names[key])
    return text


def audit_summary(report: reports.PhiReport, names: dict[str, str]) -> str:
    """One sentence: how many pairs got each verdict, blamed harnesses by display name."""
    counts: dict[str, int] = {}
    for a in report.audit:
        text = with_run_names(reports.audit_verdict_text(a), names)
        counts[text] = counts.get(text, 0) + 1
    order = ("real", "distorted", "induced", "none", "undecided", "no human column")
    ranked = sorted(counts.items(), key=lambda kv: (next((i for i, w in enumerate(order) if kv[0].startswith(w)),
                                                         9), kv[0]))
    return "; ".join(f"{n} {text}" for text, n in ranked)


def flips_frame(cmp: reports.CompareReport, formatted: bool = True) -> pd.DataFrame:
    """Per criterion: n, failures under A and B, the flips each way, and the exact McNemar p."""
    rows = []
    for k, f in cmp.flips.items():
        p = f.mcnemar_p if f.n else math.nan
        rows.append({"criterion": k, "n": f.n, "A fail": f.a_fail, "B fail": f.b_fail,
                     "fail→pass": f.fail_to_pass, "pass→fail": f.pass_to_fail,
                     "McNemar p": fmt(p, ".3g") if formatted else float(p)})
    return pd.DataFrame(rows, columns=["criterion", "n", "A fail", "B fail", "fail→pass", "pass→fail", "McNemar p"])


def annotator_frames(aa: reports.AnnotatorAgreement) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Krippendorff's α per criterion, and Cohen's κ (weighted κ for scale criteria) per annotator pair."""
    alpha = pd.DataFrame(
        [
            {
                "criterion": k,
                "kind": e["kind"],
                "Krippendorff α": fmt(e["alpha"]),
                "n (examples)": e["n_units"],
            }
            for k, e in aa.criteria.items()
        ]
    )
    pairs = pd.DataFrame(
        [
            {
                "criterion": k,
                "annotator A": p["a"],
                "annotator B": p["b"],
                "n": p["n"],
                "κ": fmt(p["kappa"]),
                "weighted κ": fmt(p["weighted_kappa"]) if "weighted_kappa" in p else "binary: see κ",
            }
            for k, e in aa.criteria.items()
            for p in e["pairs"]
        ]
    )
    return alpha, pairs


COUNT, SECONDS, USD = "{:,.0f}", "{:,.2f} s", "${:,.4f}"
"""One format per kind of number on every page: counts, seconds, money (rates: :func:`fmt` with ``.1%``)."""

_COST_FIELDS = (
    ("calls", COUNT),
    ("prompt_tokens", COUNT),
    ("completion_tokens", COUNT),
    ("cached_tokens", COUNT),
    ("retries", COUNT),
    ("failed_calls", COUNT),
    ("latency_p50", SECONDS),
    ("latency_p95", SECONDS),
    ("wall_s", SECONDS),
    ("usd", USD),
)


def cost_frame(cmp: reports.CompareReport) -> pd.DataFrame:
    """The two runs' cost side by side, one row per measure ("unknown" where it was not recorded)."""

    def cell(x: Any, pattern: str) -> str:
        if x is None or (isinstance(x, float) and not math.isfinite(x)):
            return "unknown"
        return pattern.format(x)

    return pd.DataFrame(
        {
            "": [f for f, _ in _COST_FIELDS],
            "A": [cell(getattr(cmp.cost[0], f), p) for f, p in _COST_FIELDS],
            "B": [cell(getattr(cmp.cost[1], f), p) for f, p in _COST_FIELDS],
        }
    )


def attribution_figure(cmp: reports.CompareReport, names: tuple[str, str]) -> go.Figure:
    """Failures attributed to each criterion, one stacked bar per run."""
    fig = go.Figure()
    runs = [html.escape(n) for n in names]
    for k in cmp.attribution[0]:
        counts = [cmp.attribution[0][k], cmp.attribution[1].get(k, 0)]
        fig.add_bar(name=k, x=runs, y=counts, text=counts, textposition="inside")
    fig.update_layout(
        barmode="stack",
        title="failures attributed to each criterion",
        yaxis_title="failed verdicts",
        height=420,
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
    )
    return fig


def cost_vs_agreement_figure(frame: pd.DataFrame) -> tuple[go.Figure, str]:
    """Scatter of cost (USD when every run has a positive known price, else tokens) against the mean κ
    with the human column, one marker per run coloured by harness. Returns the figure and the x label."""
    usd = frame["usd"]
    use_usd = bool(len(frame)) and usd.notna().all() and (usd.astype(float) > 0).all()
    x_col, x_label = ("usd", "cost (USD)") if use_usd else ("tokens", "cost (prompt + completion tokens)")
    fig = go.Figure()
    for harness, part in frame.groupby("harness", sort=False):
        fig.add_scatter(
            x=part[x_col],
            y=part["mean_kappa"],
            mode="markers+text",
            name=html.escape(str(harness)),
            text=[html.escape(str(r)) for r in part["run"]],
            textposition="top center",
            customdata=[html.escape(str(j)) for j in part["judge"]],
            hovertemplate="%{text}<br>%{customdata}<br>x %{x}<br>mean κ %{y:.2f}<extra></extra>",
            marker={"size": 12},
        )
    kappas = pd.to_numeric(frame["mean_kappa"], errors="coerce") if len(frame) else pd.Series(dtype=float)
    low = min(0.0, float(kappas.min()) - 0.05) if kappas.notna().any() else 0.0
    fig.update_layout(
        title="cost vs agreement with the human column",
        xaxis={"title": x_label, "rangemode": "tozero"},
        # both axes from 0 (κ down to its lowest value if negative): small differences are not blown up
        yaxis={"title": "mean κ vs human column", "range": [low, 1.0]},
        height=460,
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
        # below the plot: a long harness spec in a side legend would squeeze the plot to a sliver
        legend={"orientation": "h", "x": 0, "y": -0.2, "yanchor": "top", "title": {"text": "harness"}},
    )
    return fig, x_label


def agreement_frame(report: reports.AgreementReport, formatted: bool = True) -> pd.DataFrame:
    """Per criterion: n, accuracy and κ each with its 95 % interval ("undefined" where κ has none — the
    reason is in :func:`kappa_notes`), TPR/TNR, prevalence of fail, AUC; for scale criteria mean |Δ|,
    weighted κ and Spearman. Unformatted, each interval is two columns and undefined values are NaN.

    Formatted (the pages), a column nobody has a value in is left out — AUC when no run recorded P(pass),
    the scale columns when every criterion is binary — and a binary criterion reads "—" in them."""

    def num(x: Any, spec: str = ".2f", missing: str = "undefined") -> Any:
        return fmt(x, spec, missing) if formatted else float(x)

    entries = report.criteria.values()
    show_auc = not formatted or any(math.isfinite(e["auc"]) for e in entries)
    show_scale = any(e["kind"] == "scale" for e in entries)
    not_scale = "—" if formatted else math.nan
    rows = []
    for k, e in report.criteria.items():
        row: dict[str, Any] = {"criterion": k, "n": e["n"]}
        if formatted:
            row |= {"accuracy [95% CI]": interval_text(e["accuracy"], *e["accuracy_ci"]),
                    "κ [95% CI]": interval_text(e["kappa"], *e["kappa_ci"])}
        else:
            (alo, ahi), (klo, khi) = e["accuracy_ci"], e["kappa_ci"]
            row |= {"accuracy": float(e["accuracy"]), "accuracy low": float(alo), "accuracy high": float(ahi),
                    "κ": float(e["kappa"]), "κ low": float(klo), "κ high": float(khi)}
        row |= {"TPR": num(e["tpr"]), "TNR": num(e["tnr"]), "prevalence of fail": num(e["prevalence"])}
        if show_auc:
            row["AUC"] = num(e["auc"], ".2f", "—")
        if show_scale:
            scale = e["kind"] == "scale"
            row |= {
                "mean |Δ|": num(e["mean_abs_delta"]) if scale else not_scale,
                "weighted κ": num(e["weighted_kappa"]) if scale else not_scale,
                "Spearman": num(e["spearman"]) if scale else not_scale,
            }
        rows.append(row)
    return pd.DataFrame(rows)


def kappa_notes(report: reports.AgreementReport) -> list[str]:
    """Why κ is undefined for some criteria, one sentence each."""
    return [e["kappa_reason"] for e in report.criteria.values() if e.get("kappa_reason")]


def pooled_frame(report: reports.AgreementReport) -> pd.DataFrame:
    """Macro κ, micro κ and accuracy pooled over criteria, each with its 95 % interval."""
    p = report.pooled or {}
    what = (
        ("macro κ", "macro_kappa", "mean of the per-criterion κ (each criterion counts the same)"),
        ("micro κ", "micro_kappa", "κ of all criteria's verdicts in one table (each verdict counts the same)"),
        ("accuracy", "accuracy", "share of all verdicts that agree with the humans"),
    )
    return pd.DataFrame(
        [
            {"pooled": label, "value [95% CI]": interval_text(**p[key]) if key in p else "undefined",
             "what it means": meaning}
            for label, key, meaning in what
        ]
    )


def kappa_figure(report: reports.AgreementReport, title: str) -> go.Figure:
    """κ per criterion with its 95% CI as error bars."""
    keys = list(report.criteria)
    k = [report.criteria[c]["kappa"] for c in keys]
    lo = [report.criteria[c]["kappa_ci"][0] for c in keys]
    hi = [report.criteria[c]["kappa_ci"][1] for c in keys]
    fig = go.Figure(
        go.Bar(
            x=keys,
            y=k,
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [h - v for h, v in zip(hi, k, strict=True)],
                "arrayminus": [v - lw for v, lw in zip(k, lo, strict=True)],
            },
        )
    )
    fig.update_layout(
        title=html.escape(title),
        yaxis_title="Cohen's κ",
        yaxis_range=[-0.2, 1],
        height=360,
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
    )
    return fig




# --------------------------------------------------------------------------------------------- the exported page


def report_figures(report: reports.Report) -> list[go.Figure]:
    """The figures of the exported HTML page: each source's phi heatmap, then the failures attributed to each
    criterion under the first run and every run compared with it."""
    figs = []
    for c in report.phi.columns:
        fig = phi_figure(report.phi, c.source)
        fig.update_layout(width=matrix_width(1, report.phi.criteria))  # square cells, side by side
        figs.append(fig)
    if report.compares:
        first = report.compares[0]
        fig = go.Figure()
        fig.add_bar(name=_esc(first.a), x=list(first.attribution[0]), y=list(first.attribution[0].values()))
        for cmp in report.compares:
            fig.add_bar(name=_esc(cmp.b), x=list(cmp.attribution[1]), y=list(cmp.attribution[1].values()))
        fig.update_layout(title="failures attributed to each criterion", barmode="group", height=400)
        figs.append(fig)
    return figs


def _esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


_CSS = """
body{font-family:system-ui,sans-serif;margin:2rem;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}td,th{border:1px solid #ccc;padding:.25rem .5rem;
font-size:.9rem;vertical-align:top}th{background:#f3f3f3}caption{caption-side:bottom;text-align:left;
font-size:.85rem;color:#555;padding-top:.3rem}.figs{display:flex;flex-wrap:wrap;gap:1rem}
"""


def render_html(report: reports.Report) -> str:
    """The exported report (:func:`judgekit.reports.build_report`) as a self-contained HTML page: plotly.js
    inlined once, the figures of :func:`report_figures`, then the tables of
    :func:`judgekit.reports.report_tables` (the Markdown export's tables); every user-supplied string
    escaped."""
    import plotly.io as pio

    parts = [
        "<!DOCTYPE html>",
        "<html><head><meta charset='utf-8'>",
        f"<title>judgekit report — {_esc(report.dataset)}</title><style>{_CSS}</style></head><body>",
        f"<h1>judgekit report — dataset {_esc(report.dataset)}</h1>",
    ]
    parts += [f"<p class='note'>{_esc(n)}</p>" for n in report.notes]
    parts.append("<h2>Phi matrices</h2><div class='figs'>")
    for i, fig in enumerate(report_figures(report)):
        parts.append(pio.to_html(fig, include_plotlyjs="inline" if i == 0 else False, full_html=False))
    parts.append("</div>")
    for title, header, rows, caption in reports.report_tables(report):
        parts.append(f"<h2>{_esc(title)}</h2><table>")
        if caption:
            parts.append(f"<caption>{_esc(caption)}</caption>")
        parts.append("<tr>" + "".join(f"<th>{_esc(h)}</th>" for h in header) + "</tr>")
        parts += ["<tr>" + "".join(f"<td>{_esc(v)}</td>" for v in row) + "</tr>" for row in rows]
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)
