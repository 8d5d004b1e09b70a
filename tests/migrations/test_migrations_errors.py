"""No plaintext in the errors of the column conversions (sealstore.migrations.alembic.ops): a
decrypt_column whose new column cannot hold a value fails with DatabaseOperationFailed, whose
message, cause and context carry none of the statement's parameters."""

from __future__ import annotations

import traceback

import pytest
import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations
from sealstore.adapters.sqlalchemy import EncryptedString
from sealstore.errors import DatabaseOperationFailed
from sealstore.keyring import Keyring, forget_keyring, use_keyring

import sealstore.migrations.alembic.ops  # noqa: F401  (op.encrypt_column / op.decrypt_column)


@pytest.fixture
def keyring():
    kr = use_keyring(Keyring.generate())
    yield kr
    forget_keyring()


def _plaintext_users(engine) -> None:
    """Table conv_users: ids 0..19, each with a plaintext ``SECRET-00NN`` in ``ssn``."""
    meta = sa.MetaData()
    users = sa.Table("conv_users", meta, sa.Column("id", sa.Integer, primary_key=True,
                     autoincrement=False), sa.Column("ssn", sa.String(40)))  # fmt: skip
    meta.create_all(engine)
    with engine.begin() as conn:
        conn.execute(sa.insert(users), [{"id": i, "ssn": f"SECRET-{i:04d}"} for i in range(20)])


@pytest.mark.parametrize("db_url", ["postgresql", "mariadb"], indirect=True)
@pytest.mark.parametrize("commit_batches", [True, False])
def test_failing_decrypt_column_prints_no_plaintext(sql_engine, keyring, commit_batches):
    _plaintext_users(sql_engine)
    with sql_engine.connect() as conn:
        op = Operations(MigrationContext.configure(conn))
        op.encrypt_column("conv_users", "ssn", EncryptedString(40), batch_size=7,
                          commit_batches=commit_batches, scrub=False)  # fmt: skip
        conn.commit()
        with pytest.raises(DatabaseOperationFailed) as caught:
            op.decrypt_column("conv_users", "ssn", EncryptedString(40), plain_type=sa.String(4),
                              batch_size=7, commit_batches=commit_batches)  # fmt: skip
        conn.rollback()
    err = caught.value
    text = "".join(traceback.format_exception(err)) + repr(err)
    assert "SECRET" not in text and "parameters" not in text
    assert err.__cause__ is None and err.__context__ is None
    assert "DecryptColumnOp conv_users.ssn" in str(err)


@pytest.mark.parametrize("db_url", ["sqlite", "postgresql", "mariadb"], indirect=True)
def test_decrypt_column_read_errors_name_the_row_and_carry_nothing_of_the_value(
    sql_engine, keyring
):
    from sealstore.errors import InvalidTag, MalformedCiphertext

    _plaintext_users(sql_engine)
    with sql_engine.connect() as conn:
        Operations(MigrationContext.configure(conn)).encrypt_column(
            "conv_users", "ssn", EncryptedString(40), batch_size=7, scrub=False
        )
        conn.commit()
    # (the header CHECK that encrypt_column adds keeps values that were never sealed out)
    for row, damage, error in ((13, lambda v: v[:30], MalformedCiphertext),  # truncated
                               (16, lambda v: v[:-1] + bytes([v[-1] ^ 1]), InvalidTag)):  # fmt: skip
        with sql_engine.begin() as conn:
            value = conn.execute(
                sa.text(f"SELECT ssn FROM conv_users WHERE id = {row}")
            ).scalar_one()
            stored = damage(bytes(value))
            conn.execute(
                sa.text("UPDATE conv_users SET ssn = :v WHERE id = :i"), {"v": stored, "i": row}
            )
        with sql_engine.connect() as conn:
            op = Operations(MigrationContext.configure(conn))
            with pytest.raises(error) as caught:
                op.decrypt_column("conv_users", "ssn", EncryptedString(40), plain_type=sa.String(40),
                                  batch_size=7, commit_batches=False)  # fmt: skip
            conn.rollback()
        err = caught.value
        text = "".join(traceback.format_exception(err)) + repr(err) + repr(err.args)
        assert str(err).startswith(f"conv_users.ssn (primary key {row})"), str(err)
        assert "SECRET" not in text and stored.hex()[:12] not in text
        assert err.__cause__ is None and err.__context__ is None
        with sql_engine.begin() as conn:  # the next case starts from a readable value again
            conn.execute(sa.text("UPDATE conv_users SET ssn = :v WHERE id = :i"),
                         {"v": EncryptedString(40, table="conv_users", column="ssn").seal("SECRET-x"),
                          "i": row})  # fmt: skip
