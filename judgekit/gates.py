"""CI gates over a stored run: ``judgekit check`` — κ with the humans, induced associations, flips.

Where this sits: a CI job runs the judge (``judgekit run …``) and then ``judgekit check --run RUN``, which
calls :func:`check`; the exit status says whether every gate holds, the summary and the JUnit XML
(:func:`junit_xml`, one test case per criterion and gate) say which one failed and by how much. The
numbers are the reports' own: κ from :func:`judgekit.reports.agreement_for`, induced associations from
the association audit of :func:`judgekit.reports.phi_report`, flips from
:func:`judgekit.reports.compare_runs` — so ``judgekit check`` and ``judgekit report …`` never disagree.

The gates (thresholds from the command line, or a YAML file, or both — the command line wins):

``min_kappa``
    Per criterion, Cohen's κ of the run against the reference column (``--human``: the consensus, the
    default; ``--annotator NAME``: one annotator) must be ≥ X. With ``kappa_bound: lower`` the lower
    end of κ's 95 % interval must be — a stricter gate at small n. A κ that is undefined (no example
    scored by both, or either side constant so agreement is only by chance) **fails**, saying why: a gate
    that cannot be evaluated must not pass.
``max_induced``
    The number of criterion pairs whose audit verdict names the run in ``induced_by`` (an association the
    run shows and the reference column does not) must be ≤ N. One test case, listing the pairs. The
    audit compares the run, the reference column and the *other* runs given (``--audit-run RUN``, e.g.
    the split harness over the same answers, and the baseline): it blames a harness only when another
    harness reproduces the humans' reading, so without another run the gate could never fail and is
    refused.
``max_flip_rate``
    Per criterion, the share of examples scored by both this run and ``baseline`` (``--baseline RUN``:
    the run it replaces, e.g. the previous prompt or judge) whose pass/fail verdict differs — (fail→pass
    + pass→fail) / n — must be ≤ R. Without a baseline the gate is refused: against the humans the same
    number is 1 − accuracy, which ``min_kappa`` already gates. n = 0 fails (undefined).

A YAML file may also set thresholds per criterion (``criteria: {safety: {min_kappa: 0.8}}``; ``null``
turns a gate off for that criterion).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from sqlalchemy.orm import Session

from judgekit import noise, reports, stats
from judgekit.datasets import InputError, load_yaml, read_text

GateName = Literal["min_kappa", "max_induced", "max_flip_rate"]
KappaBound = Literal["estimate", "lower"]
PER_CRITERION: tuple[str, ...] = ("min_kappa", "max_flip_rate")
FILE_KEYS = ("min_kappa", "max_induced", "max_flip_rate", "baseline", "audit_runs", "kappa_bound", "criteria")


@dataclass(frozen=True)
class Gates:
    """Thresholds; ``None`` = that gate is off."""

    min_kappa: float | None = None
    max_induced: int | None = None
    max_flip_rate: float | None = None
    baseline: str | None = None
    kappa_bound: KappaBound = "estimate"
    criteria: dict[str, dict[str, float | None]] = field(default_factory=dict)
    audit_runs: tuple[str, ...] = ()

    def threshold(self, gate: str, criterion: str) -> float | None:
        own = self.criteria.get(criterion, {})
        return own[gate] if gate in own else getattr(self, gate)

    @property
    def empty(self) -> bool:
        return (self.min_kappa is None and self.max_induced is None and self.max_flip_rate is None
                and not any(v is not None for c in self.criteria.values() for v in c.values()))

    def with_overrides(self, **values: Any) -> Gates:
        """These gates with every non-None value in ``values`` replacing the file's."""
        return replace(self, **{k: v for k, v in values.items() if v is not None})


def _number(path, value: Any, key: str, line: int, lo: float, hi: float, integer: bool = False) -> float | int | None:
    if value is None:
        return None
    if not integer and isinstance(value, str) and _EXPONENT.fullmatch(value.strip()):
        value = float(value)  # YAML 1.1 reads 1e-1 (no dot before the e) as text; it is the number 0.1
    ok = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok or not lo <= value <= hi:
        kind = "a whole number" if integer else "a number"
        raise InputError(path, f"must be {kind} within {lo:g}..{hi:g}, not {value!r}", line=line, field=key)
    return int(value) if integer else float(value)


