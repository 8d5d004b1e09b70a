"""Statements over encrypted columns that would give silently wrong results (ORDER BY, GROUP BY,
DISTINCT, UNION across differently sealed columns, CAST, tuples, function comparisons) raise
UnsupportedComparison when compiled, before anything reaches the database; the statements that
work keep working, and SQLAlchemy's compiled cache is unaffected.  SQLite, PostgreSQL, MariaDB;
Core and ORM."""

from __future__ import annotations

import pytest
from sqlalchemy import (
    LargeBinary,
    String,
    cast,
    delete,
    desc,
    distinct,
    event,
    except_,
    exists,
    func,
    insert,
    intersect,
    literal_column,
    nulls_first,
    select,
    tuple_,
    type_coerce,
    union,
    union_all,
    update,
)
from sqlalchemy.engine.interfaces import CacheStats
from sqlalchemy.orm import Session, aliased

from sealstore.errors import UnsupportedComparison

from sqlalchemy_cases import Secret, User, Vault, db, events, keyrings, raw  # noqa: F401

users = User.__table__
PLAIN = "987-65-4321"

#: statements that would run and return wrong rows (or InvalidTag), each refused when compiled
REFUSED = {
    "order_by": lambda: select(User).order_by(User.ssn),
    "order_by_core": lambda: select(users.c.id).order_by(users.c.email),
    "order_by_label_name": lambda: select(User.ssn).order_by("ssn"),
    "order_by_desc_name": lambda: select(User.ssn.label("s")).order_by(desc("s")),
    "order_by_nulls_first_fn": lambda: select(User.id).order_by(nulls_first(User.ssn)),
    "order_by_function": lambda: select(User.id).order_by(func.lower(User.ssn)),
    "order_by_raw_bytes": lambda: select(User.id).order_by(type_coerce(User.ssn, LargeBinary)),
    "order_by_alias": lambda: select(aliased(User)).order_by(aliased(User).ssn),
    "order_by_in_subquery": lambda: select(select(User.id).order_by(User.ssn).limit(2).subquery()),
    "group_by": lambda: select(func.count()).select_from(User).group_by(User.ssn),
    "group_by_core_selected": lambda: select(users.c.email, func.count()).group_by(users.c.email),
    "group_by_function": lambda: (
        select(func.count()).select_from(User).group_by(func.lower(User.ssn))
    ),
    "group_by_other_table_key": lambda: (
        select(Vault.id, User.ssn).join(User, User.id == Vault.id).group_by(Vault.id, User.ssn)
    ),
    "distinct": lambda: select(User.ssn).distinct(),
    "distinct_other_alias_key": lambda: _self_join().distinct(),
    "distinct_with_plain": lambda: select(User.name, User.email).distinct(),
    "distinct_subquery_without_key": lambda: select(select(User.ssn).subquery().c.ssn).distinct(),
    "cast_eq": lambda: select(User).where(cast(User.ssn, String) == PLAIN),
    "cast_selected": lambda: select(cast(User.ssn, String(40))),
    "lower_eq": lambda: select(User).where(func.lower(User.ssn) == PLAIN),
    "lower_in": lambda: select(User.id).where(func.upper(User.email).in_([PLAIN])),
    "lower_like": lambda: select(User.id).where(func.lower(User.ssn).like(PLAIN)),
    "tuple_in": lambda: select(User).where(tuple_(User.ssn, User.id).in_([(PLAIN, 1)])),
    "tuple_eq": lambda: select(User.id).where(tuple_(User.id, User.email) == tuple_(1, PLAIN)),
    "union_two_tables": lambda: union(select(User.ssn), select(Vault.code)),
    "union_all_two_columns": lambda: union_all(select(User.ssn), select(User.email)),
    "union_plain_first": lambda: union(select(User.name), select(User.ssn)),
    "union_encrypted_first": lambda: union(select(User.ssn), select(User.name)),
    "intersect_two_tables": lambda: intersect(select(User.ssn), select(Vault.code)),
    "except_core_tables": lambda: except_(select(users.c.email), select(events.c.payload)),
    "union_nested": lambda: union(select(User.ssn), union(select(User.ssn), select(Vault.code))),
    "union_order_by": lambda: union(select(User.ssn), select(User.ssn)).order_by("ssn"),
    "window_order_by": lambda: select(func.row_number().over(order_by=User.ssn)),
    "window_partition_by": lambda: select(func.count().over(partition_by=User.email)),
    "count_distinct": lambda: select(func.count(distinct(User.ssn))),
    "having_function": lambda: (
        select(User.name).group_by(User.name).having(func.upper(User.ssn) == PLAIN)
    ),
    "within_group": lambda: select(func.percentile_disc(0.5).within_group(User.visits)),
    "update_where_function": lambda: (
        update(users).where(func.lower(users.c.ssn) == PLAIN).values(name="x")
    ),
    "delete_where_cast": lambda: delete(users).where(cast(users.c.ssn, String) == PLAIN),
}
if hasattr(func.count(), "aggregate_order_by"):  # SQLAlchemy 2.1 and later
    REFUSED["aggregate_order_by"] = lambda: select(func.count(User.id).aggregate_order_by(User.ssn))


