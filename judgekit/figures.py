"""Tables and figures of the report objects — pandas frames and plotly figures, no Streamlit.

Where this sits: :mod:`judgekit.reports` computes report objects; this module draws them. The dashboard
pages (through :mod:`judgekit.ui`), the exported HTML report and the Python API
(``report.to_frame()`` / ``report.figure()``, :mod:`judgekit.api`) all use these builders, so a phi
heatmap looks the same wherever it appears. It imports nothing of judgekit at run time (the report
types are for annotations only), so :mod:`judgekit.reports` can call it without an import cycle.

Frames come in two forms from one builder: ``formatted=True`` (the pages: numbers as display strings,
"undefined" where a statistic is undefined) and ``formatted=False`` (notebooks: numbers, NaN where
undefined). Untrusted names are escaped with :func:`html.escape` before they reach plotly, whose titles
understand a few HTML tags.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

if TYPE_CHECKING:  # pragma: no cover
    from judgekit import reports

OUTCOMES = ("pass", "fail")  # index 0 = pass, 1 = fail (stats.PASS / stats.FAIL; reports.OUTCOMES)


def fmt(x: float | None, spec: str = ".2f", missing: str = "undefined") -> str:
    """A number for display; ``missing`` where it is undefined (NaN / None)."""
    if x is None:
        return missing
    x = float(x)
    return format(x, spec) if math.isfinite(x) else missing


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
    return _heatmap(counts, [f"{ct.col} {o}" for o in OUTCOMES], f"{ct.source} — {ct.row} × {ct.col} — n = {t.n}",
                    rows=[f"{ct.row} {o}" for o in OUTCOMES], zrange=(0, max(1.0, float(counts.max()))),
                    text=text, colorscale="Blues", hovertemplate="%{y} · %{x}: %{text}<extra></extra>")


# --------------------------------------------------------------------------------------------- figures


def _heat_text(M: np.ndarray) -> list[list[str]]:
    return [[fmt(v, ".2f", "n/a") for v in row] for row in M]


def phi_heatmap(col: reports.PhiColumn, keys: Sequence[str], title: str, notes: dict[str, str]) -> go.Figure:
    """A phi matrix as a heatmap (−1…1, diverging). Undefined entries read "n/a" and their hover text
    says why (``notes``, from :func:`undefined_phi`)."""
    M = np.asarray(col.phi, dtype=float)
    hover = []
    for i, a in enumerate(keys):
        row = []
        for j, b in enumerate(keys):
            why = notes.get(a) or notes.get(b) or "not enough overlap"
            lo, hi = col.ci_low[i, j], col.ci_high[i, j]
            row.append(
                f"{a} × {b}: phi {fmt(M[i, j])} [{fmt(lo)}, {fmt(hi)}], n {int(col.n_matrix[i, j])}"
                if math.isfinite(M[i, j])
                else html.escape(f"{a} × {b}: {why}")
            )
        hover.append(row)
    return _heatmap(M, keys, title, colorscale="RdBu", reversescale=True, customdata=hover,
                    hovertemplate="%{customdata}<extra></extra>", colorbar={"title": "phi"})


def diff_heatmap(a: reports.PhiColumn, b: reports.PhiColumn, keys: Sequence[str], title: str) -> go.Figure:
    """phi(a) − phi(b) per criterion pair; "n/a" where either is undefined."""
    D = np.asarray(a.phi, float) - np.asarray(b.phi, float)
    return _heatmap(D, keys, title, colorscale="PuOr", hovertemplate="%{y} × %{x}: Δphi %{text}<extra></extra>",
                    colorbar={"title": "Δphi"})


def _heatmap(M: np.ndarray, keys: Sequence[str], title: str, *, rows: Sequence[str] | None = None,
             zrange: tuple[float, float] = (-1, 1), text: list[list[str]] | None = None, **trace) -> go.Figure:
    """The one heatmap builder: a matrix with its values written in the cells ("n/a" where undefined) —
    criterion × criterion on [-1, 1] by default, or ``rows`` × ``keys`` on ``zrange``."""
    fig = go.Figure(go.Heatmap(z=np.where(np.isfinite(M), M, np.nan), x=list(keys), y=list(rows or keys),
                               zmin=zrange[0], zmax=zrange[1], text=_heat_text(M) if text is None else text,
                               texttemplate="%{text}", **trace))
    fig.update_layout(title=html.escape(title), height=420, yaxis={"autorange": "reversed"},
                      margin={"l": 10, "r": 10, "t": 60, "b": 10})
    return fig


def phi_figure(report: reports.PhiReport, source: str | None = None) -> go.Figure:
    """One source's phi heatmap (``source``), or every source's side by side in one figure."""
    keys = report.criteria
    columns = [report.column(source)] if source else report.columns

    def title(c) -> str:
        return f"phi — {c.source} — {c.judge} — n = {c.n}"

    figs = [phi_heatmap(c, keys, title(c), c.criterion_notes) for c in columns]
    if len(figs) == 1:
        return figs[0]
    from plotly.subplots import make_subplots

    titles = [html.escape(f"{c.source} (n = {c.n})") for c in columns]
    fig = make_subplots(rows=1, cols=len(figs), subplot_titles=titles, horizontal_spacing=0.06)
    for i, f in enumerate(figs, start=1):
        trace = f.data[0]
        trace.update(showscale=i == len(figs))
        fig.add_trace(trace, row=1, col=i)
        fig.update_yaxes(autorange="reversed", showticklabels=i == 1, row=1, col=i)
    fig.update_layout(height=460, width=max(520, 420 * len(figs)), title="phi per source",
                      margin={"l": 10, "r": 10, "t": 80, "b": 10})
    return fig


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
    """The association audit as a table: the pair, ``phi [lo, hi]`` under each source (columns named by
    ``names``: report source key → display name), the verdict (real / induced by … / undecided / no
    human column) and the rule's note."""
    rows = []
    for a in report.audit:
        row = {"pair": f"{a.a} × {a.b}"}
        for key, (p, lo, hi) in a.values.items():
            row[names.get(key, key)] = f"{fmt(p)} [{fmt(lo)}, {fmt(hi)}]"
        verdict = a.verdict
        if a.induced_by:
            verdict = "induced by " + ", ".join(names.get(k, k) for k in a.induced_by)
        rows.append(row | {"verdict": verdict, "note": a.note})
    return pd.DataFrame(rows)


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


