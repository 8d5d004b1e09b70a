"""A BlindIndex refuses an index keyring that shares key ids or key material with an encryption
keyring it can see (its source column's, or "default"): SharedIndexKey before any index value
is computed, so no row is written (issue 26, item 2).  SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import base64
import json
import os

import pytest
from sqlalchemy import func, insert, select, update
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import Session

from sealstore.config import load_config
from sealstore.errors import SharedIndexKey
from sealstore.keyring import Key, Keyring, KeyState, use_keyring
from sealstore.keysources.file import KeyFile

from sqlalchemy_cases import User, db, keyrings  # noqa: F401


def _rows(engine, table) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table)).scalar_one()


def _refused_flush(engine, obj) -> SharedIndexKey:
    with Session(engine) as session:
        session.add(obj)
        with pytest.raises(StatementError) as info:
            session.commit()
    assert isinstance(info.value.orig, SharedIndexKey), info.value.orig
    return info.value.orig


def _material_forms(*keyrings: Keyring) -> list[str]:
    out = []
    for kr in keyrings:
        for k in kr.keys:
            if k.state is not KeyState.DESTROYED:
                raw = k.reveal_material()
                out += [raw.hex(), raw.hex().upper(), base64.b64encode(raw).decode(), repr(raw)]
    return out


def _assert_no_material(exc: BaseException, *keyrings: Keyring) -> None:
    text = f"{exc} {exc!r} {exc.__cause__!r} {exc.__context__!r}"
    for form in _material_forms(*keyrings):
        assert form not in text


def test_index_keyring_loaded_from_the_column_key_store_is_refused(db, keyrings, tmp_path):
    """Issue 26: both keyrings loaded from one key file (two objects, same keys)."""
    os.chmod(tmp_path, 0o700)
    source = KeyFile(tmp_path / "keys.json")
    column = use_keyring(source.init())
    index = use_keyring(KeyFile(tmp_path / "keys.json").load(), name="index")
    assert index is not column
    exc = _refused_flush(db, User(email="a@x.org"))
    assert "shares key id(s)" in str(exc) and column.primary.id_hex in str(exc)
    assert "'index'" in str(exc) and "'default'" in str(exc)
    _assert_no_material(exc, column, index)
    assert _rows(db, User.__table__) == 0  # nothing written
    with db.begin() as conn:  # Core: the same refusal, before the statement is sent
        with pytest.raises(StatementError) as info:
            conn.execute(insert(User.__table__), [{"email": "b@x.org"}])
        assert isinstance(info.value.orig, SharedIndexKey)
    assert _rows(db, User.__table__) == 0
    with pytest.raises(SharedIndexKey):  # and lookups
        select(User).where(User.email == "a@x.org")


def test_same_key_ids_with_other_material_are_refused(db, keyrings):
    kid = keyrings.enc.primary.key_id
    use_keyring(Keyring([Key(kid, "AEGIS-128X4", os.urandom(32), state="primary")]), name="index")
    exc = _refused_flush(db, User(email="a@x.org"))
    assert f"shares key id(s) {kid:08x}" in str(exc)
    assert _rows(db, User.__table__) == 0


def test_same_material_under_other_ids_is_refused(db, keyrings):
    enc_key = keyrings.enc.primary
    other_id = (enc_key.key_id + 1) & 0xFFFFFFFF
    index = use_keyring(
        Keyring([Key(other_id, "AEGIS-128X4", enc_key.reveal_material(), state="primary")]),
        name="index",
    )
    exc = _refused_flush(db, User(email="a@x.org"))
    assert "shares key material" in str(exc)
    assert f"{other_id:08x} of 'index' is {enc_key.id_hex} of 'default'" in str(exc)
    _assert_no_material(exc, keyrings.enc, index)
    assert _rows(db, User.__table__) == 0


def test_a_shared_key_added_later_is_refused_from_the_next_write_on(db, keyrings):
    with Session(db) as session:
        session.add(User(email="before@x.org"))
        session.commit()
    # an older column key copied into the index keyring (a non-primary key, under a new id)
    old = keyrings.enc.primary
    keyrings.enc.rotate()
    keyrings.idx.add(Key(0x0BADC0DE, old.suite, old.reveal_material()))
    _refused_flush(db, User(email="after@x.org"))
    with Session(db) as session:  # an UPDATE of the source recomputes the index: refused too
        user = session.scalars(select(User)).one()
        user.email = "changed@x.org"
        with pytest.raises((SharedIndexKey, StatementError)) as info:  # the flush hook's
            session.commit()
        assert isinstance(getattr(info.value, "orig", info.value), SharedIndexKey)
    with db.begin() as conn:  # a Core UPDATE: refused by the engine hook, before sending
        with pytest.raises(SharedIndexKey):
            conn.execute(update(User.__table__).values(email="core@x.org"))
    assert _rows(db, User.__table__) == 1
    with Session(db) as session:
        assert session.scalars(select(User)).one().email == "before@x.org"


def test_a_keyring_registered_in_place_of_another_is_checked_again(db, keyrings):
    with Session(db) as session:
        session.add(User(email="ok@x.org"))
        session.commit()
    use_keyring(keyrings.enc, name="index")  # the very same object
    exc = _refused_flush(db, User(email="no@x.org"))
    assert "same object" in str(exc)
    use_keyring(Keyring.generate(), name="index")  # a separate one again: accepted
    with Session(db) as session:
        session.add(User(email="fine@x.org"))
        session.commit()
    assert _rows(db, User.__table__) == 2


def test_index_on_another_keyrings_column_is_checked_against_both(db, keyrings):
    """The source column's keyring ("vault" here) and the process's "default" keyring."""
    from sealstore.adapters.sqlalchemy import BlindIndex, EncryptedString
    from sqlalchemy import Column, Integer, MetaData, Table

    t = Table(
        "ss_vault_index",
        MetaData(),
        Column("id", Integer, primary_key=True),
        Column("code", EncryptedString(40, keyring="vault")),
        Column("code_index", BlindIndex("code")),
    )
    t.create(db)
    vault_key = keyrings.vault.primary
    use_keyring(
        Keyring([Key(vault_key.key_id, "AEGIS-128L", os.urandom(32), state="primary")]),
        name="index",
    )
    with db.begin() as conn, pytest.raises(StatementError) as info:
        conn.execute(insert(t), [{"id": 1, "code": "c"}])
    assert isinstance(info.value.orig, SharedIndexKey) and "'vault'" in str(info.value.orig)
    default_key = keyrings.enc.primary  # not this column's keyring, but visible: refused too
    use_keyring(
        Keyring([Key(1, "AEGIS-128L", default_key.reveal_material(), state="primary")]),
        name="index",
    )
    with db.begin() as conn, pytest.raises(StatementError) as info:
        conn.execute(insert(t), [{"id": 1, "code": "c"}])
    assert "'default'" in str(info.value.orig)
    assert _rows(db, t) == 0
    use_keyring(Keyring.generate(), name="index")
    with db.begin() as conn:
        conn.execute(insert(t), [{"id": 1, "code": "c"}])
        assert conn.execute(select(t.c.id).where(t.c.code == "c")).scalars().all() == [1]


def test_keyrings_from_named_configurations_are_separate(db, keyrings, tmp_path, monkeypatch):
    """The fixed configuration path: SEALSTORE_KEY_SOURCE__PATH names the column key file and
    does not reach load_config(..., name="index"); the BlindIndex accepts the pair."""
    os.chmod(tmp_path, 0o700)
    for name in list(os.environ):
        if name.startswith("SEALSTORE_") and name != "SEALSTORE_KERNEL":
            monkeypatch.delenv(name)
    KeyFile(tmp_path / "keys.json").init().close()
    KeyFile(tmp_path / "index-keys.json").init().close()
    (tmp_path / "index.toml").write_text(f'[key_source]\npath = "{tmp_path / "index-keys.json"}"\n')
    monkeypatch.setenv("SEALSTORE_KEY_SOURCE__PATH", str(tmp_path / "keys.json"))
    use_keyring(load_config().load_keyring())
    use_keyring(load_config(tmp_path / "index.toml", name="index").load_keyring(), name="index")
    with Session(db) as session:
        session.add(User(email="a@x.org"))
        session.commit()
    with Session(db) as session:
        assert [u.email for u in session.scalars(select(User).where(User.email == "a@x.org"))] == [
            "a@x.org"
        ]
    # the scoped variable points the index configuration at the column key file: refused
    monkeypatch.setenv("SEALSTORE_INDEX_KEY_SOURCE__PATH", str(tmp_path / "keys.json"))
    use_keyring(load_config(tmp_path / "index.toml", name="index").load_keyring(), name="index")
    _refused_flush(db, User(email="b@x.org"))
    assert json.loads((tmp_path / "keys.json").read_text())["keys"]  # untouched store


def test_writers_racing_a_shared_keyring_registration_never_store_its_values(db, keyrings):
    """Four writer threads insert while another thread keeps swapping the "index" registration
    between separate keyrings and one loaded from the column keyring's keys: every write either
    commits an index value of a separate keyring or raises SharedIndexKey with nothing written,
    and lookups find every committed row."""
    import threading

    enc = keyrings.enc
    shared = Keyring([Key(k.key_id, k.suite, k.reveal_material(), state=k.state) for k in enc.keys])
    separate = [keyrings.idx, Keyring.generate()]
    separate_ids = {k.key_id for kr in separate for k in kr.keys}
    stop = threading.Event()
    committed: list[str] = []
    refused: list[int] = []
    errors: list[BaseException] = []

    def swapper():
        i = 0
        while not stop.is_set():
            use_keyring(shared if i % 2 else separate[i // 2 % 2], name="index")
            i += 1
        use_keyring(separate[0], name="index")

    def writer(n: int):
        try:
            for j in range(25):
                email = f"w{n}-{j}@x.org"
                try:
                    with Session(db) as session:
                        session.add(User(email=email))
                        session.commit()
                    committed.append(email)
                except StatementError as exc:
                    if not isinstance(exc.orig, SharedIndexKey):
                        raise
                    refused.append(1)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    swap = threading.Thread(target=swapper)
    writers = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    swap.start()
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    swap.join()
    assert errors == []
    assert len(committed) + len(refused) == 100 and _rows(db, User.__table__) == len(committed)
    with db.connect() as conn:
        stored = conn.execute(select(User.__table__.c.email_index)).scalars().all()
    kids = {int.from_bytes(bytes(v)[:4], "big") for v in stored}
    assert kids <= separate_ids and not kids & {k.key_id for k in enc.keys}
    # every committed row is found under the separate keyrings (both registered in turn)
    found = set()
    for ring in separate:
        use_keyring(ring, name="index")
        with Session(db) as session:
            found |= set(session.scalars(select(User.email).where(User.email.in_(committed))))
    assert found == set(committed)
