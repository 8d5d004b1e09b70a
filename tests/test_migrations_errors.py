"""No plaintext in the errors of the column conversions (sealstore.migrations.ops): a
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

import sealstore.migrations.ops  # noqa: F401  (op.encrypt_column / op.decrypt_column)


@pytest.fixture
def keyring():
    kr = use_keyring(Keyring.generate())
    yield kr
    forget_keyring()


@pytest.mark.parametrize("db_url", ["postgresql", "mariadb"], indirect=True)
@pytest.mark.parametrize("commit_batches", [True, False])
def test_failing_decrypt_column_prints_no_plaintext(sql_engine, keyring, commit_batches):
    meta = sa.MetaData()
    users = sa.Table("conv_users", meta, sa.Column("id", sa.Integer, primary_key=True,
                     autoincrement=False), sa.Column("ssn", sa.String(40)))  # fmt: skip
    meta.create_all(sql_engine)
    with sql_engine.begin() as conn:
        conn.execute(sa.insert(users), [{"id": i, "ssn": f"SECRET-{i:04d}"} for i in range(20)])
    with sql_engine.connect() as conn:
        op = Operations(MigrationContext.configure(conn))
        op.encrypt_column("conv_users", "ssn", EncryptedString(40), batch_size=7,
                          commit_batches=commit_batches)  # fmt: skip
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
