"""The association audit, the pooled agreement and the ``decide`` strategy in a real browser (Debian's
Chromium, 1400 × 1000): what a user reads on the Associations, Agreement and Label pages."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from judgekit import labeling, reports
from tests.browser import chromium_page, fill_field, goto, streamlit_server, wait_for_app
from tests.conftest import labelled_pilot

pytestmark = pytest.mark.browser


def test_audit_pooled_agreement_and_decide_in_the_browser(engine, db_url, tmp_path):
    single, split, sources = labelled_pilot(engine, db_url, 300, 80)
    audit = reports.phi_report(sources)
    verdicts = {reports.audit_verdict_text(a) for a in audit.audit}
    assert any(v.startswith("induced by run:") for v in verdicts), verdicts

    with streamlit_server(db_url, tmp_path / "streamlit.log") as base, chromium_page(1400, 1000) as page:
        page.set_default_timeout(90_000)  # the audit's first render on a busy 2-core machine
        page.goto(base)
        page.get_by_role("heading", name="Workspace").wait_for(timeout=120_000)  # first start on a busy machine
        wait_for_app(page)

        goto(page, "Associations", "Associations")
        heading = page.get_by_role("heading", name="Association audit")
        heading.wait_for()
        page.get_by_text("The evidence in words, pair by pair").wait_for()
        wait_for_app(page)
        heading.evaluate("h => h.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(1500)  # let the scrolled-to tables paint
        page.screenshot(path=tmp_path / "associations-audit.png")
        words = page.get_by_text("The evidence in words, pair by pair")
        words.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(500)
        page.screenshot(path=tmp_path / "associations-evidence.png")
        body = page.locator("[data-testid='stMain']").inner_text()
        assert "answers_question × cites_source — " in body and "over 80 labelled answers" in body
        assert f"induced by run {single}" in body  # the verdict summary, runs by display name
        assert "Benjamini" in body and "reference harness (the least-conditioned run): run harness-split-call" in body

        goto(page, "Agreement", "Agreement")
        pooled = page.get_by_text("Pooled over criteria")
        pooled.wait_for()
        wait_for_app(page)
        pooled.evaluate("p => p.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(1500)
        page.screenshot(path=tmp_path / "agreement-pooled.png")
        body = page.locator("[data-testid='stMain']").inner_text()
        assert "Pooled over criteria — 6 criteria with a defined κ, 80 examples" in body

        goto(page, "Label", "Label")
        page.get_by_test_id("stRadioGroup").get_by_text("Label sets", exact=True).click()
        wait_for_app(page)
        fill_field(page, page.get_by_label("Name", exact=True), "decide-1")
        strategy = page.get_by_test_id("stRadioGroup").filter(has_text="answers that would decide")
        strategy.get_by_text("decide", exact=True).click()
        wait_for_app(page)
        page.get_by_role("button", name="Create label set").click()
        page.get_by_text("Created decide-1").wait_for()
        page.get_by_text("Created decide-1").evaluate("p => p.scrollIntoView({block: 'center'})")
        page.screenshot(path=tmp_path / "label-decide.png")
        assert page.locator("[data-testid='stException']").count() == 0

    with Session(engine) as s:
        info = labeling.get_label_set(s, "decide-1")
        assert info.strategy["kind"] == "decide" and info.size == 60
    for name in ("associations-audit", "associations-evidence", "agreement-pooled", "label-decide"):
        assert (tmp_path / f"{name}.png").stat().st_size > 10_000