_EXPONENT = re.compile(r"[-+]?\d+(?:\.\d*)?[eE][-+]?\d+")
_RANGES = {"min_kappa": (-1.0, 1.0, False), "max_flip_rate": (0.0, 1.0, False), "max_induced": (0, 10**9, True)}


def load_gates(path: str | Path) -> Gates:
    """Thresholds from a YAML file (see the module docstring); one InputError line on any problem."""
    p = Path(path)
    doc = load_yaml(read_text(p), p)
    if not isinstance(doc, Mapping):
        raise InputError(p, "a gates file is a mapping of thresholds (min_kappa, max_induced, max_flip_rate, …)",
                         line=1)
    top = doc.get("__line__", 1)
    unknown = sorted(set(doc) - set(FILE_KEYS) - {"__line__"})
    if unknown:
        raise InputError(p, f"unknown key (expected {', '.join(FILE_KEYS)})", line=top, field=unknown[0])
    values: dict[str, Any] = {}
    for key, (lo, hi, integer) in _RANGES.items():
        values[key] = _number(p, doc.get(key), key, top, lo, hi, integer)
    baseline = doc.get("baseline")
    if baseline is not None and not (isinstance(baseline, str | int) and str(baseline).strip()):
        raise InputError(p, "must be a run name or id", line=top, field="baseline")
    audit_runs = doc.get("audit_runs") or []
    if not isinstance(audit_runs, list) or not all(isinstance(r, str | int) for r in audit_runs):
        raise InputError(p, "must be a list of run names or ids", line=top, field="audit_runs")
    bound = doc.get("kappa_bound", "estimate")
    if bound not in ("estimate", "lower"):
        raise InputError(p, f"must be estimate or lower, not {bound!r}", line=top, field="kappa_bound")
    per: dict[str, dict[str, float | None]] = {}
    crits = doc.get("criteria") or {}
    if not isinstance(crits, Mapping):
        raise InputError(p, "must map criterion keys to thresholds", line=top, field="criteria")
    for key, spec in crits.items():
        if key == "__line__":
            continue
        line = crits.get("__line__", top)
        if not isinstance(spec, Mapping):
            raise InputError(p, f"criterion {key!r}: give a mapping like {{min_kappa: 0.8}}", line=line,
                             field="criteria")
        line = spec.get("__line__", line)
        bad = sorted(set(spec) - set(PER_CRITERION) - {"__line__"})
        if bad:
            raise InputError(p, f"criterion {key!r}: unknown gate (per criterion: {', '.join(PER_CRITERION)})",
                             line=line, field=bad[0])
        per[str(key)] = {g: _number(p, spec[g], g, line, *_RANGES[g][:2]) for g in PER_CRITERION if g in spec}
    return Gates(values["min_kappa"], values["max_induced"], values["max_flip_rate"],
                 None if baseline is None else str(baseline), bound, per, tuple(str(r) for r in audit_runs))


@dataclass(frozen=True)
class GateResult:
    """One gate on one criterion (``criterion`` None for the run-wide induced-association gate)."""

    gate: GateName
    criterion: str | None
    ok: bool
    value: float | None  # NaN where undefined
    threshold: float
    message: str
    n: int | None = None

    def to_dict(self) -> dict:
        return {"gate": self.gate, "criterion": self.criterion, "ok": self.ok, "value": self.value,
                "threshold": self.threshold, "n": self.n, "message": self.message}


@dataclass(frozen=True)
class CheckReport:
    run: str
    reference: str | None
    baseline: str | None
    gates: Gates
    results: list[GateResult]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    @property
    def failed(self) -> list[GateResult]:
        return [r for r in self.results if not r.ok]

    def to_dict(self) -> dict:
        return {"run": self.run, "reference": self.reference, "baseline": self.baseline, "ok": self.ok,
                "failed": len(self.failed), "results": [r.to_dict() for r in self.results]}

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame([r.to_dict() for r in self.results],
                            columns=["gate", "criterion", "ok", "value", "threshold", "n", "message"])


def _f(x: float, spec: str = ".2f") -> str:
    return "undefined" if x is None or not math.isfinite(x) else format(x, spec)


