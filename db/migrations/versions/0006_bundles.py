"""bundles: answers grouped by metadata fields, bundle-level runs and verdicts, per-bundle K.O. rules

Seed 002's holistic call scores a *bundle* of answers (a pack of prompts answered by one model) from
the per-answer verdicts. New tables: ``bundles`` + ``bundle_examples`` (the grouping), ``run_bundles``
(the bundles a bundle-level run covers, with the K.O. rule each was judged under) and
``bundle_verdicts`` (run × bundle × criterion). A call is now about an example *or* a bundle:
``calls.example_id`` becomes nullable and ``calls.bundle_id`` is added. ``rubrics.bundle_ko_rules``
holds the rubric's K.O. rules per metadata value.

On SQLite, making ``calls.example_id`` nullable recreates the ``calls`` table (batch mode); the
migration environment switches foreign keys off meanwhile, so dropping the old table does not set
``verdicts.call_id`` to NULL.

Revision ID: 0006_bundles
Revises: 0005_hardening
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0006_bundles"
down_revision = "0005_hardening"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("rubrics") as batch_op:
        batch_op.add_column(sa.Column("bundle_ko_rules", sa.JSON(), nullable=True))
    op.create_table(
        "bundles",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("fields", sa.Text(), nullable=False),
        sa.Column("key_values", sa.JSON(), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("dataset_id", "key_hash", name="uq_bundles_dataset_key"),
    )
    op.create_index("ix_bundles_dataset_id", "bundles", ["dataset_id"])
    op.create_table(
        "bundle_examples",
        sa.Column("bundle_id", sa.Integer(), nullable=False),
        sa.Column("example_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["bundle_id"], ["bundles.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["example_id"], ["examples.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("bundle_id", "example_id"),
    )
    op.create_table(
        "run_bundles",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("bundle_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("ko_criterion", sa.String(length=64), nullable=True),
        sa.Column("ko_floor", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["bundle_id"], ["bundles.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "bundle_id"),
    )
    with op.batch_alter_table("calls") as batch_op:
        batch_op.alter_column("example_id", existing_type=sa.Integer(), nullable=True)
        batch_op.add_column(sa.Column("bundle_id", sa.Integer(), nullable=True))
        batch_op.create_foreign_key("fk_calls_bundle_id", "bundles", ["bundle_id"], ["id"], ondelete="CASCADE")
    op.create_table(
        "bundle_verdicts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("bundle_id", sa.Integer(), nullable=False),
        sa.Column("criterion_id", sa.Integer(), nullable=False),
        sa.Column("value", sa.Integer(), nullable=True),
        sa.Column("rationale", sa.Text(), nullable=True),
        sa.Column("red_flags", sa.JSON(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("call_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["bundle_id"], ["bundles.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["call_id"], ["calls.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["criterion_id"], ["criteria.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "bundle_id", "criterion_id", name="uq_bundle_verdicts_run_bundle_crit"),
    )
    op.create_index("ix_bundle_verdicts_run_id", "bundle_verdicts", ["run_id"])


def downgrade() -> None:
    # bundle-level calls have no example: they go with the bundle-level runs' verdicts
    op.execute("DELETE FROM calls WHERE example_id IS NULL")
    op.drop_index("ix_bundle_verdicts_run_id", table_name="bundle_verdicts")
    op.drop_table("bundle_verdicts")
    with op.batch_alter_table("calls") as batch_op:
        batch_op.drop_constraint("fk_calls_bundle_id", type_="foreignkey")
        batch_op.drop_column("bundle_id")
        batch_op.alter_column("example_id", existing_type=sa.Integer(), nullable=False)
    op.drop_table("run_bundles")
    op.drop_table("bundle_examples")
    op.drop_index("ix_bundles_dataset_id", table_name="bundles")
    op.drop_table("bundles")
    with op.batch_alter_table("rubrics") as batch_op:
        batch_op.drop_column("bundle_ko_rules")
