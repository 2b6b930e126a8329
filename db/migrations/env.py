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
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # Batch mode recreates a table (copy, drop, rename); with foreign keys on, dropping the old
            # table would fire the ON DELETE actions of every row pointing at it. The pragma only takes
            # effect outside a transaction, so it is set before the migration's transaction begins.
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
        try:
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                render_as_batch=sqlite,
            )
            with context.begin_transaction():
                context.run_migrations()
            connection.commit()
            if sqlite:
                broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise RuntimeError(f"migration left rows that break a foreign key: {broken[:5]}")
        finally:
            if sqlite:
                connection.exec_driver_sql("PRAGMA foreign_keys=ON")


run_migrations_online()
