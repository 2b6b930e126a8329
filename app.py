"""judgekit dashboard: a router over the pages in pages/ plus shared chrome."""

import streamlit as st

st.set_page_config(page_title="judgekit", page_icon=":material/balance:", layout="wide")

PAGES = [
    st.Page("pages/workspace.py", title="Workspace", icon=":material/home:", default=True),
]

st.navigation(PAGES).run()
