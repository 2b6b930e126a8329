"""Shared plumbing for the Streamlit pages: the cached engine, sessions, and small render helpers.

Pages stay thin — they read widgets, call judgekit, and render. Nothing here builds SQL or prompts.
The database URL is read lazily on every call (AppTest reuses imported modules across tests).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import streamlit as st
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from judgekit import config, store


@st.cache_resource(show_spinner=False)
def _engine(url: str) -> Engine:
    return store.engine_for(url)


def engine() -> Engine:
    return _engine(config.db_url())


@contextlib.contextmanager
def session() -> Iterator[Session]:
    """A short read/write transaction for one page action."""
    with Session(engine()) as s, s.begin():
        yield s


def empty_state(message: str) -> None:
    st.info(message, icon=":material/lightbulb:")
