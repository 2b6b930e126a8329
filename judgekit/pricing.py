"""What judge calls cost: the price list (built-in list prices, overridden by ``<home>/prices.yaml``) and
the one set of rules that turns tokens into USD — free judges cost nothing, an imported run keeps the cost
its tool recorded, an unknown model has no price (``None`` with the reason, never 0).

Where this sits: above :mod:`judgekit.config`, below both the runner (which prices calls as they finish)
and the reports (which price whole runs), so neither reaches into the other for a price.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from judgekit import config

__all__ = ["DEFAULT_PRICES", "FREE_JUDGE_KINDS", "PRICES_FILE", "Price", "imported_cost", "load_prices",
           "price_calls", "totals_cost"]


class Price(NamedTuple):
    """USD per one million tokens."""

    input: float
    cached_input: float
    output: float


DEFAULT_PRICES: dict[str, Price] = {
    # Published list prices (USD / 1M tokens) at the time of writing; override in <home>/prices.yaml.
    "gpt-4o": Price(2.50, 1.25, 10.00),
    "gpt-4o-mini": Price(0.15, 0.075, 0.60),
    "gpt-4.1": Price(2.00, 0.50, 8.00),
    "gpt-4.1-mini": Price(0.40, 0.10, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.025, 0.40),
}
FREE_JUDGE_KINDS = frozenset({"simulated", "local", "imported"})
MAX_TOKENS_PER_CALL = 2**31 - 1  # a call's token count fits the 32-bit columns (PostgreSQL); none comes near
PRICES_FILE = "prices.yaml"


def load_prices(path: str | Path | None = None) -> dict[str, Price]:
    """The price table: built-in defaults overlaid with ``prices.yaml`` in the workspace home if present.

    File format (USD per 1M tokens; ``cached_input`` defaults to ``input``)::

        gpt-4o-mini: {input: 0.15, cached_input: 0.075, output: 0.60}
        my-vllm-model: {input: 0, output: 0}
    """
    import yaml

    prices = dict(DEFAULT_PRICES)
    path = Path(path) if path else config.home() / PRICES_FILE
    if not path.is_file():
        return prices
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: invalid YAML ({e.__class__.__name__})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected a mapping of model name → {{input, cached_input, output}}")
    for model, entry in doc.items():
        try:
            inp = float(entry["input"])
            prices[str(model)] = Price(inp, float(entry.get("cached_input", inp)), float(entry["output"]))
        except (TypeError, KeyError, ValueError, AttributeError):
            raise ValueError(
                f"{path}: field {model!r}: needs numeric input and output "
                "(USD per 1M tokens; cached_input optional)"
            ) from None
    return prices


def _price_for(model: str | None, prices: dict[str, Price]) -> Price | None:
    """Exact name, else the longest table name the model extends (``gpt-4o-2024-08-06``, ``x/gpt-4o``)."""
    if not model:
        return None
    name = model.split("/")[-1]
    for candidate in (model, name):
        if candidate in prices:
            return prices[candidate]
    for key in sorted(prices, key=len, reverse=True):
        if name.startswith(key + "-"):
            return prices[key]
    return None


def price_calls(
    model: str | None, prompt: int, cached: int, completion: int, prices: dict[str, Price] | None = None
) -> float | None:
    """USD for token totals; cached prompt tokens are billed at the cached rate. ``None`` if unknown model."""
    price = _price_for(model, load_prices() if prices is None else prices)
    if price is None:
        return None
    cached = min(cached or 0, prompt or 0)
    uncached = (prompt or 0) - cached
    return (uncached * price.input + cached * price.cached_input + (completion or 0) * price.output) / 1e6


def imported_cost(
    totals: dict, model: str | None, prompt: int, cached: int, completion: int, prices: dict[str, Price] | None
) -> tuple[float | None, str | None]:
    """(USD, note) of an imported run with calls: the money its tool recorded (``totals["usd"]``), else
    its tokens at the list price of the model the tool named; None when neither is known."""
    if totals.get("usd") is not None:
        return float(totals["usd"]), "imported run: cost as the tool recorded it"
    usd = price_calls(model, prompt, cached, completion, prices)
    if usd is None:
        return None, f"imported run: the tool recorded tokens but no cost, and model {model!r} has no price"
    return usd, "imported run: tokens priced at the model's list price"


def totals_cost(
    totals: dict, judge_kind: str | None, model: str | None, prices: dict[str, Price] | None = None
) -> tuple[float | None, str | None]:
    """What a run's totals (``run.totals`` / :func:`judgekit.store.run_totals`) cost in USD, and a note where
    that is not the price list's figure: an imported run's own cost when its tool recorded one; nothing for
    the free judges (simulated, local); ``None`` with the reason when the model has no price."""
    calls = int(totals.get("calls") or 0)
    prompt, cached = int(totals.get("prompt_tokens") or 0), int(totals.get("cached_tokens") or 0)
    completion = int(totals.get("completion_tokens") or 0)
    if judge_kind == "imported" and calls:
        return imported_cost(totals, model, prompt, cached, completion, prices)
    if judge_kind in FREE_JUDGE_KINDS:
        return 0.0, "imported run: no calls recorded" if judge_kind == "imported" and not calls else None
    usd = price_calls(model, prompt, cached, completion, prices)
    if usd is None:
        return None, f"no price for model {model!r}: add it to {config.home() / PRICES_FILE}"
    return usd, None
