"""A team server in real Chromium: `judgekit app --auth token` (as beyond loopback) and the OIDC sign-in
through a real local OpenID provider. One test per role: a viewer cannot label or delete, an annotator
labels under the signed-in name, an admin deletes a run. Screenshots at 1400 × 1000 go to tmp_path."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from judgekit import auth, labeling, store
from judgekit.labeling import SampleSpec
from tests.browser import chromium_page, free_port, judgekit_app
from tests.conftest import load_demo, simulated_runs
from tests.oidc_provider import OidcProvider

pytestmark = pytest.mark.browser
ROLES = {"vic": "viewer", "ana": "annotator", "ada": "admin"}


@pytest.fixture
def team(workspace, engine, db_url) -> dict[str, str]:
    """Demo (24 examples), two simulated runs, a label set of 3, and a team file: name → token."""
    simulated_runs(load_demo(engine, 24), db_url)
    with Session(engine) as s, s.begin():
        labeling.create_label_set(s, "team", dataset="demo", rubric="demo", spec=SampleSpec("random", size=3, seed=1))
    path = workspace / "team.toml"
    return {name: auth.add_member(path, name, role) for name, role in ROLES.items()}


@pytest.fixture
def server(team, db_url, tmp_path):
    with judgekit_app(db_url, tmp_path / "server.log", "--auth", "token") as base:
        yield base


def settle(page, text: str, timeout: float = 30_000) -> None:
    """Wait until ``text`` shows and the script run that drew it has finished."""
    from playwright.sync_api import expect

    expect(page.get_by_text(text).first).to_be_visible(timeout=timeout)
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', state="attached")


def sign_in(page, base: str, token: str, name: str) -> None:
    page.goto(base)
    settle(page, "This judgekit server is shared by a team")
    page.get_by_label("Access token", exact=True).fill(token)
    page.get_by_role("button", name="Sign in").click()
    settle(page, f"Signed in as {name} · {ROLES[name]}")


def nav(page) -> list[str]:
    """The page titles in the sidebar's navigation (each link's text ends with its title, after its icon)."""
    return [text.split("\n")[-1] for text in page.locator('[data-testid="stSidebarNav"] a').all_inner_texts()]


def assert_no_secret(tokens, content: str, log: Path, db_url: str) -> None:
    """No token (nor its hash) in the page's HTML, the server's log or the database file."""
    logged = log.read_text()
    for token in tokens:
        digest = auth.hash_token(token)
        assert token not in content and digest not in content
        assert token not in logged and digest not in logged
    if db_url.startswith("sqlite:///"):
        data = Path(db_url.removeprefix("sqlite:///")).read_bytes()
        assert not any(t.encode() in data or auth.hash_token(t).encode() in data for t in tokens)


def test_sign_in_screen_refuses_a_wrong_token(server, team, tmp_path, db_url):
    with chromium_page(1400, 1000) as page:
        page.goto(server)
        settle(page, "This judgekit server is shared by a team")
        page.screenshot(path=str(tmp_path / "signin.png"))
        assert nav(page) == []
        page.goto(f"{server}/crosstabs")  # a page's address does not get past the door
        settle(page, "This judgekit server is shared by a team")
        page.get_by_label("Access token", exact=True).fill("jk_" + secrets.token_urlsafe(32))
        page.get_by_role("button", name="Sign in").click()
        settle(page, "That token is not valid")
        page.screenshot(path=str(tmp_path / "signin_refused.png"))
        assert nav(page) == [] and "Delete a run" not in page.content()
        assert "Datasets" not in page.inner_text("body")
        assert_no_secret(team.values(), page.content(), tmp_path / "server.log", db_url)
    assert (tmp_path / "signin.png").stat().st_size > 5_000
    assert "a token sign-in failed" in (tmp_path / "server.log").read_text()


def test_a_fresh_servers_first_request_for_a_page_shows_no_data(server, tmp_path):
    """The first script run of a new server may run pages/crosstabs.py straight from its address, without
    app.py's gate (Streamlit's pages/ fallback): the page's own door keeps the data in."""
    with chromium_page(1400, 1000) as page:
        page.goto(f"{server}/crosstabs")
        settle(page, "This judgekit server is shared by a team")
        body = page.inner_text("body")
        assert "Cross-tabs" not in body and "answers_question" not in body
        assert page.locator('[data-testid="stDataFrame"]').count() == 0


