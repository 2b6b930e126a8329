"""indexes that keep the dashboard's freshness checks and label probes quick on large label tables

* ``ix_labels_updated_at``: the labels' version (count, largest id, latest ``updated_at``) is read on every
  page render to know whether cached matrices still hold; without it the latest ``updated_at`` scans
  every label (0.16 s for the 1M labels of a 100k-answer demo).
* ``ix_labels_criterion``: which criteria a dataset has labels for is one EXISTS probe per criterion key.

Revision ID: 0008_label_indexes
Revises: 0007_noise_floor
Create Date: 2026-12-01
"""

from alembic import op

revision = "0008_label_indexes"
down_revision = "0007_noise_floor"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("labels") as batch_op:
        batch_op.create_index("ix_labels_updated_at", ["updated_at"], unique=False)
        batch_op.create_index("ix_labels_criterion", ["criterion", "example_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("labels") as batch_op:
        batch_op.drop_index("ix_labels_criterion")
        batch_op.drop_index("ix_labels_updated_at")
