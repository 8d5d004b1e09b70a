"""Encrypted SQLAlchemy columns with blind indexes (see docs/COLUMNS.md).

::

    from sealstore.adapters.sqlalchemy import (
        BlindIndex, Encrypted, EncryptedBinary, EncryptedJSON, EncryptedString)

    class User(Base):
        __tablename__ = "users"
        id: Mapped[int] = mapped_column(primary_key=True)
        ssn: Mapped[str] = mapped_column(EncryptedString(11))
        profile: Mapped[dict] = mapped_column(EncryptedJSON())
        avatar: Mapped[bytes] = mapped_column(EncryptedBinary())
        born: Mapped[date] = mapped_column(Encrypted(Date))
        email: Mapped[str] = mapped_column(EncryptedString(320))
        email_index: Mapped[bytes] = mapped_column(BlindIndex("email"), index=True)

    sealstore.keyring.use_keyring(column_keyring)              # "default"
    sealstore.keyring.use_keyring(index_keyring, name="index")  # blind-index keys

    session.scalars(select(User).where(User.email == "a@example.org"))
"""

from sealstore.extras import require

require("sqlalchemy", "sealstore.adapters.sqlalchemy", ("sqlalchemy",))  # before any import of it

# first: its before_execute hook records the execution's tenant for the hooks registered after it
from . import tenancy as _tenancy  # noqa: F401,I001  (tenant columns are checked there too)
from . import fetching as _fetching  # noqa: F401  (opens encrypted columns as rows are fetched)
from . import orm as _orm  # noqa: F401  (registers the mapper hooks)
from . import results as _results  # noqa: F401  (binary results on psycopg 3)
from . import schema as _schema  # noqa: F401  (registers the Column attach listener)
from . import statements as _statements  # noqa: F401  (refuses ORDER BY, GROUP BY... over ciphertext)
from . import writes as _writes  # noqa: F401  (checks every INSERT/UPDATE, keeps indexes in step)
from .blind_index import INDEX_KEYRING, BlindIndex
from .codecs import Codec, codec_for
from .rows import PreSealed, SealedRowValue, seal_for_row
from .types import (
    DEFAULT_KEYRING,
    MAX_OVERHEAD,
    Encrypted,
    EncryptedBinary,
    EncryptedJSON,
    EncryptedString,
    EncryptedText,
    EncryptedType,
)

__all__ = [
    "DEFAULT_KEYRING",
    "INDEX_KEYRING",
    "MAX_OVERHEAD",
    "EncryptedType",
    "EncryptedString",
    "EncryptedText",
    "EncryptedBinary",
    "EncryptedJSON",
    "Encrypted",
    "BlindIndex",
    "PreSealed",
    "SealedRowValue",
    "seal_for_row",
    "Codec",
    "codec_for",
]