def _kappa_results(rep: reports.AgreementReport, gates: Gates) -> list[GateResult]:
    out = []
    for key, e in rep.criteria.items():
        threshold = gates.threshold("min_kappa", key)
        if threshold is None:
            continue
        kappa, (lo, hi), n = e["kappa"], e["kappa_ci"], e["n"]
        value = lo if gates.kappa_bound == "lower" else kappa
        what = "κ's 95% lower bound" if gates.kappa_bound == "lower" else "κ"
        if not math.isfinite(value):
            if e.get("kappa_reason"):  # the agreement report's own words: which side is constant, or no overlap
                message = f"{e['kappa_reason']}; the gate cannot hold"
            elif n == 0:
                message = f"{what} undefined: no example is scored by both {rep.source} and {rep.human}; " \
                          "the gate cannot hold"
            else:
                message = f"{what} undefined: its interval is undefined at n = {n}; the gate cannot hold"
            out.append(GateResult("min_kappa", key, False, math.nan, threshold, message, n))
            continue
        ok = value >= threshold
        message = (f"κ {_f(kappa)} [{_f(lo)}, {_f(hi)}], n {n}: {what} {_f(value)} "
                   f"{'≥' if ok else '<'} {threshold:g}")
        out.append(GateResult("min_kappa", key, ok, float(value), threshold, message, n))
    return out


def _induced_result(s: Session, run: str, others: Sequence[str], annotator: str | None, threshold: int,
                    n_boot: int, seed: int) -> tuple[GateResult, str]:
    sources = reports.load_sources(s, [run, *others], human=annotator is None,
                                   annotators=[annotator] if annotator else [])
    rep = reports.phi_report(sources, n_boot=n_boot, seed=seed, noise_floor=noise.find_floor(s, sources))
    key = sources[0].key
    pairs = [f"{a.a} × {a.b}" for a in rep.audit if key in a.induced_by]
    open_pairs = [f"{a.a} × {a.b}" for a in rep.audit if a.verdict == "undecided"]
    listed = f": {', '.join(pairs)}" if pairs else ""
    if rep.audit and all(not math.isfinite(a.values.get(key, (math.nan,))[0]) for a in rep.audit):
        message = (f"the phi of {key} is undefined for every criterion pair ({len(rep.audit)}; a constant or "
                   "unscored column), so no pair can be blamed on it or cleared; the gate cannot hold")
        return GateResult("max_induced", None, False, math.nan, threshold, message, sources[0].n), key
    ok = len(pairs) <= threshold
    message = (f"{len(pairs)} criterion pair(s) with an association induced by {key} (the reference "
               f"{rep.human or 'column'} does not show it){listed}; {'≤' if ok else '>'} {threshold}")
    if open_pairs:
        shown = ", ".join(open_pairs[:5]) + (f" and {len(open_pairs) - 5} more" if len(open_pairs) > 5 else "")
        message += f"; {len(open_pairs)} pair(s) undecided, not counted: {shown}"
    return GateResult("max_induced", None, ok, float(len(pairs)), threshold, message, sources[0].n), key


def _flip_results(s: Session, run: str, baseline: str, gates: Gates) -> list[GateResult]:
    cmp = reports.compare_runs(s, baseline, run)
    out = []
    for key, f in cmp.flips.items():
        threshold = gates.threshold("max_flip_rate", key)
        if threshold is None:
            continue
        flips = f.fail_to_pass + f.pass_to_fail
        if f.n == 0:
            out.append(GateResult("max_flip_rate", key, False, math.nan, threshold,
                                  f"flip rate undefined: no example scored by both {cmp.a} and {cmp.b}", 0))
            continue
        rate = flips / f.n
        ok = rate <= threshold
        message = (f"{flips} of {f.n} verdicts differ from {cmp.a} ({f.fail_to_pass} fail→pass, "
                   f"{f.pass_to_fail} pass→fail): {rate:.1%} {'≤' if ok else '>'} {threshold:.1%}")
        out.append(GateResult("max_flip_rate", key, ok, rate, threshold, message, f.n))
    return out


def _wants(gates: Gates, gate: str) -> bool:
    return getattr(gates, gate) is not None or any(c.get(gate) is not None for c in gates.criteria.values())


def validate(gates: Gates) -> None:
    """Refuse gates that cannot be evaluated, before anything is opened or read."""
    if gates.empty:
        raise ValueError("no gate to check: give --min-kappa, --max-induced or --max-flip-rate (or --gates FILE)")
    if _wants(gates, "max_flip_rate") and not gates.baseline:
        raise ValueError("--max-flip-rate needs --baseline RUN: the flip rate is the share of examples whose "
                         "verdict differs from the baseline run's")


