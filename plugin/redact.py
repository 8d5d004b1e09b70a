"""Passwords out of the URLs sealstore shows (reprs, messages, logs).

:func:`mask_url` parses with :mod:`urllib.parse` (the core does not import SQLAlchemy): the
password of the user-info part becomes ``***``, and so does every query parameter whose name
says it holds a secret (``password``, ``sslpassword``, ``secret``, ``token``, ``key``, ...:
drivers take passwords there too), and the fragment.  Nothing else changes.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, urlencode

__all__ = ["MASK", "mask_url"]

MASK = "***"
# query parameter names that carry a secret (psycopg's password/sslpassword, token, api keys...)
_USERINFO = re.compile(r"([^:/]*):(.*)@", re.DOTALL)
_SECRET_PARAM = re.compile(r"pass|pwd|secret|token|key|credential|auth", re.IGNORECASE)


def mask_url(url: object) -> str:
    """``url`` with its password and its secret-looking query values replaced by ``***``."""
    text = str(url)
    head, sep, rest = text.partition("://")
    if not sep:
        head, rest = "", text
    netloc = ""
    if sep:
        # user [^:/]*, then ":" and everything up to the LAST "@" (SQLAlchemy stops at the first;
        # an unescaped "@", "/", "?" or "#" in a password is masked whole either way)
        m = _USERINFO.match(rest)
        if m:
            netloc, rest = f"{m.group(1)}:{MASK}@", rest[m.end() :]
        end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
        netloc, rest = netloc + rest[:end], rest[end:]
    tail, hashmark, fragment = rest.partition("#")
    path, qmark, query = tail.partition("?")
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(_SECRET_PARAM.search(k) for k, _ in pairs):
            masked = [(k, MASK if _SECRET_PARAM.search(k) else v) for k, v in pairs]
            query = urlencode(masked, safe="*/", quote_via=quote)
    return f"{head}{sep}{netloc}{path}{qmark}{query}{hashmark}{MASK if fragment else ''}"