def test_viewer_sees_analysis_but_cannot_label_or_delete(server, team, tmp_path, db_url, engine):
    with chromium_page(1400, 1000) as page:
        sign_in(page, server, team["vic"], "vic")
        settle(page, "Datasets")
        assert nav(page) == ["Workspace", "Run", "Cross-tabs", "Associations", "Examples", "Compare", "Agreement",
                             "Prompt A/B"]
        assert "Delete a run" not in page.inner_text("body")
        assert "Exception" not in page.inner_text("body")
        assert "Label needs the annotator role" in page.inner_text("body")  # a finding's link, not a crash
        page.screenshot(path=str(tmp_path / "viewer_workspace.png"))
        page.goto(f"{server}/label")  # a link to a page a viewer may not use: the door, then the refusal
        settle(page, "This judgekit server is shared by a team")
        page.get_by_label("Access token", exact=True).fill(team["vic"])
        page.get_by_role("button", name="Sign in").click()
        settle(page, "Label needs the annotator role; yours is viewer.")
        assert "Save & next" not in page.inner_text("body") and "Your name" not in page.inner_text("body")
        page.screenshot(path=str(tmp_path / "viewer_label_refused.png"))
        page.locator('[data-testid="stSidebarNav"] a', has_text="Run").click()
        settle(page, "Starting runs on this judge needs the annotator role; yours is viewer.")
        assert page.get_by_role("button", name="Start").is_disabled()
        page.get_by_role("button", name="Start").scroll_into_view_if_needed()
        page.screenshot(path=str(tmp_path / "viewer_run.png"))
        page.locator('[data-testid="stSidebarNav"] a', has_text="Cross-tabs").click()
        settle(page, "Cross-tabs")
        assert_no_secret(team.values(), page.content(), tmp_path / "server.log", db_url)
    with Session(engine) as s:
        assert s.scalar(select(store.Label.id).join(store.Annotator).where(store.Annotator.name == "vic")) is None
        assert len(store.list_runs(s)) == 2


def test_annotator_labels_under_the_signed_in_name(server, team, workspace, tmp_path, db_url, engine):
    with Session(engine) as s:
        info = labeling.get_label_set(s, "team")
        first = labeling.label_set_items(s, info.id)[0]
    with chromium_page(1400, 1000) as page:
        sign_in(page, server, team["ana"], "ana")
        assert nav(page) == ["Workspace", "Run", "Cross-tabs", "Associations", "Examples", "Compare", "Agreement",
                             "Label", "Prompt A/B"]
        settle(page, "Datasets")
        assert "Delete a run" not in page.inner_text("body")
        page.locator('[data-testid="stSidebarNav"] a', has_text="Label").click()
        settle(page, "Labeling as ana")
        assert page.get_by_label("Your name").count() == 0  # no typed name: the sign-in is the name
        settle(page, "Item 1 of 3")
        page.screenshot(path=str(tmp_path / "annotator_label_top.png"))
        passes = page.locator('button[data-testid^="stBaseButton"]', has_text="Pass").filter(visible=True)
        for i in range(6):
            passes.nth(i).click()
            settle(page, f"{i + 1} of 6 criteria chosen")
        page.screenshot(path=str(tmp_path / "annotator_label.png"))
        page.get_by_role("button", name="Save & next").click()
        settle(page, "Item 2 of 3 · 1 of 3 labelled by ana")
        assert_no_secret(team.values(), page.content(), tmp_path / "server.log", db_url)
        auth.remove_member(workspace / "team.toml", "ana")  # removed: signed out at the next click
        page.locator('[data-testid="stSidebarNav"] a', has_text="Cross-tabs").click()
        settle(page, "This judgekit server is shared by a team")
        assert nav(page) == [] and "Signed in as" not in page.inner_text("body")
    with Session(engine) as s:
        rows = s.execute(select(store.Annotator.name, store.Label.example_id, store.Label.value)
                         .join(store.Annotator, store.Annotator.id == store.Label.annotator_id)
                         .where(store.Annotator.name != labeling.REFERENCE_ANNOTATOR)).all()
    assert sorted(rows) == [("ana", first, 1)] * 6


