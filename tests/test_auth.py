"""Sign-in rules, the team file and its CLI, the OIDC set-up check, and `judgekit app`'s bind rules
(a real launcher process: refused beyond loopback without sign-in, served with it)."""

from __future__ import annotations

import ast
import inspect
import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from judgekit import auth, config, signin
from judgekit.auth import LOCAL, Action, Forbidden, Identity, Role, SetupError
from tests.browser import free_port
from tests.test_security import listening_addresses

ROOT = Path(__file__).resolve().parents[1]


def team_with(tmp_path: Path, *members: tuple[str, str]) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "team.toml"
    return path, {name: auth.add_member(path, name, role) for name, role in members}


def oidc_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "secrets.toml"
    path.write_text(body)
    return path


GOOD_OIDC = """[auth]
redirect_uri = "https://judge.example.com/oauth2callback"
cookie_secret = "c0okie-secret-c0okie-secret-1234"
client_id = "judgekit"
client_secret = "CLIENT-SECRET-VALUE-xyz"
server_metadata_url = "https://id.example.com/.well-known/openid-configuration"
"""


# --------------------------------------------------------------------------------------------- rules


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("", False), (None, False), ("192.168.1.20", False),
    ("judge.example.com", False), ("unix:///tmp/jk.sock", False),
])
def test_loopback_is_this_machine_only(host, loopback):
    assert auth.is_loopback(host) is loopback


def test_sign_in_methods_follow_the_numbered_rules(tmp_path):
    empty = auth.Team(tmp_path / "team.toml")
    path, _ = team_with(tmp_path, ("ana", "annotator"))
    tokens = auth.load_team(path)
    oidc = auth.oidc_config([oidc_file(tmp_path, GOOD_OIDC)])
    # 1–2: loopback needs nobody to sign in, whatever is configured
    assert auth.sign_in_methods("127.0.0.1", "auto", tokens, oidc) == frozenset()
    assert auth.sign_in_methods("localhost", "none", empty, None) == frozenset()
    # 3: beyond loopback, every configured method; nothing configured is refused
    assert auth.sign_in_methods("0.0.0.0", "auto", tokens, None) == {"token"}
    assert auth.sign_in_methods("0.0.0.0", "auto", empty, oidc) == {"oidc"}
    assert auth.sign_in_methods("0.0.0.0", "auto", tokens, oidc) == {"token", "oidc"}
    with pytest.raises(SetupError, match="serves beyond this machine, so judgekit requires sign-in"):
        auth.sign_in_methods("0.0.0.0", "auto", empty, None)
    with pytest.raises(SetupError, match="--auth none is refused for 0.0.0.0"):
        auth.sign_in_methods("0.0.0.0", "none", tokens, oidc)
    # 4: an explicit method must be configured, and then applies on loopback too
    assert auth.sign_in_methods("127.0.0.1", "token", tokens, None) == {"token"}
    with pytest.raises(SetupError, match="no member of .* has a token"):
        auth.sign_in_methods("127.0.0.1", "token", empty, oidc)
    with pytest.raises(SetupError, match="--auth oidc: no \\[auth\\] section"):
        auth.sign_in_methods("0.0.0.0", "oidc", tokens, None)
    with pytest.raises(SetupError, match="--auth must be one of"):
        auth.sign_in_methods("127.0.0.1", "maybe", empty, None)


def test_roles_and_what_each_may_do():
    viewer, annotator, admin = (Identity("x", Role(r), "token") for r in ("viewer", "annotator", "admin"))
    allowed = {who.role: {a for a in Action if who.can(a)} for who in (viewer, annotator, admin)}
    assert allowed == {
        Role.VIEWER: set(),
        Role.ANNOTATOR: {Action.LABEL, Action.RUN_FREE},
        Role.ADMIN: set(Action),
    }
    assert {a for a in Action if LOCAL.can(a)} == set(Action)  # loopback, no sign-in: as before
    with pytest.raises(Forbidden, match="not allowed to delete runs: x's role is annotator, and it needs admin"):
        annotator.require(Action.DELETE, "delete runs")


def test_a_signed_in_person_labels_only_as_themselves():
    ana = Identity("ana", Role.ANNOTATOR, "oidc")
    assert ana.annotator(None) == "ana" and ana.annotator(" ana ") == "ana"
    with pytest.raises(Forbidden, match="signed in as ana: cannot save labels as 'bo'"):
        ana.annotator("bo")
    assert LOCAL.annotator(" kim ") == "kim"  # loopback: the typed name, as before
    with pytest.raises(ValueError, match="need an annotator name"):
        LOCAL.annotator("  ")


