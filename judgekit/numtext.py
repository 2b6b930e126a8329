"""Numbers as text, the same everywhere: tables in the terminal (:mod:`judgekit.reports`' renderers), the
pages' frames (:mod:`judgekit.figures`) and exported reports. Standard library only; the bottom layer."""

from __future__ import annotations

import math

__all__ = ["fmt", "interval_text"]


def fmt(x: float | None, spec: str = ".2f", missing: str = "undefined") -> str:
    """A number for display; ``missing`` where it is undefined (NaN / None)."""
    if x is None:
        return missing
    x = float(x)
    return format(x, spec) if math.isfinite(x) else missing


def interval_text(value: float | None, lo: float | None, hi: float | None, reason: str | None = None) -> str:
    """``0.71 [0.55, 0.83]``; ``undefined`` (with the reason, if given) where the value is not a number; an
    undefined bound shows as ``—``."""
    if value is None or not math.isfinite(float(value)):
        return "undefined" + (f" — {reason}" if reason else "")
    return f"{value:.2f} [{fmt(lo, missing='—')}, {fmt(hi, missing='—')}]"
