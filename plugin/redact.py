"""Passwords out of the URLs sealstore shows (reprs, messages, logs).

:func:`mask_url` parses with :mod:`urllib.parse` (the core does not import SQLAlchemy): the
password of the user-info part becomes ``***``, and so does every query parameter whose name
says it holds a secret (``password``, ``sslpassword``, ``secret``, ``token``, ``key``, ...:
drivers take passwords there too), and the fragment.  Nothing else changes.
:func:`mask_text` does the same inside free text (an exception's message): every URL's
password and every ``password=...`` (a DSN's, a query's).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, urlencode

__all__ = ["MASK", "mask_text", "mask_url"]

MASK = "***"
# query parameter names that carry a secret (psycopg's password/sslpassword, token, api keys...)
_USERINFO = re.compile(r"([^:/]*):(.*)@", re.DOTALL)
_SECRET_PARAM = re.compile(r"pass|pwd|secret|token|key|credential|auth", re.IGNORECASE)
# in free text: a URL's password (``scheme://user:PASSWORD@``) and a DSN's (``password=...``)
_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]*:)[^\s@]*@")
_DSN_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('[^']*'|\S+)", re.IGNORECASE)


def is_secret_param(name: str) -> bool:
    """Whether a URL query parameter's name says its value is a secret (``password``,
    ``sslpassword``, ``token``, ...): :func:`mask_url` masks those."""
    return bool(_SECRET_PARAM.search(name))


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


def mask_text(text: str) -> str:
    """``text`` with every URL's password and every ``password=...`` value replaced by ``***``."""
    return _DSN_PASSWORD.sub(rf"\1{MASK}", _URL_PASSWORD.sub(rf"\1{MASK}@", text))
