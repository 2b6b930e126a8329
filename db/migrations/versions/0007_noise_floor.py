"""repeat runs, "cannot assess" verdicts and the response cache (issue 13)

* ``runs.repeat_group`` / ``runs.repeat_index``: the N runs of ``judgekit run --repeat N`` share a
  group name and know their place in it (test–retest agreement is computed across a group).
* ``runs.use_cache``: whether the run may read the response cache (``--no-cache`` turns it off).
* ``criteria.cannot_assess``: the criterion offers the judge an explicit "cannot assess" answer.
* ``verdicts.cannot_assess``: the judge answered "cannot assess" — its own outcome (value NULL), distinct
  from an unscored reply and from a fail.
* ``calls.from_cache``: the reply came from the response cache; no request was sent and nothing billed.
* ``response_cache``: replies of temperature-0 requests, content-addressed by endpoint, model and body.

Revision ID: 0007_noise_floor
Revises: 0006_bundles
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0007_noise_floor"
down_revision = "0006_bundles"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch_op:
        batch_op.add_column(sa.Column("repeat_group", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("repeat_index", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("use_cache", sa.Boolean(), nullable=False, server_default=sa.true()))
        batch_op.create_index("ix_runs_repeat_group", ["repeat_group"], unique=False)
    with op.batch_alter_table("criteria") as batch_op:
        batch_op.add_column(sa.Column("cannot_assess", sa.Boolean(), nullable=False, server_default=sa.false()))
    with op.batch_alter_table("verdicts") as batch_op:
        batch_op.add_column(sa.Column("cannot_assess", sa.Boolean(), nullable=False, server_default=sa.false()))
    with op.batch_alter_table("calls") as batch_op:
        batch_op.add_column(sa.Column("from_cache", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_table(
        "response_cache",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("base_url", sa.Text(), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("reply", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )


def downgrade() -> None:
    op.drop_table("response_cache")
    with op.batch_alter_table("calls") as batch_op:
        batch_op.drop_column("from_cache")
    with op.batch_alter_table("verdicts") as batch_op:
        batch_op.drop_column("cannot_assess")
    with op.batch_alter_table("criteria") as batch_op:
        batch_op.drop_column("cannot_assess")
    with op.batch_alter_table("runs") as batch_op:
        batch_op.drop_index("ix_runs_repeat_group")
        batch_op.drop_column("use_cache")
        batch_op.drop_column("repeat_index")
        batch_op.drop_column("repeat_group")