def check(s: Session, run: str | int, gates: Gates, *, annotator: str | None = None, n_boot: int = 1000,
          seed: int = 0) -> CheckReport:
    """Evaluate every gate that has a threshold on ``run`` (see the module docstring)."""
    validate(gates)
    stats.check_draws(n_boot)
    wants_flips = _wants(gates, "max_flip_rate")
    source = reports.load_run(s, run)
    results: list[GateResult] = []
    reference = None
    unknown = sorted(set(gates.criteria) - set(source.keys))
    if unknown:
        raise ValueError(f"gates name criterion {unknown[0]!r}, which is not in {source.key} "
                         f"({', '.join(source.keys)})")
    if _wants(gates, "min_kappa"):
        rep = reports.agreement_for(s, run, annotator=annotator)
        reference = rep.human
        results += _kappa_results(rep, gates)
    if gates.max_induced is not None:
        others = [r for r in dict.fromkeys([*gates.audit_runs, *([gates.baseline] if gates.baseline else [])])
                  if reports.load_run(s, r).key != source.key]
        if not others:
            raise ValueError("--max-induced needs another run for the audit to compare with (--audit-run RUN, "
                             "e.g. the split harness, or --baseline RUN): the audit names a harness as inducing "
                             "an association only when another harness matches the humans' reading")
        result, _ = _induced_result(s, run, others, annotator, gates.max_induced, n_boot, seed)
        results.append(result)
        reference = reference or ("human" if annotator is None else f"annotator:{annotator}")
    if wants_flips:
        results += _flip_results(s, run, str(gates.baseline), gates)
    return CheckReport(source.key, reference, gates.baseline, gates, results)


GATE_TITLES = {"min_kappa": "min κ", "max_induced": "induced pairs", "max_flip_rate": "flip rate"}


def render_check(rep: CheckReport) -> str:
    """The readable summary: one line per gate and criterion, failures marked, then the count."""
    head = f"judgekit check: {rep.run}"
    if rep.reference:
        head += f" vs {rep.reference}"
    if rep.baseline:
        head += f"; baseline run {rep.baseline}"
    lines = [head]
    width = max([len(r.criterion or "(all pairs)") for r in rep.results] + [9])
    for r in rep.results:
        mark = "ok  " if r.ok else "FAIL"
        lines.append(f"  {mark} {GATE_TITLES[r.gate]:<13} {r.criterion or '(all pairs)':<{width}}  {r.message}")
    failed = len(rep.failed)
    lines.append(f"{len(rep.results) - failed} of {len(rep.results)} gates hold"
                 + (f"; {failed} failed" if failed else ""))
    return "\n".join(lines)


def junit_xml(rep: CheckReport, timestamp: str | None = None) -> str:
    """JUnit XML: one test suite, one test case per criterion and gate (``classname`` = the gate)."""
    import xml.etree.ElementTree as ET

    suites = ET.Element("testsuites", name="judgekit check", tests=str(len(rep.results)),
                        failures=str(len(rep.failed)))
    suite = ET.SubElement(suites, "testsuite", name=f"judgekit check {rep.run}", tests=str(len(rep.results)),
                          failures=str(len(rep.failed)), errors="0", skipped="0")
    if timestamp:
        suite.set("timestamp", timestamp)
    props = ET.SubElement(suite, "properties")
    for name, value in (("run", rep.run), ("reference", rep.reference), ("baseline", rep.baseline)):
        if value:
            ET.SubElement(props, "property", name=name, value=str(value))
    for r in rep.results:
        case = ET.SubElement(suite, "testcase", classname=f"judgekit.check.{r.gate}",
                             name=r.criterion or "all criterion pairs", time="0")
        if not r.ok:
            failure = ET.SubElement(case, "failure", type=r.gate, message=r.message)
            failure.text = r.message
        else:
            ET.SubElement(case, "system-out").text = r.message
    for el in suites.iter():  # names and messages hold user text: no character XML 1.0 cannot carry
        el.attrib = {k: _xml_text(v) for k, v in el.attrib.items()}
        el.text = _xml_text(el.text) if el.text else el.text
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(text: str) -> str:
    """``text`` with every character XML 1.0 cannot hold (control characters, lone surrogates) as U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)