_COST_FIELDS = (
    ("calls", "{:,.0f}"),
    ("prompt_tokens", "{:,.0f}"),
    ("completion_tokens", "{:,.0f}"),
    ("cached_tokens", "{:,.0f}"),
    ("retries", "{:,.0f}"),
    ("failed_calls", "{:,.0f}"),
    ("latency_p50", "{:.3f} s"),
    ("latency_p95", "{:.3f} s"),
    ("wall_s", "{:.1f} s"),
    ("usd", "${:.4f}"),
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
    fig.update_layout(
        title="cost vs agreement with the human column",
        xaxis_title=x_label,
        yaxis_title="mean κ vs human column",
        height=420,
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
    )
    return fig, x_label


def agreement_frame(report: reports.AgreementReport, formatted: bool = True) -> pd.DataFrame:
    """Per criterion: n, accuracy, κ with CI, TPR/TNR, prevalence, AUC; for scale criteria mean |Δ|,
    weighted κ and Spearman. Unformatted, the CI is two columns and undefined values are NaN."""

    def num(x: Any, spec: str = ".2f", missing: str = "undefined") -> Any:
        return fmt(x, spec, missing) if formatted else float(x)

    rows = []
    for k, e in report.criteria.items():
        lo, hi = e["kappa_ci"]
        row = {"criterion": k, "n": e["n"], "accuracy": num(e["accuracy"]), "κ": num(e["kappa"])}
        row |= {"κ 95% CI": f"[{fmt(lo)}, {fmt(hi)}]"} if formatted else {"κ low": float(lo), "κ high": float(hi)}
        row |= {"TPR": num(e["tpr"]), "TNR": num(e["tnr"]), "prevalence of fail": num(e["prevalence"]),
                "AUC": num(e["auc"], ".2f", "no P(pass)")}
        if e["kind"] == "scale":
            row |= {
                "mean |Δ|": num(e["mean_abs_delta"]),
                "weighted κ": num(e["weighted_kappa"]),
                "Spearman": num(e["spearman"]),
            }
        rows.append(row)
    return pd.DataFrame(rows)


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


