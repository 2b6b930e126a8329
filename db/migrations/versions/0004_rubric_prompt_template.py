"""rubrics.prompt_template: a rubric's own judge prompt (a sandboxed Jinja2 template; NULL = judgekit's)

Revision ID: 0004_rubric_prompt_template
Revises: 0003_run_batch
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0004_rubric_prompt_template"
down_revision = "0003_run_batch"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("rubrics") as batch_op:
        batch_op.add_column(sa.Column("prompt_template", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("rubrics") as batch_op:
        batch_op.drop_column("prompt_template")
