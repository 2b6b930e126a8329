"""Who may use a judgekit server, and what each person may do there.

Sits low in the layers (values, file parsing and rules; no Streamlit, no store): the launcher
(`judgekit app`) uses it to refuse a server that would serve beyond this machine with nobody checked
at the door; :mod:`judgekit.signin` uses it to sign people in; :mod:`judgekit.actions` uses it to check
every write the dashboard makes.

Three ideas:

- **Sign-in methods.** On loopback (127.0.0.1, ::1, localhost) nobody signs in, as before: the one
  person at this machine is :data:`LOCAL`, an admin who types a name on the Label page. Bound anywhere
  else, the server requires sign-in — OIDC (Streamlit's ``st.login``, configured in ``[auth]`` of
  ``.streamlit/secrets.toml``) and/or a shared token per member (the *team file*) — and refuses to start
  when neither is configured (:func:`sign_in_methods`).
- **The team file** (``team.toml`` in the workspace, or ``$JUDGEKIT_TEAM_FILE``): members with a name,
  a role, the SHA-256 of their token (never the token: it is shown once by ``judgekit team add``) and,
  for OIDC, the email that is them. Tokens are compared in constant time.
- **Roles.** ``viewer`` reads every analysis page; ``annotator`` also labels (under the signed-in
  name) and starts *free* runs; ``admin`` also deletes runs, imports data and starts *paid* runs.
  A run is free when its judge is the simulated or the bundled local judge on this machine (kind
  ``simulated``/``local``, no API key, a loopback URL); any other judge may bill someone.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import ipaddress
import os
import re
import secrets
import tempfile
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from judgekit.rubric import REFERENCE_ANNOTATOR

__all__ = [
    "AUTH_CHOICES",
    "LOCAL",
    "NEEDS",
    "Action",
    "Forbidden",
    "Identity",
    "Member",
    "OidcConfig",
    "Role",
    "SetupError",
    "Team",
    "add_member",
    "check_server",
    "default_secrets_files",
    "hash_token",
    "is_free_judge",
    "is_loopback",
    "load_team",
    "oidc_config",
    "remove_member",
    "run_action",
    "sign_in_methods",
]


class Role(enum.StrEnum):
    """A team member's role; each one can do everything the one before it can."""

    VIEWER = "viewer"
    ANNOTATOR = "annotator"
    ADMIN = "admin"


_RANK = {Role.VIEWER: 0, Role.ANNOTATOR: 1, Role.ADMIN: 2}


class Action(enum.StrEnum):
    """The things the dashboard does that change the workspace or spend money."""

    LABEL = "label"  # save one's own labels, create label sets, adjudicate
    RUN_FREE = "run free"  # start, resume or cancel a run on the simulated / bundled local judge
    RUN_PAID = "run paid"  # … on any other judge
    DELETE = "delete"  # delete a run with its calls and verdicts
    IMPORT = "import"  # upload datasets, rubrics, labels or runs; load the demo workspace


NEEDS: Mapping[Action, Role] = {
    Action.LABEL: Role.ANNOTATOR,
    Action.RUN_FREE: Role.ANNOTATOR,
    Action.RUN_PAID: Role.ADMIN,
    Action.DELETE: Role.ADMIN,
    Action.IMPORT: Role.ADMIN,
}

Via = Literal["local", "token", "oidc"]
Method = Literal["token", "oidc"]
AUTH_CHOICES = ("auto", "none", "token", "oidc")
RESERVED_NAMES = frozenset({REFERENCE_ANNOTATOR})  # the demo's planted truth is labeled under that name
MAX_NAME = 200  # as the annotators table allows
MAX_TOKEN = 512  # longer input is not a token judgekit issued; refused before hashing


class Forbidden(PermissionError):
    """The signed-in person's role does not allow the action (one line, names the role needed)."""


class SetupError(ValueError):
    """A server that must not start as configured, or a bad team file; the message says what to do
    (one line, never a secret)."""