def _self_join():
    other = aliased(User)
    return select(User.id, other.ssn).join(other, other.id == User.id)


_DB_ONLY = {"update_where_function", "delete_where_cast"}


def _seed(engine) -> None:
    with Session(engine) as session:
        session.add_all(
            [User(id=i, ssn=PLAIN, email=f"u{i}@x.org", name=f"n{i % 2}") for i in (1, 2, 3)]
            + [Vault(id=1, code=PLAIN)]
        )
        session.commit()


@pytest.fixture
def executed(db):
    """The SQL statements that reach the database from now on."""
    seen: list[str] = []

    def record(conn, cursor, statement, *args):
        seen.append(statement)

    event.listen(db, "before_cursor_execute", record)
    yield seen
    event.remove(db, "before_cursor_execute", record)


def _assert_clean(exc: BaseException) -> None:
    while exc is not None:
        assert PLAIN not in str(exc) and PLAIN not in repr(exc.args)
        exc = exc.__cause__ or exc.__context__


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_before_reaching_the_database(db, executed, name):
    _seed(db)
    executed.clear()
    with db.connect() as conn:
        for _ in range(2):  # a refused statement raises each time: nothing was cached for it
            with pytest.raises(UnsupportedComparison) as caught:
                conn.execute(REFUSED[name]())
            _assert_clean(caught.value)
            assert str(caught.value).startswith(("ss_users.", "ss_vault.", "ss_events."))
    with Session(db) as session:
        with pytest.raises(UnsupportedComparison):
            session.execute(REFUSED[name]())
    assert executed == []
    assert [r.name for r in _rows(db)] == ["n1", "n0", "n1"]  # nothing updated or deleted


@pytest.mark.parametrize("name", sorted(set(REFUSED) - _DB_ONLY))
def test_refused_by_plain_compile(name):
    # no engine at all: str() and compile() refuse too, on each dialect's compiler
    from sqlalchemy.dialects import mysql, postgresql, sqlite

    for dialect in (sqlite.dialect(), postgresql.dialect(), mysql.dialect()):
        with pytest.raises(UnsupportedComparison):
            REFUSED[name]().compile(dialect=dialect)


def _rows(engine):
    with Session(engine) as session:
        return list(session.scalars(select(User).order_by(User.id)))


def test_orm_query_api_refuses(db, executed):
    _seed(db)
    executed.clear()
    with Session(db) as session:
        with pytest.raises(UnsupportedComparison):
            session.query(User).order_by(User.ssn).all()
        with pytest.raises(UnsupportedComparison):
            session.query(User.ssn).distinct().all()
        with pytest.raises(UnsupportedComparison):
            session.query(User.ssn, func.count()).group_by(User.ssn).all()
        with pytest.raises(UnsupportedComparison):
            session.query(User).filter(cast(User.ssn, String) == PLAIN).all()
    assert executed == []


