"""``judgekit team add|remove|list``: the team file that lets people sign in to a shared server.

A token is printed once, alone on stdout (so a script can capture it), and stored only as its SHA-256;
everything else goes to stderr. ``judgekit.cli`` adds :data:`team_app` at its bottom; like every command
module this one imports only the standard library, typer and :mod:`judgekit.cli_common` at its top.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from judgekit.cli_common import command_group, friendly_errors, lazy

auth = lazy("judgekit.auth")
config = lazy("judgekit.config")

team_app = command_group(
    "Who may sign in to a judgekit server bound beyond loopback (judgekit app --host 0.0.0.0), with which role."
)

TeamFileOption = Annotated[
    Path | None,
    typer.Option("--team-file", help="The team file (default: $JUDGEKIT_TEAM_FILE, else ./team.toml)."),
]


@team_app.command("add")
@friendly_errors
def add(
    name: Annotated[str, typer.Argument(help="The member's name: the annotator name their labels carry.")],
    role: Annotated[str, typer.Option("--role", help="viewer | annotator | admin")],
    email: Annotated[str | None, typer.Option("--email", help="Their OIDC sign-in (matched by email).")] = None,
    no_token: Annotated[bool, typer.Option("--no-token", help="OIDC only: issue no token.")] = False,
    replace: Annotated[bool, typer.Option("--replace", help="Update an existing member (a new token "
                                                             "invalidates the old one).")] = False,
    team_file: TeamFileOption = None,
) -> None:
    """Add a member; prints their new access token once (it is stored only as a hash)."""
    path = config.team_file(team_file)
    token = auth.add_member(path, name, role, email=email, token=not no_token, replace=replace)
    typer.echo(f"{name}: role {role} in {path}", err=True)
    if token:
        typer.echo("their access token (shown this once; judgekit keeps only its hash):", err=True)
        typer.echo(token)


@team_app.command("remove")
@friendly_errors
def remove(
    name: Annotated[str, typer.Argument(help="The member to remove; their sessions end at their next click.")],
    team_file: TeamFileOption = None,
) -> None:
    """Remove a member."""
    path = config.team_file(team_file)
    auth.remove_member(path, name)
    typer.echo(f"removed {name} from {path}", err=True)


@team_app.command("list")
@friendly_errors
def list_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
    team_file: TeamFileOption = None,
) -> None:
    """List members: name, role, whether they have a token, their OIDC email (never a token)."""
    team = auth.load_team(config.team_file(team_file))
    rows = [{"name": m.name, "role": str(m.role), "token": bool(m.token_sha256), "email": m.email}
            for m in team.members]
    if as_json:
        typer.echo(json.dumps({"team_file": str(team.path), "members": rows,
                               "oidc": {"domains": list(team.oidc_domains),
                                        "default_role": str(team.oidc_default_role)}}))
        return
    if not rows:
        typer.echo(f"no members in {team.path} (add one with `judgekit team add NAME --role ROLE`)")
    for r in rows:
        typer.echo(f"{r['name']:<24} {r['role']:<10} {'token' if r['token'] else 'no token':<9} {r['email'] or ''}")