@dataclass(frozen=True)
class Identity:
    """The person a dashboard session acts for.

    ``name`` is the annotator name labels are saved under; it is None only for :data:`LOCAL` (loopback,
    no sign-in), who types a name on the Label page as before.
    """

    name: str | None
    role: Role
    via: Via

    def can(self, action: Action) -> bool:
        return _RANK[self.role] >= _RANK[NEEDS[action]]

    def require(self, action: Action, doing: str) -> None:
        """Raise :class:`Forbidden` unless this person may take ``action`` (``doing`` says what it was)."""
        if not self.can(action):
            who = f"{self.name}'s role is {self.role}" if self.name else f"this session's role is {self.role}"
            raise Forbidden(f"not allowed to {doing}: {who}, and it needs {NEEDS[action]}")

    def annotator(self, typed: str | None) -> str:
        """The annotator name to label under: the signed-in name — or, for :data:`LOCAL`, the typed one.

        A signed-in person cannot label under another name (:class:`Forbidden`)."""
        if self.name is None:
            name = (typed or "").strip()
            if not name:
                raise ValueError("labels need an annotator name")
            return name
        if typed is not None and typed.strip() != self.name:
            raise Forbidden(f"signed in as {self.name}: cannot save labels as {typed.strip()!r}")
        return self.name


LOCAL = Identity(None, Role.ADMIN, "local")


