"""judgekit dashboard: a router over the pages in pages/ (listed in judgekit.webapp.PAGES) plus shared chrome.

The sign-in gate runs first (:mod:`judgekit.signin`); a page that writes is listed only for roles that
may use it, and its writes are checked again in :mod:`judgekit.actions`.
"""

import streamlit as st

from judgekit import signin, webapp

st.set_page_config(page_title="judgekit", page_icon=":material/balance:", layout="wide")
webapp.mark_routed()
webapp.save_kept()
entries = webapp.page_entries()
who = signin.gate([page for page, _ in entries])
st.navigation(signin.pages_for(who, entries)).run()
