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


@st.cache_resource(show_spinner=False)
def _sim_judge(url: str):
    from judgekit import simjudge

    return simjudge.start_in_thread(url, simjudge.SimParams())


def sim_judge_base_url() -> str:
    """The simulated judge served by this Streamlit process (started on first use, one per database)."""
    return _sim_judge(config.db_url()).base_url


@st.cache_resource(show_spinner=False)
def _local_judge():
    from judgekit import localjudge

    return localjudge.LocalJudge().start()


def local_judge_base_url() -> tuple[str, str]:
    """(base_url, model) of a bundled local judge started by this process (takes a few seconds)."""
    judge = _local_judge()
    return judge.base_url, judge.model


def db_url() -> str:
    return config.db_url()


def upload_error(error: Exception, folder) -> None:
    """Show an import error naming the uploaded file as the user knows it (not its temporary path)."""
    import os

    st.error(str(error).replace(f"{folder}{os.sep}", ""))
