"""runs.batch: state of an OpenAI Batch API submission (input file, batch id, status) for resuming

Revision ID: 0003_run_batch
Revises: 0002_annotator_role
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0003_run_batch"
down_revision = "0002_annotator_role"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch_op:
        batch_op.add_column(sa.Column("batch", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch_op:
        batch_op.drop_column("batch")