# --------------------------------------------------------------------------------------------- paid runs


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` is this machine only (127.0.0.0/8, ::1, ``localhost``). Empty or unset means
    every interface to Streamlit, so it is not loopback; nor is a Unix socket (a proxy may front it)."""
    if not host:
        return False
    host = host.strip().strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_free_judge(kind: str | None, base_url: str | None, api_key_env: str | None) -> bool:
    """A judge that costs nobody money: the simulated or the bundled local judge, served on this machine
    (a loopback URL, or none yet: the app starts its own simulated judge), with no API key."""
    if kind not in ("simulated", "local") or api_key_env:
        return False
    if base_url is None:
        return kind == "simulated"
    try:
        return is_loopback(urlsplit(base_url).hostname)
    except ValueError:  # not a URL at all: nothing to call it free for
        return False


def run_action(kind: str | None, base_url: str | None, api_key_env: str | None) -> Action:
    """The action that starting (resuming, cancelling) a run on this judge is."""
    return Action.RUN_FREE if is_free_judge(kind, base_url, api_key_env) else Action.RUN_PAID


# --------------------------------------------------------------------------------------------- the team file

_NAME_OK = re.compile(r"^[^\x00-\x1f\x7f]+$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def hash_token(token: str) -> str:
    """SHA-256 of a token, hex. Tokens are 256 random bits, so an unsalted fast hash is enough: what the
    team file holds cannot be turned back into a token or guessed."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def new_token() -> str:
    return "jk_" + secrets.token_urlsafe(32)


@dataclass(frozen=True)
class Member:
    name: str
    role: Role
    token_sha256: str | None = None
    email: str | None = None


@dataclass(frozen=True)
class Team:
    """The members of a team file (empty when the file does not exist)."""

    path: Path
    members: tuple[Member, ...] = ()
    oidc_domains: tuple[str, ...] = ()
    oidc_default_role: Role = Role.VIEWER
    exists: bool = False

    @property
    def has_tokens(self) -> bool:
        return any(m.token_sha256 for m in self.members)

    def member(self, name: str) -> Member | None:
        return next((m for m in self.members if m.name == name), None)

    def by_token(self, token: str) -> Member | None:
        """The member whose token this is. Every stored hash is compared, in constant time, so neither
        the answer's timing nor the first differing character tells anything about a token."""
        token = (token or "").strip()
        plausible = 0 < len(token) <= MAX_TOKEN
        presented = hash_token(token if plausible else "")
        found = None
        for m in self.members:
            if m.token_sha256 and hmac.compare_digest(presented, m.token_sha256):
                found = m
        return found if plausible else None

    def oidc_identity(self, claims: Mapping[str, Any]) -> Identity | str:
        """The identity of an OIDC sign-in (the ID token's claims), or why it is not let in."""
        email = str(claims.get("email") or "").strip().lower()
        if not email:
            return "your identity provider sent no email address, so judgekit cannot tell who you are"
        if claims.get("email_verified") is False:
            return f"{email} is not verified by your identity provider"
        member = next((m for m in self.members if m.email and m.email.lower() == email), None)
        if member is not None:
            return Identity(member.name, member.role, "oidc")
        domain = email.rpartition("@")[2]
        if domain in self.oidc_domains:
            return Identity(email[:MAX_NAME], self.oidc_default_role, "oidc")
        return f"{email} is not a member of this judgekit team: ask an admin to add you"


def _role(value: Any, where: str) -> Role:
    try:
        return Role(value)
    except ValueError:
        raise SetupError(f"{where}: role must be one of viewer, annotator, admin (not {value!r})") from None


def _member(raw: Any, where: str) -> Member:
    if not isinstance(raw, dict):
        raise SetupError(f"{where}: must be a table with name and role")
    unknown = sorted(set(raw) - {"name", "role", "token_sha256", "email"})
    if unknown:
        raise SetupError(f"{where}: unknown field {unknown[0]!r}")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME or not _NAME_OK.match(name):
        raise SetupError(f"{where}: name must be 1–{MAX_NAME} printable characters")
    name = name.strip()
    if name in RESERVED_NAMES:
        raise SetupError(f"{where}: the name {name!r} is reserved (the demo's planted truth)")
    token = raw.get("token_sha256")
    if token is not None and (not isinstance(token, str) or not _HEX64.match(token)):
        raise SetupError(f"{where}: token_sha256 must be 64 hex digits (use `judgekit team add`)")
    email = raw.get("email")
    if email is not None and (not isinstance(email, str) or "@" not in email or len(email) > MAX_NAME):
        raise SetupError(f"{where}: email must be an email address")
    return Member(name, _role(raw.get("role"), where), token, email.strip().lower() if email else None)


def _parse_team(path: Path, text: str) -> Team:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SetupError(f"{path}: not valid TOML ({e})") from None
    unknown = sorted(set(doc) - {"member", "oidc"})
    if unknown:
        raise SetupError(f"{path}: unknown section {unknown[0]!r} (expected [[member]] and [oidc])")
    rows = doc.get("member", [])
    if not isinstance(rows, list):
        raise SetupError(f"{path}: members are written [[member]]")
    members = tuple(_member(raw, f"{path}, member {i}") for i, raw in enumerate(rows, start=1))
    seen: set[str] = set()
    for i, m in enumerate(members, start=1):
        for key in (f"name {m.name}", f"email {m.email}" if m.email else None):
            if key and key in seen:
                raise SetupError(f"{path}, member {i}: {key} is listed twice")
            seen.add(key or "")
    oidc = doc.get("oidc", {})
    if not isinstance(oidc, dict) or set(oidc) - {"domains", "default_role"}:
        raise SetupError(f"{path}, [oidc]: only domains and default_role belong here")
    domains = oidc.get("domains", [])
    if not isinstance(domains, list) or not all(isinstance(d, str) and d for d in domains):
        raise SetupError(f"{path}, [oidc]: domains must be a list of email domains")
    default_role = _role(oidc.get("default_role", "viewer"), f"{path}, [oidc] default_role")
    return Team(path, members, tuple(d.strip().lower().lstrip("@") for d in domains), default_role, True)


@lru_cache(maxsize=8)
def _load_team_cached(path: str, mtime_ns: int, size: int) -> Team:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError) as e:
        raise SetupError(f"{p}: cannot be read ({e})") from None
    return _parse_team(p, text)


def load_team(path: Path) -> Team:
    """The team file at ``path`` (an empty team when there is none). Re-read whenever it changes, so an
    admin's `judgekit team add|remove` takes effect at a running server's next page interaction."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return Team(path)
    return _load_team_cached(str(path), st.st_mtime_ns, st.st_size)


def _toml_str(value: str) -> str:
    # JSON's string escapes (\" \\ \n \uXXXX …) are all valid in a TOML basic string
    import json

    return json.dumps(value, ensure_ascii=True)


def _render_team(team: Team) -> str:
    lines = [
        "# judgekit team file — who may sign in to a judgekit server bound beyond loopback.",
        "# Written by `judgekit team add|remove`. Holds SHA-256 hashes of tokens, never the tokens.",
        "# Roles: viewer (analysis pages), annotator (+ labels, free runs), admin (+ delete, import, paid runs).",
        "",
    ]
    if team.oidc_domains or team.oidc_default_role != Role.VIEWER:
        lines += ["[oidc]", f"domains = [{', '.join(_toml_str(d) for d in team.oidc_domains)}]",
                  f"default_role = {_toml_str(team.oidc_default_role)}", ""]
    for m in team.members:
        lines += ["[[member]]", f"name = {_toml_str(m.name)}", f"role = {_toml_str(m.role)}"]
        if m.token_sha256:
            lines.append(f"token_sha256 = {_toml_str(m.token_sha256)}")
        if m.email:
            lines.append(f"email = {_toml_str(m.email)}")
        lines.append("")
    return "\n".join(lines)


def _write_team(team: Team) -> None:
    """Replace the file atomically, readable by its owner only."""
    team.path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".team-", suffix=".toml", dir=team.path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(_render_team(team))
        os.chmod(tmp, 0o600)
        os.replace(tmp, team.path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def add_member(
    path: Path, name: str, role: Role | str, *, email: str | None = None, token: bool = True,
    replace: bool = False,
) -> str | None:
    """Add (or, with ``replace``, update) a member; returns their new token — shown once, stored only as
    its hash — or None when ``token`` is False (an OIDC-only member)."""
    team = load_team(path)
    issued = new_token() if token else None
    raw: dict[str, Any] = {"name": name, "role": str(role)}
    if issued:
        raw["token_sha256"] = hash_token(issued)
    if email:
        raw["email"] = email
    member = _member(raw, f"{path}, member {name!r}")
    if team.member(member.name) is not None and not replace:
        raise SetupError(f"{member.name} is already a member of {path} (--replace issues a new token)")
    others = tuple(m for m in team.members if m.name != member.name)
    updated = Team(path, (*others, member), team.oidc_domains, team.oidc_default_role, True)
    _parse_team(path, _render_team(updated))  # the checks of reading it back (an email listed twice …)
    _write_team(updated)
    return issued


def remove_member(path: Path, name: str) -> None:
    team = load_team(path)
    if team.member(name) is None:
        raise SetupError(f"{name!r} is not a member of {path}")
    _write_team(Team(path, tuple(m for m in team.members if m.name != name), team.oidc_domains,
                     team.oidc_default_role, True))


# --------------------------------------------------------------------------------------------- OIDC config

_PROVIDER_KEYS = ("client_id", "client_secret", "server_metadata_url")


@dataclass(frozen=True)
class OidcConfig:
    """Streamlit's ``[auth]`` section, checked: the providers ``st.login`` can use ("default" = the
    unnamed one), where the provider sends people back, and the file it came from."""

    providers: tuple[str, ...]
    redirect_uri: str
    source: Path


def default_secrets_files() -> list[Path]:
    """Where Streamlit looks for ``secrets.toml`` for app.py, in its order (later files win)."""
    from judgekit import config

    files = [Path.home() / ".streamlit" / "secrets.toml", Path.cwd() / ".streamlit" / "secrets.toml",
             config.TOP_DIR / ".streamlit" / "secrets.toml"]
    return list(dict.fromkeys(files))


def oidc_config(files: Iterable[Path | str]) -> OidcConfig | None:
    """The OIDC set-up in ``[auth]`` of the secrets files (the last file with an ``[auth]`` wins, as in
    Streamlit), None when there is none; :class:`SetupError` naming the missing field when it is
    incomplete. No secret value is ever put in a message."""
    auth: dict | None = None
    source: Path | None = None
    for f in files:
        p = Path(f)
        if not p.is_file():
            continue
        try:
            doc = tomllib.loads(p.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as e:
            raise SetupError(f"{p}: not valid TOML ({type(e).__name__})") from None
        if "auth" in doc:
            auth, source = doc["auth"], p
    if auth is None or source is None:
        return None
    if not isinstance(auth, dict):
        raise SetupError(f"{source}: [auth] must be a table")
    for key in ("redirect_uri", "cookie_secret"):
        if not isinstance(auth.get(key), str) or not auth[key]:
            raise SetupError(f"{source}, [auth]: {key} is missing (see the README, Teams)")
    if not auth["redirect_uri"].rstrip("/").endswith("/oauth2callback"):
        raise SetupError(f"{source}, [auth]: redirect_uri must end with /oauth2callback")
    if len(auth["cookie_secret"]) < 16:
        raise SetupError(f"{source}, [auth]: cookie_secret is too short (use 32+ random characters)")
    named = {k: v for k, v in auth.items() if isinstance(v, dict) and any(p in v for p in _PROVIDER_KEYS)}
    sections = {"default": auth} if any(k in auth for k in _PROVIDER_KEYS) else named
    if not sections:
        raise SetupError(f"{source}, [auth]: no provider (client_id, client_secret, server_metadata_url)")
    for provider, section in sections.items():
        for key in _PROVIDER_KEYS:
            if not isinstance(section.get(key), str) or not section[key]:
                where = "[auth]" if provider == "default" else f"[auth.{provider}]"
                raise SetupError(f"{source}, {where}: {key} is missing")
        if "_" in provider:
            raise SetupError(f"{source}: provider name {provider!r} may not contain '_' (Streamlit's rule)")
    return OidcConfig(tuple(sections), auth["redirect_uri"], source)


def _authlib_installed() -> bool:
    try:
        import authlib  # noqa: F401
    except ImportError:
        return False
    return True


# --------------------------------------------------------------------------------------------- the door

REFUSAL = (
    "{host} serves beyond this machine, so judgekit requires sign-in, and none is configured. Either add "
    "team members with tokens — `judgekit team add NAME --role viewer|annotator|admin` (writes {team}) — "
    "or configure OIDC in [auth] of .streamlit/secrets.toml; see the README, Teams. "
    "To serve this machine only, use --host 127.0.0.1."
)


def check_server(host: str | None, requested: str, team_file: Path, secrets_files: Iterable[Path]) -> frozenset[Method]:
    """:func:`sign_in_methods` for a server about to start, reading its team and secrets files."""
    return sign_in_methods(host, requested, load_team(team_file), oidc_config(secrets_files))


def sign_in_methods(host: str | None, requested: str, team: Team, oidc: OidcConfig | None) -> frozenset[Method]:
    """How people sign in to a server bound to ``host``; empty = nobody signs in (loopback only).

    1. ``none`` is allowed on loopback only.
    2. ``auto`` on loopback: nobody signs in, as before (the one person here is :data:`LOCAL`).
    3. ``auto`` beyond loopback: every configured method (OIDC, tokens); none configured → refuse.
    4. ``token`` / ``oidc``: that method, which must be configured (e.g. behind a reverse proxy on loopback).
    5. OIDC needs Authlib installed (the ``oidc`` extra).
    Raises :class:`SetupError` with a one-line reason when the server must not start.
    """
    if requested not in AUTH_CHOICES:
        raise SetupError(f"--auth must be one of {', '.join(AUTH_CHOICES)} (not {requested!r})")
    shown = host or "an unset address (every interface)"
    methods: set[Method] = set()
    if requested == "none":
        if not is_loopback(host):
            raise SetupError(f"--auth none is refused for {shown}: only a loopback address may skip sign-in")
        return frozenset()
    if requested == "auto":
        if is_loopback(host):
            return frozenset()
        if oidc is not None:
            methods.add("oidc")
        if team.has_tokens:
            methods.add("token")
        if not methods:
            raise SetupError(REFUSAL.format(host=f"--host {shown}", team=team.path))
    elif requested == "token":
        if not team.has_tokens:
            raise SetupError(f"--auth token: no member of {team.path} has a token "
                             "(`judgekit team add NAME --role ROLE` issues one)")
        methods.add("token")
    else:
        if oidc is None:
            raise SetupError("--auth oidc: no [auth] section in .streamlit/secrets.toml (see the README, Teams)")
        methods.add("oidc")
    if "oidc" in methods and not _authlib_installed():
        raise SetupError("OIDC sign-in needs Authlib: pip install 'judgekit[oidc]'")
    return frozenset(methods)