def test_admin_deletes_a_run(server, team, tmp_path, db_url, engine):
    with chromium_page(1400, 1000) as page:
        sign_in(page, server, team["ada"], "ada")
        assert "Data" in nav(page) and "Label" in nav(page)
        settle(page, "Delete a run")
        page.get_by_text("Delete a run").click()
        page.get_by_text("Yes, delete run").click()
        settle(page, "Yes, delete run")
        page.screenshot(path=str(tmp_path / "admin_delete.png"))
        page.get_by_role("button", name="Delete", exact=True).click()
        settle(page, "Datasets")
        page.wait_for_function("() => !document.body.innerText.includes('harness-single-call')")
    with Session(engine) as s:
        assert [r["name"] for r in store.list_runs(s)] == ["harness-split-call"]


# --------------------------------------------------------------------------------------------- OIDC


def oidc_secrets(path: Path, provider: OidcProvider, app_port: int) -> Path:
    path.write_text(
        "[auth]\n"
        f'redirect_uri = "http://127.0.0.1:{app_port}/oauth2callback"\n'
        f'cookie_secret = "{secrets.token_hex(32)}"\n'
        f'client_id = "{provider.client_id}"\n'
        f'client_secret = "{provider.client_secret}"\n'
        f'server_metadata_url = "{provider.metadata_url}"\n'
    )
    return path


@pytest.mark.parametrize("email", ["carol@example.com", "mallory@elsewhere.test"])
def test_oidc_sign_in_through_a_real_provider(email, workspace, engine, db_url, tmp_path):
    load_demo(engine, 12)
    auth.add_member(workspace / "team.toml", "carol", "annotator", email="Carol@Example.com", token=False)
    port = free_port()
    client_secret = secrets.token_urlsafe(24)
    with OidcProvider(client_id="judgekit-test", client_secret=client_secret, email=email) as provider:
        secrets_file = oidc_secrets(tmp_path / "secrets.toml", provider, port)
        with judgekit_app(db_url, tmp_path / "server.log", "--auth", "oidc", "--secrets", str(secrets_file),
                          port=port) as base, chromium_page(1400, 1000) as page:
            page.goto(base)
            settle(page, "Sign in with your organisation's account")
            page.screenshot(path=str(tmp_path / "oidc_signin.png"))
            assert nav(page) == []
            page.get_by_role("button", name="Sign in with your organisation's account").click()
            if email.startswith("carol"):
                settle(page, "Signed in as carol · annotator")
                assert "Label" in nav(page) and "Data" not in nav(page)
                settle(page, "Datasets")
                page.screenshot(path=str(tmp_path / "oidc_member.png"))
            else:
                settle(page, "mallory@elsewhere.test is not a member of this judgekit team")
                assert nav(page) == []
                page.screenshot(path=str(tmp_path / "oidc_not_member.png"))
        log = (tmp_path / "server.log").read_text()
    (authorize,) = provider.seen("/authorize")
    assert authorize["client_id"] == "judgekit-test"
    assert authorize["redirect_uri"] == f"http://127.0.0.1:{port}/oauth2callback"
    assert authorize["response_type"] == "code" and "openid" in authorize["scope"].split()
    assert authorize["state"] and authorize["nonce"] and authorize["code_challenge_method"] == "S256"
    (token_request,) = provider.seen("/token")
    assert token_request["grant_type"] == "authorization_code" and token_request["code_verifier"]
    assert client_secret not in log