@pytest.mark.parametrize(("kind", "base_url", "key_env", "free"), [
    ("simulated", None, None, True),
    ("simulated", "http://127.0.0.1:8765/v1", None, True),
    ("local", "http://localhost:8766/v1", None, True),
    ("local", "http://[::1]:8766/v1", None, True),
    ("local", "http://gpu-box.internal:8000/v1", None, False),  # someone's vLLM: not ours to spend
    ("simulated", "http://127.0.0.1:8765/v1", "OPENAI_API_KEY", False),  # a key is sent: may bill
    ("openai", "http://127.0.0.1:4000/v1", None, False),  # e.g. a LiteLLM proxy in front of a paid API
    ("openai", "https://api.openai.com/v1", "OPENAI_API_KEY", False),
    ("local", None, None, False),
    ("local", "http://[::1/v1", None, False),  # not a URL
])
def test_paid_means_any_judge_but_the_simulated_or_bundled_one_here(kind, base_url, key_env, free):
    assert auth.is_free_judge(kind, base_url, key_env) is free
    assert auth.run_action(kind, base_url, key_env) == (Action.RUN_FREE if free else Action.RUN_PAID)


# --------------------------------------------------------------------------------------------- team file


def test_team_file_holds_hashes_only_and_tokens_match_exactly(tmp_path):
    path, tokens = team_with(tmp_path, ("ana", "annotator"), ("ada", "admin"))
    text = path.read_text()
    assert all(t not in text for t in tokens.values())
    assert all(auth.hash_token(t) in text for t in tokens.values())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    team = auth.load_team(path)
    assert team.by_token(tokens["ana"]).name == "ana" and team.by_token(tokens["ada"]).role == Role.ADMIN
    assert team.by_token(f"  {tokens['ana']}\n").name == "ana"
    for wrong in ("", " ", tokens["ana"][:-1], tokens["ana"] + "x", tokens["ana"].upper(), "x" * 10_000,
                  auth.hash_token(tokens["ana"])):  # the stored hash is not a token either
        assert team.by_token(wrong) is None
    new = auth.add_member(path, "ana", "viewer", replace=True)  # a new token ends the old one
    team = auth.load_team(path)
    assert team.by_token(tokens["ana"]) is None and team.by_token(new).role == Role.VIEWER


@pytest.mark.parametrize(("body", "message"), [
    ('[[member]]\nname = "ana"\nrole = "owner"\n', "member 1: role must be one of viewer, annotator, admin"),
    ('[[member]]\nname = "reference"\nrole = "admin"\n', "member 1: the name 'reference' is reserved"),
    ('[[member]]\nname = "a"\nrole = "admin"\n[[member]]\nname = "a"\nrole = "viewer"\n', "member 2: name a is listed twice"),
    ('[[member]]\nname = "a"\nrole = "admin"\ntoken = "jk_x"\n', "member 1: unknown field 'token'"),
    ('[[member]]\nname = "a"\nrole = "admin"\ntoken_sha256 = "abc"\n', "member 1: token_sha256 must be 64 hex digits"),
    ('[[member]]\nname = ""\nrole = "admin"\n', "member 1: name must be 1–200 printable characters"),
    ('[[member]]\nname = "a\\u0007"\nrole = "admin"\n', "member 1: name must be 1–200 printable characters"),
    ('[[member]]\nname = "a"\nrole = "admin"\nemail = "x@y"\n[[member]]\nname = "b"\nrole = "admin"\nemail = "X@Y"\n',
     "member 2: email x@y is listed twice"),
    ("[members]\n", "unknown section 'members'"),
    ("[oidc]\ndomains = \"example.com\"\n", "[oidc]: domains must be a list"),
    ("name = \n", "not valid TOML"),
])
def test_a_bad_team_file_is_one_line_naming_file_member_and_field(tmp_path, body, message):
    path = tmp_path / "team.toml"
    path.write_text(body)
    with pytest.raises(SetupError) as e:
        auth.load_team(path)
    assert str(e.value).startswith(str(path)) and message in str(e.value) and "\n" not in str(e.value)


