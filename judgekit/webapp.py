"""Shared plumbing for the Streamlit pages: the cached engine, sessions, and small render helpers.

Pages stay thin — they read widgets, call judgekit, and render. Nothing here builds SQL or prompts.
The database URL is read lazily on every call (AppTest reuses imported modules across tests).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from typing import Any

import streamlit as st
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from judgekit import config, matrix_cache, sources, store
from judgekit.auth import Action

# a finished run or an import fills the matrix cache through the loaders (see matrix_cache.written)
matrix_cache.warm_after_writes(sources.warm_cache)

# --------------------------------------------------------------------------------------------- routing

PAGES: tuple[tuple[str, str, str, Action | None], ...] = (
    ("pages/workspace.py", "Workspace", ":material/home:", None),
    ("pages/data.py", "Data", ":material/upload_file:", Action.IMPORT),
    ("pages/run.py", "Run", ":material/play_circle:", None),
    ("pages/crosstabs.py", "Cross-tabs", ":material/grid_on:", None),
    ("pages/associations.py", "Associations", ":material/hub:", None),
    ("pages/examples.py", "Examples", ":material/table_rows:", None),
    ("pages/compare.py", "Compare", ":material/compare_arrows:", None),
    ("pages/agreement.py", "Agreement", ":material/handshake:", None),
    ("pages/label.py", "Label", ":material/edit_note:", Action.LABEL),
    ("pages/prompt_ab.py", "Prompt A/B", ":material/science:", None),
)
"""The dashboard's pages in menu order: (file relative to app.py, title, icon, the action a role needs to
use the page at all — ``None``: everyone signed in). The first is the home page. A page that writes is
listed only for roles that may use it (:func:`judgekit.signin.pages_for`); its writes are checked again
in :mod:`judgekit.actions`."""

_ROUTER_KEY = "_judgekit_router"


def page_entries() -> list[tuple[st.Page, Action | None]]:
    """(``st.Page``, the action it needs) for each of :data:`PAGES` (what ``app.py`` hands to the sign-in
    gate and ``st.navigation``)."""
    return [(st.Page(path, title=title, icon=icon, default=i == 0), need)
            for i, (path, title, icon, need) in enumerate(PAGES)]


def page_need(path: str) -> Action | None:
    """The action a role needs to open the page at ``path`` (a file in :data:`PAGES`); ``None``: everyone."""
    return next(need for p, _, _, need in PAGES if p == path)


def navigation_pages() -> list:
    """``st.Page`` objects for :data:`PAGES`, in menu order."""
    return [page for page, _ in page_entries()]


def mark_routed() -> None:
    """Called by ``app.py`` on every run, before the page: this run goes through the router."""
    st.session_state[_ROUTER_KEY] = True


def routed() -> None:
    """First line of every page: make sure the page runs under ``app.py``'s router.

    Streamlit decides per *process* whether an app uses the old ``pages/`` folder mode, and it does so on
    the first script run it serves: when that first request is a page's own URL (``/associations``, e.g.
    a shared link opened right after the server started), it runs the page file straight — without
    ``app.py``, its wide layout or its menu — and stays in that mode. Calling ``st.navigation`` once
    switches the process to the router; the rerun then serves the same URL (query string included)
    through ``app.py``.
    """
    if not st.session_state.get(_ROUTER_KEY):
        st.navigation(navigation_pages(), position="hidden")
        st.rerun()


# --------------------------------------------------------------------------------------------- choices


SHARED = "_judgekit_shared"  # param name → the value last chosen under that name on any page
_KEPT = "_judgekit_kept"  # widget key → its last value, for forms that must survive leaving the page


def _as_strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list | tuple) else [str(value)]


def remembered(param: str, options: Sequence[Any], *, multi: bool = False) -> Any:
    """The value a picker sharing ``param`` starts from, or ``None``: the URL's ``?param=…`` (a shared
    link, or this page's own state), else what was chosen under ``param`` on any page of this session.
    Only values among ``options`` count (compared as strings); ``multi`` pickers get the list of those."""
    by_text = {str(o): o for o in options}
    candidates = []
    if param in st.query_params:
        candidates.append(st.query_params.get_all(param))
    if param in st.session_state.get(SHARED, {}):
        candidates.append(_as_strings(st.session_state[SHARED][param]))
    for texts in candidates:
        found = [by_text[t] for t in texts if t in by_text]
        if multi and found:
            return found
        if not multi and len(texts) == 1 and found:
            return found[0]
    return None


def remember(param: str, value: Any) -> None:
    """Keep a choice for every page of this session and put it in the URL (so the view can be shared)."""
    st.session_state.setdefault(SHARED, {})[param] = value
    texts = _as_strings(value) if value is not None else []
    if st.query_params.get_all(param) != texts:
        if texts:
            st.query_params[param] = texts if isinstance(value, list | tuple) else texts[0]
        else:
            del st.query_params[param]


def keep(key: str, default: Any) -> None:
    """Before drawing the widget ``key`` (without a ``value=``/``index=`` argument): give it the value it
    had when the user last left the page, else ``default``. Streamlit forgets a widget's state when a
    run does not draw it; :func:`save_kept` (run by ``app.py`` before every page) copies the values."""
    kept = st.session_state.setdefault(_KEPT, {})
    # Assigned on every run, even when the key is still there: a widget that a run did not draw (the
    # page stopped early, or the user was elsewhere) comes back at its default unless its value is set
    # through the Session State API before it is drawn again.
    st.session_state[key] = st.session_state[key] if key in st.session_state else kept.get(key, default)
    kept[key] = st.session_state[key]


def save_kept() -> None:
    """Copy the current value of every widget registered with :func:`keep` (the previous run's values are
    still in the session state when the next run starts)."""
    kept = st.session_state.get(_KEPT, {})
    for key in kept:
        if key in st.session_state:
            kept[key] = st.session_state[key]


# --------------------------------------------------------------------------------------------- store


def engine() -> Engine:
    """The process-wide engine (:func:`judgekit.store.engine_for` keeps one per URL, and a new one when a
    SQLite file was deleted and recreated — a cached engine would go on reading the deleted file)."""
    return store.engine_for(config.db_url())


@contextlib.contextmanager
def session() -> Iterator[Session]:
    """A short read/write transaction for one page action."""
    with Session(engine()) as s, s.begin():
        yield s


def empty_state(message: str) -> None:
    st.info(message, icon=":material/lightbulb:")


@st.cache_resource(show_spinner=False)
def _sim_judge(url: str, database: str):
    from judgekit import simjudge

    return simjudge.start_in_thread(url, simjudge.SimParams())


def sim_judge_base_url() -> str:
    """The simulated judge served by this Streamlit process (started on first use, one per database — a
    database recreated at the same URL gets its own, whose planted truth is the new one's)."""
    with session() as s:
        database = store.database_identity(s)
    return _sim_judge(config.db_url(), database).base_url


@st.cache_resource(show_spinner=False)
def _local_judge(model_path: str):
    from pathlib import Path

    from judgekit import localjudge

    return localjudge.LocalJudge(Path(model_path) if model_path else None).start()


def local_judge_base_url(model_path: str = "") -> tuple[str, str]:
    """(base_url, model) of a local judge started by this process (takes a few seconds): the bundled
    SmolLM2-135M, or the GGUF file ``model_path``. Raises :class:`judgekit.localjudge.LocalJudgeError`."""
    judge = _local_judge(model_path.strip())
    return judge.base_url, judge.model


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=^&])")


def md(text: Any) -> str:
    """``text`` made inert for ``st.markdown`` / ``st.caption``: every Markdown, directive (``:red[…]``,
    ``:material/…:``), LaTeX (``$``) and HTML character backslash-escaped, newlines flattened."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def db_url() -> str:
    return config.db_url()


def upload_error(error: Exception, folder) -> None:
    """Show an import error naming the uploaded file as the user knows it (not its temporary path)."""
    import os

    st.error(md(str(error).replace(f"{folder}{os.sep}", "")))  # the message quotes the file: never live Markdown
