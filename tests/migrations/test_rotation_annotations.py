"""The rotation API's annotations say what it does at run time (a user's type checker reads
them, issue 19): ``on_event`` is called as ``on_event(name, **info)``, so rotate() and reindex()
must not promise a hook that takes one dict."""

from __future__ import annotations

import typing

from sealstore.migrations.rotation import reindex, reseal, worker


def test_on_event_is_annotated_as_the_worker_calls_it():
    expected = typing.get_type_hints(worker.run)["on_event"]
    assert expected == typing.Optional[worker.Event]
    for fn in (reseal.rotate, reindex.reindex):
        assert typing.get_type_hints(fn)["on_event"] == expected, fn.__name__


def test_the_progress_and_profile_arguments_match_the_worker():
    run = typing.get_type_hints(worker.run)
    for fn in (reseal.rotate, reindex.reindex):
        hints = typing.get_type_hints(fn)
        assert hints["progress"] == run["progress"], fn.__name__
        if "profile" in hints:
            assert hints["profile"] == run["profile"], fn.__name__