def test_team_cli_prints_the_token_once_and_lists_no_secret(cli, tmp_path):
    path = tmp_path / "team.toml"
    added = cli("team", "add", "ana", "--role", "annotator", "--team-file", path)
    assert added.exit_code == 0, added.output
    token = added.stdout.strip()
    assert token.startswith("jk_") and len(token) > 40 and "\n" not in token  # alone on stdout
    assert "shown this once" in added.stderr and token not in added.stderr
    assert auth.load_team(path).by_token(token).name == "ana"
    oidc_only = cli("team", "add", "bo", "--role", "admin", "--email", "Bo@Example.com", "--no-token",
                    "--team-file", path)
    assert oidc_only.exit_code == 0 and oidc_only.stdout == ""
    listed = cli("team", "list", "--json", "--team-file", path)
    assert json.loads(listed.stdout)["members"] == [
        {"name": "ana", "role": "annotator", "token": True, "email": None},
        {"name": "bo", "role": "admin", "token": False, "email": "bo@example.com"},
    ]
    assert token not in listed.stdout and auth.hash_token(token) not in listed.stdout
    again = cli("team", "add", "ana", "--role", "admin", "--team-file", path)
    assert again.exit_code == 2 and "ana is already a member" in again.stderr and "--replace" in again.stderr
    bad_role = cli("team", "add", "cy", "--role", "owner", "--team-file", path)
    assert bad_role.exit_code == 2
    assert cli("team", "remove", "ana", "--team-file", path).exit_code == 0
    assert auth.load_team(path).by_token(token) is None
    gone = cli("team", "remove", "ana", "--team-file", path)
    assert gone.exit_code == 2 and "'ana' is not a member" in gone.stderr


def test_oidc_identity_comes_from_the_team_file(tmp_path):
    path = tmp_path / "team.toml"
    auth.add_member(path, "carol", "annotator", email="Carol@Example.com", token=False)
    path.write_text(path.read_text() + '\n[oidc]\ndomains = ["example.com"]\ndefault_role = "viewer"\n')
    team = auth.load_team(path)
    assert team.oidc_identity({"email": "CAROL@example.com", "email_verified": True}) == \
        Identity("carol", Role.ANNOTATOR, "oidc")
    assert team.oidc_identity({"email": "dan@example.com"}) == Identity("dan@example.com", Role.VIEWER, "oidc")
    assert team.oidc_identity({"email": "eve@example.com.evil.test"}) == \
        "eve@example.com.evil.test is not a member of this judgekit team: ask an admin to add you"
    assert "not verified" in team.oidc_identity({"email": "carol@example.com", "email_verified": False})
    assert "sent no email" in team.oidc_identity({"name": "Carol"})


# --------------------------------------------------------------------------------------------- OIDC set-up


def test_oidc_config_is_checked_without_echoing_a_secret(tmp_path):
    good = auth.oidc_config([tmp_path / "absent.toml", oidc_file(tmp_path, GOOD_OIDC)])
    assert good.providers == ("default",) and good.redirect_uri.endswith("/oauth2callback")
    assert auth.oidc_config([tmp_path / "absent.toml"]) is None
    named = GOOD_OIDC.replace('client_id = "judgekit"\n', "").replace('client_secret = "CLIENT-SECRET-VALUE-xyz"\n', "")
    named = named.replace("server_metadata_url", "[auth.google]\nclient_id = \"g\"\nclient_secret = \"s\"\nserver_metadata_url")
    assert auth.oidc_config([oidc_file(tmp_path, named)]).providers == ("google",)
    for drop, field in (("cookie_secret", "cookie_secret"), ("client_secret", "client_secret"),
                        ("redirect_uri", "redirect_uri")):
        body = "\n".join(line for line in GOOD_OIDC.splitlines() if not line.startswith(drop))
        with pytest.raises(SetupError, match=f"{field} is missing") as e:
            auth.oidc_config([oidc_file(tmp_path, body)])
        assert "CLIENT-SECRET-VALUE" not in str(e.value) and "c0okie" not in str(e.value)
    wrong_uri = GOOD_OIDC.replace("/oauth2callback", "/callback")
    with pytest.raises(SetupError, match="redirect_uri must end with /oauth2callback"):
        auth.oidc_config([oidc_file(tmp_path, wrong_uri)])
    short = GOOD_OIDC.replace("c0okie-secret-c0okie-secret-1234", "short")
    with pytest.raises(SetupError, match="cookie_secret is too short"):
        auth.oidc_config([oidc_file(tmp_path, short)])


# --------------------------------------------------------------------------------------------- the launcher


