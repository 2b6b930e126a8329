"""Alembic environment: judgekit passes its engine in ``config.attributes['engine']``.

Run migrations through ``judgekit init`` (or any store entry point, which migrates on first use);
``alembic -x url=... upgrade head`` also works from the repository root with db/alembic.ini.
"""

from alembic import context
from sqlalchemy import create_engine

from judgekit.store import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    engine = config.attributes.get("engine")
    if engine is None:
        url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
        engine = create_engine(url)
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


run_migrations_online()
