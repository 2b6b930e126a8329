"""judgekit dashboard: a router over the pages in pages/ (listed explicitly) plus shared chrome."""

import streamlit as st

st.set_page_config(page_title="judgekit", page_icon=":material/balance:", layout="wide")

PAGES = [
    st.Page("pages/workspace.py", title="Workspace", icon=":material/home:", default=True),
    st.Page("pages/data.py", title="Data", icon=":material/upload_file:"),
    st.Page("pages/run.py", title="Run", icon=":material/play_circle:"),
    st.Page("pages/crosstabs.py", title="Cross-tabs", icon=":material/grid_on:"),
    st.Page("pages/associations.py", title="Associations", icon=":material/hub:"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
    st.Page("pages/agreement.py", title="Agreement", icon=":material/handshake:"),
    st.Page("pages/label.py", title="Label", icon=":material/edit_note:"),
    st.Page("pages/prompt_ab.py", title="Prompt A/B", icon=":material/science:"),
]

st.navigation(PAGES).run()