def launch(db_url: str, *args: str, env: dict | None = None) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "judgekit.cli", "app", "--port", str(port), *args], cwd=ROOT,
                            env={**os.environ, "JUDGEKIT_DB_URL": db_url, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, port


@pytest.mark.parametrize("args", [
    ("--host", "0.0.0.0"),
    ("--host", "::"),
    ("--host", "0.0.0.0", "--auth", "none"),
    ("--host", "127.0.0.1", "--auth", "token"),
])
def test_launcher_refuses_to_serve_without_sign_in(db_url, workspace, args):
    proc, port = launch(db_url, *args)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "sign-in" in lines[0] or "token" in lines[0]
    assert listening_addresses(port) == set()


def test_launcher_beyond_loopback_serves_with_tokens(db_url, workspace):
    auth.add_member(workspace / "team.toml", "ana", "annotator")
    proc, port = launch(db_url, "--host", "0.0.0.0")
    try:
        deadline = time.monotonic() + 180  # start-up on a crowded machine, not a performance bound
        while time.monotonic() < deadline and not listening_addresses(port) and proc.poll() is None:
            time.sleep(0.2)
        assert listening_addresses(port) == {"0.0.0.0"}
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert "sign-in: token" in err


# --------------------------------------------------------------------------------------------- in the app


@pytest.fixture
def _repo_cwd(monkeypatch):
    monkeypatch.chdir(config.REPO_DIR)


def test_app_started_without_the_launcher_beyond_loopback_serves_nothing(_repo_cwd, demo):
    """`streamlit run app.py --server.address 0.0.0.0` with nothing configured: the door refuses."""
    from streamlit import config as st_config

    before = st_config.get_option("server.address")
    st_config.set_option("server.address", "0.0.0.0")
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    finally:
        st_config.set_option("server.address", before)
    assert not at.exception
    assert [e.value for e in at.error][0].startswith("judgekit will not serve here: --host 0.0.0.0 serves beyond")
    assert not at.dataframe and not at.title


def test_removing_a_member_signs_their_session_out(_repo_cwd, demo, workspace, monkeypatch):
    monkeypatch.setenv("JUDGEKIT_AUTH", "token")
    path, tokens = team_with(workspace, ("ana", "annotator"), ("ada", "admin"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert [t.value for t in at.title] == ["judgekit"]
    at.text_input(key="signin_token").input(tokens["ana"])
    at.button[0].click().run()  # the form's submit button
    assert not at.exception, at.exception
    assert "Signed in as ana · annotator" in [t.value for t in at.sidebar.text]
    assert at.session_state["signin_token"] == ""  # the field is cleared, never kept
    assert [t.value for t in at.title] == ["Workspace"]
    assert not any(b.key == "ws_delete" for b in at.button)  # an annotator deletes nothing
    auth.remove_member(path, "ana")
    at.run()  # the next interaction: signed out, back at the door
    assert [t.value for t in at.title] == ["judgekit"] and not at.dataframe and not at.sidebar.text
    assert "signin_member" not in at.session_state


WRITES = re.compile(
    r"\b(jobs\.(start|start_many|cancel)|runner\.create_\w+|critique\.create_critique_run|store\.delete_run|"
    r"labeling\.(save_item|set_role|adjudicate|create_label_set|clear_label)|imports\.(import_\w+|load_demo)|"
    r"store\.upsert_labels|planner\.start_recommended|holistic\.create_\w+|bundles\.create_\w+)\("
)


def test_pages_write_only_through_actions():
    """Every write a page makes goes through judgekit.actions, where the role is checked — the pages and the
    page sections that live in the package (ui*.py, webapp.py)."""
    drawn = [*sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "judgekit").glob("ui*.py")),
             ROOT / "judgekit" / "webapp.py"]
    offenders = [f"{path.name}:{n}: {line.strip()}" for path in drawn
                 for n, line in enumerate(path.read_text().splitlines(), start=1) if WRITES.search(line)]
    assert offenders == []
    assert WRITES.search("    store.delete_run(s, run)") and WRITES.search("jobs.start(db_url(), name)")


def test_every_page_starts_at_the_door():
    """Streamlit runs a page file without app.py on a fresh server's first request to its address (its
    pages/ fallback), so each page's first statement is the door: ``signin.page(…)``, which starts with
    ``signin.guard()``."""
    for path in sorted((ROOT / "pages").glob("*.py")):
        body = [n for n in ast.parse(path.read_text()).body  # what runs: not imports, constants, defs
                if not isinstance(n, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.ClassDef)
                and not (isinstance(n, ast.Expr | ast.Assign) and not any(
                    isinstance(c, ast.Call) for c in ast.walk(n.value)))]
        assert "signin.page(" in ast.unparse(body[0]), f"{path.name} starts with {ast.unparse(body[0])[:60]}"
    door = ast.parse(inspect.getsource(signin.page)).body[0].body
    assert ast.unparse(door[1]) == "who = guard()"  # after the docstring, before anything is drawn
