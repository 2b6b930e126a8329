"""The dashboard's door: who this browser session is, before any page runs.

``app.py`` calls :func:`gate` first. On loopback with no sign-in configured it lets the one person at
this machine in as :data:`judgekit.auth.LOCAL`, as before. Otherwise it shows the sign-in screen —
a token field and/or "Sign in with …" buttons for Streamlit's OIDC (``st.login``) — until the session
belongs to a team member, and it refuses to serve at all when the server is bound beyond loopback with
nothing configured (the launcher refuses first; this covers a bare ``streamlit run``).

Every page starts with :func:`guard` (the person, checked again: Streamlit can run a page file without
app.py) and passes that person to :mod:`judgekit.actions`; callbacks ask :func:`identity`. Both re-check
against the team file, so removing a member or issuing them a new token ends their sessions at their
next click. A token is read from its password
field once, hashed, and the field cleared; only the member's name and token hash stay in the session.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from judgekit import auth, config, webapp
from judgekit.auth import LOCAL, Identity
from judgekit.webapp import md

MEMBER = "signin_member"  # (name, token hash) of a token sign-in (server-side; no widget has this key)
REFUSED = "signin_refused"  # why a signed-in OIDC user is not let in
FAILED = "signin_failed"
TOKEN_FIELD = "signin_token"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Door:
    methods: frozenset[auth.Method]
    team: auth.Team
    oidc: auth.OidcConfig | None


def _stats(paths: list[Path]) -> tuple:
    out = []
    for p in paths:
        try:
            s = p.stat()
            out.append((str(p), s.st_mtime_ns, s.st_size))
        except OSError:
            out.append((str(p), None, None))
    return tuple(out)


@st.cache_resource(show_spinner=False, max_entries=4)
def _oidc(stats: tuple) -> auth.OidcConfig | None:
    return auth.oidc_config(Path(p) for p, _, _ in stats)


def door() -> Door:
    """How this server lets people in (:class:`judgekit.auth.SetupError` when it must not serve)."""
    files = [Path(f) for f in (st.get_option("secrets.files") or [])]
    team = auth.load_team(config.team_file())
    oidc = _oidc(_stats(files))
    methods = auth.sign_in_methods(st.get_option("server.address"), config.auth_choice(), team, oidc)
    return Door(methods, team, oidc)


def _resolve(d: Door) -> Identity | None:
    """This session's identity under ``d``, or None while nobody (valid) is signed in."""
    if not d.methods:
        return LOCAL
    if "token" in d.methods and (held := st.session_state.get(MEMBER)):
        name, digest = held
        m = d.team.member(name)
        if m is not None and m.token_sha256 and hmac.compare_digest(m.token_sha256, digest):
            return Identity(m.name, m.role, "token")
        st.session_state.pop(MEMBER, None)  # removed, or given a new token: signed out
    if "oidc" in d.methods and st.user.is_logged_in:
        who = d.team.oidc_identity(st.user.to_dict())
        if isinstance(who, Identity):
            st.session_state.pop(REFUSED, None)
            return who
        st.session_state[REFUSED] = who
    return None


def identity() -> Identity:
    """The person this session acts for, checked now (in a callback too). Raises
    :class:`judgekit.auth.Forbidden` once they are signed out."""
    who = _resolve(door())
    if who is None:
        raise auth.Forbidden("you are signed out: reload the page and sign in")
    return who


def _door_or_stop() -> Door:
    try:
        return door()
    except auth.SetupError as e:
        st.error(f"judgekit will not serve here: {e}", icon=":material/block:")
        st.stop()


def guard() -> Identity:
    """A page's first line: the person this session acts for, checked again.

    app.py's gate has normally decided this already. But Streamlit may run a page file straight from its
    address without app.py (its fallback for apps with a pages/ folder, on a fresh server's first script
    run — and in every AppTest run after the first); then nobody signed in here is sent through app.py."""
    d = _door_or_stop()
    who = _resolve(d)
    if who is None:
        st.switch_page(str(config.APP_FILE))
        raise AssertionError("unreachable: switch_page reruns the script")
    return who


def page(title: str, caption: str | None = None) -> Identity:
    """Every page's first lines: the signed-in person (:func:`guard`), the router (:func:`webapp.routed`),
    the page's title and the caption under it."""
    who = guard()
    webapp.routed()
    st.title(title)
    if caption:
        st.caption(caption)
    return who


