"""hardening: run leases, the database's identity, bounded raw replies (length and hash)

* ``run_leases`` — one row per run being executed (owner, host, pid, heartbeat): two processes never
  send the same run's calls (judgekit.lease).
* ``database_identity`` — one row, an id written when the schema is created: every cache key includes it,
  so a database deleted and recreated at the same URL never shows the old one's numbers.
* ``calls.response_chars`` / ``calls.response_sha256`` — a raw reply is stored bounded (head and tail),
  with its full length and hash.

Revision ID: 0005_hardening
Revises: 0004_rubric_prompt_template
Create Date: 2026-12-01
"""

import datetime as dt
import uuid

import sqlalchemy as sa
from alembic import op

revision = "0005_hardening"
down_revision = "0004_rubric_prompt_template"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_leases",
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("host", sa.String(200), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("acquired_at", sa.DateTime(), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(), nullable=False),
    )
    identity = op.create_table(
        "database_identity",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.bulk_insert(identity, [{"id": uuid.uuid4().hex, "created_at": dt.datetime.now(dt.UTC).replace(tzinfo=None)}])
    with op.batch_alter_table("calls") as batch_op:
        batch_op.add_column(sa.Column("response_chars", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("response_sha256", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("calls") as batch_op:
        batch_op.drop_column("response_sha256")
        batch_op.drop_column("response_chars")
    op.drop_table("database_identity")
    op.drop_table("run_leases")
