"""``sealstore s3 ...`` commands (hooked into the ``sealstore`` console script).

    sealstore [--config PATH] s3 rotate s3://BUCKET[/PREFIX] [--endpoint-url URL]
              [--checkpoint PATH] [--pause SECONDS] [--dry-run] [--seal-plaintext]
              [--progress auto|bar|lines|none] [--json]

The keyring comes from the sealstore configuration, S3 access from the usual boto3 settings
(environment, profile, ``--endpoint-url`` for S3-compatible stores).  On a terminal a progress
bar (objects done of the total counted first, rate, ETA) runs on stderr; otherwise each changed
object is one line on stdout.  The run ends with one total line (or, with ``--json``, one JSON
document and nothing else on stdout).  The position is kept in ``--checkpoint`` (default
``rotate-<hash of the URL>.json`` in ``$XDG_STATE_HOME/sealstore``, else
``~/.local/state/sealstore``; docs/S3.md).  Exit
status: 0 done, 1 some objects failed (listed on stderr), 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from typing import Any

from ..objects.progress import BAR_MODES, make_object_progress, wants_bar

__all__ = ["add_commands", "main"]


def _cmd_rotate(args: argparse.Namespace) -> int:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError
    from sealstore.config import load_config
    from sealstore.errors import ObjectNotFound

    from . import encrypt_client
    from .rotate import default_checkpoint, parse_s3_url, pending_objects, rotate_objects

    try:
        bucket, prefix = parse_s3_url(args.url)
    except ValueError as exc:
        print(f"sealstore: error: {exc}", file=sys.stderr)
        return 2
    keyring = load_config(
        getattr(args, "config", None), name=getattr(args, "config_name", None)
    ).load_keyring()
    checkpoint = args.checkpoint or default_checkpoint(args.url)
    started, progress = time.monotonic(), None
    try:
        client = boto3.client("s3", endpoint_url=args.endpoint_url, region_name=args.region)
        encrypt_client(client, keyring, bind_location=not args.no_bind_location)
        total = None
        if wants_bar(args.progress, json_output=args.json):
            total = pending_objects(client, bucket, prefix, checkpoint=checkpoint)
        progress = make_object_progress(
            args.progress, total, verbose=args.verbose, json_output=args.json
        )
        report = rotate_objects(
            client,
            bucket,
            prefix,
            checkpoint=checkpoint,
            dry_run=args.dry_run,
            seal_plaintext=args.seal_plaintext,
            pause=args.pause,
            progress=progress,
        )
    except (BotoCoreError, ClientError) as exc:  # the listing itself: nothing was rotated
        print(f"sealstore: error: S3: {_s3_error(exc)}", file=sys.stderr)
        return 1
    except ObjectNotFound as exc:  # the store's translation of a listing's ClientError
        cause = exc.__cause__ if isinstance(exc.__cause__, ClientError) else exc
        print(f"sealstore: error: S3: {_s3_error(cause)}", file=sys.stderr)
        return 1
    finally:
        if progress is not None:
            progress.close()
        keyring.close()
    _print_report(args, report, checkpoint, time.monotonic() - started)
    return 0 if report.ok else 1


def _s3_error(exc: BaseException) -> str:
    """``Operation: Code`` of a ClientError, the class and message of another botocore error."""
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{exc.operation_name}: {error.get('Code', '?')} ({error.get('Message', '')})"
    return f"{type(exc).__name__}: {exc}"


def _print_report(args: argparse.Namespace, report: Any, checkpoint: str, seconds: float) -> None:
    """The JSON document, or the total line (failures on stderr)."""
    if args.json:
        print(json.dumps({**asdict(report), "checkpoint": checkpoint}, indent=2))
    else:
        if report.after:
            print(f"resumed after {report.after!r}")
        print(
            f"{'dry run: ' if report.dry_run else ''}{report.scanned} objects in {seconds:.1f} s: "
            f"{report.resealed} re-sealed, {report.repaired} metadata repaired, "
            f"{report.current} already under {report.primary}, {report.sealed_plaintext} "
            f"plaintext sealed, {report.not_sealed} not sealed (skipped), "
            f"{len(report.conflicts)} changed meanwhile (left for the next run), "
            f"{len(report.failures)} failed"
        )
        for failure in report.failures:
            print(f"failed: {failure['key']}: {failure['error']}", file=sys.stderr)


def register(commands: Any, keys: Any) -> None:
    """``sealstore s3 ...``, as the console script finds it (an entry point of
    ``sealstore.commands``)."""
    add_commands(commands)


def add_commands(commands: Any) -> None:
    """Add ``s3`` and its actions to the console script's sub-command parsers."""
    s3 = commands.add_parser(
        "s3",
        help="encrypted S3 objects",
        description="Commands on the sealed objects of an S3 (or S3-compatible) bucket.",
    ).add_subparsers(dest="s3_command", required=True, metavar="ACTION")
    p = s3.add_parser(
        "rotate",
        help="re-seal objects under the primary key (resumable)",
        description="Re-seal every object under s3://BUCKET[/PREFIX] that is not under the "
        "keyring's primary key (conditional writes: concurrent writers are never "
        "overwritten). The position is kept in a checkpoint file, so a stopped run resumes "
        "where it was; exit 1 when some objects failed.",
    )
    p.add_argument("url", metavar="s3://BUCKET[/PREFIX]")
    p.add_argument("--endpoint-url", help="S3-compatible endpoint (default: AWS)")
    p.add_argument("--region", help="region name (default: boto3's)")
    p.add_argument(
        "--checkpoint",
        metavar="PATH",
        help="position file, to resume a stopped run (default: "
        "rotate-<hash of the URL>.json in $XDG_STATE_HOME/sealstore, else "
        "~/.local/state/sealstore)",
    )
    p.add_argument(
        "--pause",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait between objects",
    )
    p.add_argument("--dry-run", action="store_true", help="only count what would change")
    p.add_argument(
        "--seal-plaintext",
        action="store_true",
        help="also seal objects that are not sealed",
    )
    p.add_argument(
        "--no-bind-location",
        action="store_true",
        help="re-seal objects without binding them to their bucket and key (for "
        "applications that move sealed objects themselves)",
    )
    p.add_argument(
        "--progress",
        choices=BAR_MODES,
        default="auto",
        help="bar: progress bar with total and ETA on stderr (counts the objects first); "
        "lines: one line per changed object; auto: bar on a terminal, else lines",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="list unchanged objects too")
    p.set_defaults(func=_cmd_rotate)


def main(argv: list[str] | None = None) -> int:
    """``python -m sealstore.adapters.s3.cli`` (the same commands without the console script)."""
    from sealstore.cli import run_command

    parser = argparse.ArgumentParser(prog="sealstore", description="sealstore's S3 commands")
    parser.add_argument(
        "-c", "--config", metavar="PATH", help="config file; default $SEALSTORE_CONFIG"
    )
    add_commands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    return run_command(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