def gate(pages: Sequence[st.Page]) -> Identity:
    """Let the session through as a team member (or LOCAL), or draw the sign-in screen and stop.

    The sign-in screen answers at every page's address, so a link to a page leads there after sign-in."""
    d = _door_or_stop()
    who = _resolve(d)
    if who is None:
        st.navigation([st.Page(_sign_in_page, title="Sign in", icon=":material/login:", url_path=p.url_path,
                               default=i == 0) for i, p in enumerate(pages)], position="hidden").run()
        st.stop()
    if who.via != "local":
        _sidebar(who)
    return who


def may(who: Identity, need: auth.Action, doing: str) -> bool:
    """Whether ``who`` may take ``need``; if not, a caption says which role ``doing`` needs."""
    if who.can(need):
        return True
    st.caption(md(f"{doing} needs the {auth.NEEDS[need]} role; yours is {who.role}."))
    return False


def may_run(who: Identity, kind: str, base_url: str | None, api_key_env: str | None, doing: str) -> bool:
    """Whether ``who`` may start runs on this judge (see :func:`judgekit.auth.run_action`)."""
    return may(who, auth.run_action(kind, base_url, api_key_env), doing)


def pages_for(who: Identity, pages: Sequence[tuple[st.Page, auth.Action | None]]) -> list[st.Page]:
    """The pages ``who`` may use; each other page's address shows which role it needs, unlisted."""

    def refusal(page: st.Page, need: auth.Action) -> st.Page:
        def not_for_this_role() -> None:
            st.title(page.title)
            st.warning(f"{page.title} needs the {auth.NEEDS[need]} role; yours is {who.role}.",
                       icon=":material/lock:")

        return st.Page(not_for_this_role, title=page.title, url_path=page.url_path, visibility="hidden")

    return [p if need is None or who.can(need) else refusal(p, need) for p, need in pages]


# --------------------------------------------------------------------------------------------- screens


def _sign_out() -> None:
    for key in (MEMBER, REFUSED):
        st.session_state.pop(key, None)


def _sidebar(who: Identity) -> None:
    with st.sidebar:
        st.text(f"Signed in as {who.name} · {who.role}")
        if who.via == "oidc":
            if st.button("Sign out", key="signin_out", icon=":material/logout:"):
                _sign_out()
                st.logout()
        else:
            st.button("Sign out", key="signin_out", icon=":material/logout:", on_click=_sign_out)


def _try_token() -> None:
    token = st.session_state.get(TOKEN_FIELD) or ""
    st.session_state[TOKEN_FIELD] = ""  # never kept, never echoed back to the browser
    m = door().team.by_token(token)
    if m is None:
        st.session_state[FAILED] = True
        log.warning("judgekit: a token sign-in failed (from %s)", st.context.ip_address or "unknown address")
        return
    st.session_state.pop(FAILED, None)
    st.session_state[MEMBER] = (m.name, m.token_sha256)
    log.info("judgekit: %s signed in with a token", m.name)


def _provider_label(provider: str) -> str:
    return "Sign in with your organisation's account" if provider == "default" else f"Sign in with {provider.title()}"


def _sign_in_page() -> None:
    d = door()
    _, mid, _ = st.columns([1, 2, 1])
    with mid:
        st.title("judgekit")
        st.subheader("Sign in")
        st.caption("This judgekit server is shared by a team: sign in to see its runs and labels.")
        refused = st.session_state.get(REFUSED)
        if refused and "oidc" in d.methods and st.user.is_logged_in:
            st.warning(md(refused), icon=":material/person_off:")  # the email is the provider's text
            if st.button("Sign out", key="signin_refused_out"):
                _sign_out()
                st.logout()
        elif d.oidc is not None and "oidc" in d.methods:
            for provider in d.oidc.providers:
                if st.button(_provider_label(provider), key=f"signin_oidc_{provider}", type="primary",
                             icon=":material/badge:", width="stretch"):
                    st.login(None if provider == "default" else provider)
        if "token" in d.methods:
            if "oidc" in d.methods:
                st.caption("or, with a token from your judgekit admin:")
            with st.form("signin_form", border=True):
                st.text_input("Access token", type="password", key=TOKEN_FIELD,
                              placeholder="jk_…", help="Your admin issued it with `judgekit team add`.")
                st.form_submit_button("Sign in", type="primary", on_click=_try_token, width="stretch")
            if st.session_state.get(FAILED):
                st.error("That token is not valid. Ask your judgekit admin for yours.", icon=":material/key_off:")
