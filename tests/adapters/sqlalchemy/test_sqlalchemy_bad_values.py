"""A value an encrypted column cannot hold raises a sealstore.errors exception (that is also the
matching built-in: UnencodableValue is a ValueError, WrongValueType a TypeError) before
anything is written, on every database, and nothing of the value is in the error."""

from __future__ import annotations

import decimal
import enum
import traceback

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import StatementError

from sealstore.adapters.sqlalchemy import Encrypted, EncryptedJSON, EncryptedString
from sealstore.errors import SealstoreError, UnencodableValue, WrongValueType
from sealstore.keyring import Keyring, forget_keyring, use_keyring

MARK = "MARKER-7f3a"


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


CASES = [  # (column type, bad value, error class)
    (Encrypted(sa.Enum(Colour)), f"{MARK}-not-a-member", UnencodableValue),
    (Encrypted(sa.Numeric(10, 2)), decimal.Decimal("sNaN"), UnencodableValue),
    (Encrypted(sa.Numeric(10, 2)), decimal.Decimal("NaN123"), UnencodableValue),
    (EncryptedString(60), f"{MARK}\udcff", UnencodableValue),
    (Encrypted(sa.Uuid(as_uuid=False)), f"{MARK}-not-a-uuid", UnencodableValue),
    (Encrypted(sa.Integer()), f"{MARK}", WrongValueType),
    (Encrypted(sa.Date()), f"{MARK}", WrongValueType),
    (EncryptedJSON(), {MARK: object()}, WrongValueType),
]
IDS = ["enum", "snan", "nan-payload", "surrogate", "uuid", "int", "date", "json"]


@pytest.fixture
def keyring():
    kr = use_keyring(Keyring.generate())
    yield kr
    forget_keyring()


def _text(exc: BaseException) -> str:
    parts = []
    while exc is not None:
        parts += ["".join(traceback.format_exception_only(type(exc), exc)), repr(exc.args)]
        exc = exc.__cause__ or exc.__context__
    return "\n".join(parts)


@pytest.mark.parametrize(("type_", "value", "error"), CASES, ids=IDS)
def test_the_codec_raises_a_sealstore_error_that_is_also_the_builtin(keyring, type_, value, error):
    column = sa.Table("bad_values", sa.MetaData(), sa.Column("v", type_)).c.v
    with pytest.raises(error) as caught:
        column.type.process_bind_param(value, sa.create_engine("sqlite://").dialect)
    assert isinstance(caught.value, SealstoreError)
    assert isinstance(caught.value, ValueError if error is UnencodableValue else TypeError)
    assert MARK not in _text(caught.value)


@pytest.mark.parametrize(("type_", "value", "error"), CASES, ids=IDS)
def test_nothing_is_written(keyring, sql_engine, type_, value, error):
    table = sa.Table("bad_values", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True),
                     sa.Column("v", type_))  # fmt: skip
    table.create(sql_engine)
    with pytest.raises(StatementError) as caught, sql_engine.begin() as conn:
        conn.execute(sa.insert(table), [{"id": 1, "v": value}])
    assert isinstance(caught.value.orig, error)
    with sql_engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one() == 0
