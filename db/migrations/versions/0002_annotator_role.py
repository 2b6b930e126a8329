"""annotator role: an adjudicator's label settles the human consensus

Revision ID: 0002_annotator_role
Revises: 0001_initial
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0002_annotator_role"
down_revision = "0001_initial"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("annotators") as batch_op:
        batch_op.add_column(sa.Column("role", sa.String(length=16), nullable=False, server_default="annotator"))


def downgrade() -> None:
    with op.batch_alter_table("annotators") as batch_op:
        batch_op.drop_column("role")
