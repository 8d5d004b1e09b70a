"""The smaller rotation CLI pieces: ``db init``, ``keys destroy`` (refused like retire), a dead
job shown as dead and taken over, and a restarted rotation that claims no batch of a column
already done."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import sqlalchemy as sa
from sealstore.migrations.rotation import jobs
from sealstore.migrations.schema import drop_tables, sealstore_jobs
from test_rotate_cli import add_people, app, cli  # noqa: F401  (app is a fixture)


def test_db_init_creates_the_job_tables(app, capsys):  # noqa: F811
    drop_tables(app.engine)
    code, out, err = cli(capsys, "--config", "main.json", "db", "init", "--db", app.cols[1])
    assert code == 0, err and "sealstore tables ready" in out
    assert {"sealstore_jobs", "sealstore_job_batches"} <= set(
        sa.inspect(app.engine).get_table_names()
    )
    add_people(app, 10)
    cli(capsys, "--config", "main.json", "keys", "rotate")
    code, out, err = cli(capsys, "--config", "main.json", "rotate", *app.cols)
    assert code == 0, err
    code, out, _ = cli(capsys, "--config", "main.json", "db", "init", "--db", app.cols[1])
    assert code == 0  # idempotent


def test_keys_destroy_is_refused_like_retire(app, capsys):  # noqa: F811
    add_people(app, 20)
    old = app.keyrings()[0].primary.id_hex
    cli(capsys, "--config", "main.json", "keys", "rotate")
    code, _, err = cli(capsys, "--config", "main.json", "keys", "destroy", old, *app.cols)
    assert code == 1 and f"refusing to destroy key {old}: 18 values still use it" in err
    code, _, err = cli(capsys, "--config", "main.json", "keys", "destroy", old)
    assert code == 2 and "nothing to check" in err
    code, out, _ = cli(capsys, "--config", "main.json", "keys", "list", "--json")
    assert {k["id"]: k["state"] for k in json.loads(out)}[old] == "active"
    assert cli(capsys, "--config", "main.json", "rotate", *app.cols)[0] == 0
    code, out, err = cli(capsys, "--config", "main.json", "keys", "destroy", old, *app.cols)
    assert code == 0, err
    assert f"key {old} destroyed; checked cli_people.email" in out
    code, out, _ = cli(capsys, "--config", "main.json", "keys", "list", "--json")
    assert {k["id"]: k["state"] for k in json.loads(out)}[old] == "destroyed"


def test_keys_destroy_force_says_what_breaks(app, capsys):  # noqa: F811
    add_people(app, 10)
    old = app.keyrings()[0].primary.id_hex
    cli(capsys, "--config", "main.json", "keys", "rotate")
    code, out, err = cli(
        capsys, "--config", "main.json", "keys", "destroy", old, "--force", *app.cols
    )
    assert code == 0 and "--force: destroying key" in err and "never open again" in err
    assert f"key {old} destroyed (forced)" in out


def test_a_job_without_heartbeat_is_dead_and_taken_over(app, capsys):  # noqa: F811
    add_people(app, 30)
    cli(capsys, "--config", "main.json", "keys", "rotate")
    primary = app.keyrings()[0].primary.key_id
    job, created = jobs.start_job(app.engine, "rotate", "cli_people", "email", primary, 8)
    assert created
    stale = datetime.now(timezone.utc) - timedelta(seconds=jobs.LEASE_SECONDS + 60)
    with app.engine.begin() as conn:
        conn.execute(sa.update(sealstore_jobs).values(heartbeat_at=stale, worker="gone:1"))
    code, out, _ = cli(capsys, "--config", "main.json", "status", *app.cols)
    assert code == 1 and f"job {job.job_id}: rotate cli_people.email" in out and "DEAD" in out
    code, out, _ = cli(capsys, "--config", "main.json", "status", "--json", *app.cols)
    assert [j["dead"] for j in json.loads(out)["jobs"]] == [True]
    code, out, err = cli(capsys, "--config", "main.json", "rotate", *app.cols)
    assert code == 0, err
    assert f"cli_people.email: job {job.job_id} done" in out  # the dead job, carried on
    code, out, _ = cli(capsys, "--config", "main.json", "status", *app.cols)
    assert "no running jobs" in out
    with app.engine.begin() as conn:  # a fresh heartbeat is alive
        fresh = jobs.Job(**{**job.__dict__, "heartbeat_at": datetime.now(timezone.utc)})
    assert not jobs.is_dead(fresh)


def test_restarted_rotation_claims_no_batch_of_a_finished_column(app, capsys):  # noqa: F811
    add_people(app, 40)
    cli(capsys, "--config", "main.json", "keys", "rotate")
    assert cli(capsys, "--config", "main.json", "rotate", "--batch-size", "4", *app.cols)[0] == 0
    with app.engine.connect() as conn:
        before = conn.execute(sa.text("SELECT count(*) FROM sealstore_job_batches")).scalar()
    code, out, err = cli(capsys, "--config", "main.json", "rotate", "--batch-size", "4", *app.cols)
    assert code == 0, err
    assert "re-sealed 0 values in 0 batches" in out
    with app.engine.connect() as conn:
        after = conn.execute(sa.text("SELECT count(*) FROM sealstore_job_batches")).scalar()
    assert after == before