def test_allowed_statements_work(db):
    _seed(db)
    with Session(db) as session:
        by_index = session.scalars(select(User).order_by(User.email_index, User.id)).all()
        assert sorted(u.id for u in by_index) == [1, 2, 3]
        assert [u.id for u in session.scalars(select(User).order_by(User.name, desc(User.id)))] == [
            2,
            3,
            1,
        ]
        assert session.scalars(select(User.id).order_by(User.ssn.is_(None), User.id)).all() == [
            1,
            2,
            3,
        ]
        groups = session.execute(
            select(User.name, func.count(User.ssn)).group_by(User.name).order_by(User.name)
        )
        assert groups.all() == [("n0", 1), ("n1", 2)]
        per_row = session.execute(
            select(User.id, User.ssn).group_by(User.id, User.ssn).order_by(User.id)
        )
        assert per_row.all() == [(1, PLAIN), (2, PLAIN), (3, PLAIN)]
        assert [u.id for u in session.scalars(select(User).distinct().order_by(User.id))] == [
            1,
            2,
            3,
        ]
        other = aliased(User)
        mine = (
            select(other.id, other.ssn)
            .join(User, other.id == User.id)
            .distinct()
            .order_by(other.id)
        )
        assert session.execute(mine).all() == [(1, PLAIN), (2, PLAIN), (3, PLAIN)]
        assert session.execute(select(User.id, User.ssn).distinct().order_by(User.id)).all()[0] == (
            1,
            PLAIN,
        )
        same = session.scalars(
            union_all(select(User.ssn), select(User.ssn).where(User.id > 1))
        ).all()
        assert same == [PLAIN] * 5
        assert session.scalar(select(func.count(User.ssn))) == 3
        assert session.scalar(select(func.count(distinct(User.name)))) == 2
        ranked = select(
            User.id, func.row_number().over(partition_by=User.name, order_by=User.id).label("r")
        )
        assert session.execute(ranked.order_by(User.id)).all() == [(1, 1), (2, 1), (3, 2)]
        per_row = select(User.id, func.count().over(partition_by=(User.id, User.ssn)))
        assert session.execute(per_row.order_by(User.id)).all() == [(1, 1), (2, 1), (3, 1)]
        assert session.scalar(select(exists().where(User.id == 2))) is True
        sub = select(User.id, User.ssn).subquery()
        assert session.execute(select(sub.c.ssn).where(sub.c.id == 3)).scalar_one() == PLAIN
        cte = select(User.ssn).where(User.id == 1).cte()
        assert session.scalars(select(cte.c.ssn)).all() == [PLAIN]
        assert session.scalars(
            select(User.id).where(tuple_(User.id, User.name).in_([(2, "n0")]))
        ).all() == [2]
        stored = session.scalar(select(cast(User.ssn, LargeBinary)).where(User.id == 1))
        assert bytes(stored) == raw(db, "ss_users", "ssn", 1)  # the stored bytes, not a plaintext
        assert session.scalars(select(User).where(User.email == "u2@x.org")).one().id == 2


def test_refused_statement_does_not_poison_the_cache(db):
    _seed(db)
    allowed = lambda: select(User.id, User.ssn).distinct().order_by(User.id)  # noqa: E731
    refused = lambda: select(User.ssn).distinct()  # noqa: E731
    with db.connect() as conn:
        first = conn.execute(allowed())
        assert first.context.cache_hit == CacheStats.CACHE_MISS
        assert first.all()[0] == (1, PLAIN)
        for _ in range(2):
            with pytest.raises(UnsupportedComparison):
                conn.execute(refused())
        again = conn.execute(allowed())
        assert again.context.cache_hit == CacheStats.CACHE_HIT
        assert again.all()[0] == (1, PLAIN)


def test_insert_returning_model_still_compiles(db):
    with Session(db) as session:
        if not db.dialect.insert_returning:
            pytest.skip("no INSERT ... RETURNING on this database")
        made = session.scalars(insert(User).returning(User), [{"id": 7, "ssn": PLAIN}]).all()
        assert [(u.id, u.ssn) for u in made] == [(7, PLAIN)]


def test_label_references_of_plain_columns_still_order(db):
    _seed(db)
    with db.connect() as conn:
        rows = conn.execute(
            select(users.c.id, users.c.name.label("n")).order_by(desc("n"), "id")
        ).all()
        assert [r.id for r in rows] == [1, 3, 2]
        assert conn.execute(select(literal_column("1").label("one")).order_by("one")).scalar() == 1


def test_checked_expressions_keep_their_result_types(db):
    # the compilers wrap visit_cast/visit_binary/visit_tuple/visit_select: the result columns
    # they describe keep their types (a Boolean comparison, a Numeric cast, a UNION column)
    _seed(db)
    with db.connect() as conn:
        row = conn.execute(
            select(
                User.id == 1,
                cast(User.id, String(10)),
                tuple_(User.id, User.name) == tuple_(1, "n1"),
            ).where(User.id == 1)
        ).one()
        assert row == (True, "1", True) and type(row[0]) is bool and type(row[2]) is bool
        assert sorted(
            conn.execute(union(select(User.id == 1), select(User.id == 2))).scalars()
        ) == [False, True]
        assert (
            conn.execute(select(cast(User.name, String(5))).where(User.id == 2)).scalar_one()
            == "n0"
        )
