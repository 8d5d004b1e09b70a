"""Configuration (pydantic): which key source, how its keys are wrapped, suite and tag size.

Read from a JSON or TOML file (``SEALSTORE_CONFIG`` or an explicit path) and from environment
variables, which win over the file.  Environment names are ``SEALSTORE_`` followed by the field
path in upper case joined with ``__``, e.g. ``SEALSTORE_SUITE``, ``SEALSTORE_TAG_SIZE``,
``SEALSTORE_KEY_SOURCE__PATH``, ``SEALSTORE_KEY_SOURCE__WRAPPING__KMS_KEY_ID``.  A bad value
raises :class:`~sealstore.errors.ConfigError` naming the file or variable, the field and the
problem.  Relative paths are relative to the working directory.

Named configurations keep a second keyring's configuration apart from the column keyring's:
``load_config(path, name="index")`` (the blind-index keyring) reads ``$SEALSTORE_INDEX_CONFIG``
when no path is given and only the variables scoped to its name, ``SEALSTORE_INDEX_<FIELD>``
(``SEALSTORE_INDEX_KEY_SOURCE__PATH``, ...); the unscoped ``SEALSTORE_<FIELD>`` variables
never apply to it, and the scoped ones never apply to the default configuration; it must name
its key store (the default key file is the column keyring's).  A call
without a name is the default configuration's, except that a file given explicitly that is not
``$SEALSTORE_CONFIG`` while ``SEALSTORE_KEY_SOURCE__TYPE``/``__PATH``/``__URL`` is set raises
ConfigError: those variables choose *which* keyring is loaded, and applied to another keyring's
file they would silently make both keyrings one (pass ``name="default"`` or ``name="index"``).

The file is opened once and checked on the descriptor (``sealstore.securefile``): a regular
file (a FIFO, a device such as ``/dev/zero``, a directory is refused, also behind a link) of at
most 1 MiB (``CONFIG_FILE_LIMIT``), nested at most as deep as the parser allows.  A file others
could have written (writable by group or others, owned by another user, or below a directory
that lets others replace it) is refused with :class:`~sealstore.errors.InsecureConfig` when it
sets ``key_source`` (anything under it: path, URL, wrapping, KMS key id and ``endpoint_url``),
``allow_retired``, ``accept_short_tags`` or ``tag_size``; for other settings a warning is
logged.

Example (TOML)::

    suite = "AEGIS-128X4"
    tag_size = 32
    [key_source]
    type = "database"
    url = "postgresql+psycopg://app@db/app"
    [key_source.wrapping]
    type = "aws-kms"
    kms_key_id = "alias/sealstore"
"""

from __future__ import annotations

import sys

import json
import logging
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from .errors import ConfigError, InsecureConfig
from .fields import SuiteName
from .format import Suite
from .redact import mask_url
from .securefile import read_config_file

if TYPE_CHECKING:
    from .keyring import Keyring
    from .keysources.base import KeySource
    from .wrapping import Wrapper

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the tomli backport (a dependency there)
    import tomli as tomllib

__all__ = [
    "DEFAULT_KEY_FILE",
    "DEFAULT_NAME",
    "ENV_PREFIX",
    "SuiteName",
    "DatabaseKeySourceConfig",
    "FileKeySourceConfig",
    "KmsWrapping",
    "MasterKeyWrapping",
    "NoWrapping",
    "SealstoreConfig",
    "config_present",
    "env_prefix",
    "load_config",
]

log: logging.Logger = logging.getLogger(__name__)

ENV_PREFIX = "SEALSTORE_"
DEFAULT_KEY_FILE = "sealstore-keys.json"
#: The name of the column keyring's configuration (unscoped ``SEALSTORE_<FIELD>`` variables).
DEFAULT_NAME = "default"
# unscoped variables that choose which key store (so which keyring) a configuration loads
_KEY_SOURCE_IDENTITY = ("KEY_SOURCE__TYPE", "KEY_SOURCE__PATH", "KEY_SOURCE__URL")


class _Model(BaseModel):
    # no input value in a ValidationError's text (a URL with its password, say)
    model_config: ClassVar[ConfigDict] = ConfigDict(
        extra="forbid", frozen=True, hide_input_in_errors=True
    )
    #: fields shown through :func:`~sealstore.redact.mask_url` by ``repr``/``str``
    _urls: ClassVar[tuple[str, ...]] = ()

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # repr() and str() of every model: URL passwords masked (model_dump keeps the values)
        for name, value in super().__repr_args__():
            yield name, mask_url(value) if name in self._urls and value is not None else value


class NoWrapping(_Model):
    """Plain material (local development key files only)."""

    type: Literal["none"] = "none"


class KmsWrapping(_Model):
    """AWS KMS envelope: material from GenerateDataKey, stored wrapped under ``kms_key_id``."""

    _urls: ClassVar[tuple[str, ...]] = ("endpoint_url",)

    type: Literal["aws-kms"]
    kms_key_id: str = Field(min_length=1)
    region: str | None = None
    endpoint_url: str | None = None
    cache_max_age: float = Field(default=300.0, ge=0)  # seconds an unwrapped key stays cached
    cache_max_uses: int = Field(default=1000, ge=1)  # unwraps served from one cache entry


class MasterKeyWrapping(_Model):
    """AES-256-GCM under a local master key file (base64 of 32 bytes, mode 0600)."""

    type: Literal["master-key"]
    path: Path


class FileKeySourceConfig(_Model):
    """A local JSON key file (the default: ``sealstore-keys.json``, plain material)."""

    type: Literal["file"] = "file"
    path: Path = Path(DEFAULT_KEY_FILE)
    wrapping: Annotated[
        NoWrapping | KmsWrapping | MasterKeyWrapping, Field(discriminator="type")
    ] = NoWrapping()


class DatabaseKeySourceConfig(_Model):
    """The ``sealstore_keys`` table behind a SQLAlchemy URL; keys are always wrapped.

    ``repr``/``str`` show the URL with its password masked (:func:`sealstore.redact.mask_url`);
    ``model_dump``/``model_dump_json`` return it as configured: do not log those."""

    _urls: ClassVar[tuple[str, ...]] = ("url",)

    type: Literal["database"]
    url: str = Field(min_length=1)
    wrapping: Annotated[KmsWrapping | MasterKeyWrapping, Field(discriminator="type")]


class SealstoreConfig(_Model):
    """Top-level configuration."""

    key_source: Annotated[
        FileKeySourceConfig | DatabaseKeySourceConfig, Field(discriminator="type")
    ] = FileKeySourceConfig()
    suite: SuiteName = str(Suite.AEGIS_128X4)
    tag_size: int = 32
    allow_retired: bool = False
    accept_short_tags: bool = False  # open 16-byte-tag values with a 32-byte-tag keyring

    @field_validator("tag_size")
    @classmethod
    def _tag_size(cls, v: int) -> int:
        if v not in (16, 32):
            raise ValueError("must be 16 or 32 (bytes)")
        return v

    def wrapper(self) -> Wrapper | None:
        """The configured :class:`~sealstore.wrapping.Wrapper`, or None for plain key files."""
        w = self.key_source.wrapping
        if isinstance(w, KmsWrapping):
            from .wrapping.kms import KmsWrapper

            return KmsWrapper(
                w.kms_key_id,
                region_name=w.region,
                endpoint_url=w.endpoint_url,
                cache_max_age=w.cache_max_age,
                cache_max_uses=w.cache_max_uses,
            )
        if isinstance(w, MasterKeyWrapping):
            from .wrapping import MasterKeyWrapper

            return MasterKeyWrapper.from_file(w.path)
        return None

    def key_source_object(self) -> KeySource:
        """The configured :class:`~sealstore.keysources.base.KeySource`."""
        src = self.key_source
        if isinstance(src, DatabaseKeySourceConfig):
            from .keysources.database import DatabaseKeySource

            return DatabaseKeySource(src.url, self.wrapper())
        from .keysources.file import KeyFile

        return KeyFile(src.path, self.wrapper())

    def load_keyring(self) -> Keyring:
        """Load the keyring from the configured source with this suite/tag size/retired policy."""
        return self.key_source_object().load(
            suite=self.suite,
            tag_size=self.tag_size,
            allow_retired=self.allow_retired,
            accept_short_tags=self.accept_short_tags,
        )


_TAGS = {"file", "database", "none", "aws-kms", "master-key"}


# Settings a file others could have written may not make: where keys come from (the key
# source, its path or URL, the wrapping, KMS's key id and endpoint) and what opening accepts.
_GUARDED = ("key_source", "allow_retired", "accept_short_tags", "tag_size")


def _read_file(path: Path) -> dict[str, Any]:
    if path.suffix not in (".toml", ".json"):
        raise ConfigError(f"config file {path}: use a .toml or .json file")
    raw, untrusted = read_config_file(path)  # regular file, CONFIG_FILE_LIMIT bytes at most
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except ValueError as exc:  # UnicodeDecodeError, JSONDecodeError, TOMLDecodeError, int digits
        raise ConfigError(f"config file {path}: cannot parse ({_short(exc)})") from None
    except RecursionError:
        raise ConfigError(f"config file {path}: cannot parse (nested too deeply)") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: the top level must be a table/object")
    if untrusted is not None:
        guarded = [k for k in _GUARDED if k in data]
        if guarded:
            raise InsecureConfig(
                f"config file {path}: refused: {untrusted}, so others could have set "
                f"{', '.join(guarded)} (where keys come from, or what opening accepts); "
                f"run `chmod go-w {path}` and make sure only you or root can write its "
                "directories, or set these through SEALSTORE_ environment variables"
            )
        log.warning("config file %s could have been written by others: %s", path, untrusted)
    return data


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= 200 else text[:200] + "..."


def env_prefix(name: str = DEFAULT_NAME) -> str:
    """The prefix of the environment variables of the configuration ``name``: ``SEALSTORE_``
    for the default one, ``SEALSTORE_INDEX_`` for ``"index"`` (ConfigError for a name that is
    not lowercase letters and digits, or whose variables would read as a default field's)."""
    if name == DEFAULT_NAME:
        return ENV_PREFIX
    if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9]*", name):
        raise ConfigError(
            f"configuration name {name!r}: use lowercase letters and digits (e.g. 'index')"
        )
    upper = name.upper()
    fields = [f.upper() for f in SealstoreConfig.model_fields]
    if upper == "CONFIG" or any(f.startswith(upper + "_") or f == upper for f in fields):
        raise ConfigError(
            f"configuration name {name!r}: its variables (SEALSTORE_{upper}_...) would read as "
            "the default configuration's; choose another name"
        )
    return f"{ENV_PREFIX}{upper}_"


def config_present(name: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether the environment configures ``name``: its ``SEALSTORE_<NAME>_CONFIG`` file or any
    of its scoped ``SEALSTORE_<NAME>_<FIELD>`` variables is set (always True for the default)."""
    env = os.environ if env is None else env
    prefix = env_prefix(name)
    if name == DEFAULT_NAME:
        return True
    return bool(env.get(prefix + "CONFIG")) or bool(_env_overrides(env, prefix)[1])


def _env_overrides(
    env: Mapping[str, str], prefix: str = ENV_PREFIX
) -> tuple[dict[str, Any], set[str]]:
    """Nested dict from ``<prefix><FIELD>[__<SUB>...]`` variables naming a config field."""
    out: dict[str, Any] = {}
    used = set()
    fields = {name.upper() for name in SealstoreConfig.model_fields}
    for name, value in env.items():
        if not name.startswith(prefix):
            continue
        path = name[len(prefix) :].split("__")
        if path[0] not in fields:
            continue  # SEALSTORE_CONFIG, SEALSTORE_KERNEL, ...: not config fields
        node = out
        for part in path[:-1]:
            node = node.setdefault(part.lower(), {})
            if not isinstance(node, dict):
                raise ConfigError(f"{name}: conflicts with another {prefix} variable")
        node[path[-1].lower()] = value
        used.add(name)
    return out, used


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for k, v in top.items():
        if isinstance(v, dict) and isinstance(merged.get(k), dict):
            merged[k] = _merge(merged[k], v)
        else:
            merged[k] = v
    return merged


def _same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def _check_unnamed(path: str | os.PathLike[str], env: Mapping[str, str]) -> None:
    """An unnamed load of an explicit file that is not ``$SEALSTORE_CONFIG``: refuse the
    variables that choose the key store, which may belong to another keyring's file."""
    chosen = env.get(ENV_PREFIX + "CONFIG")
    if chosen and _same_file(path, chosen):
        return
    set_vars = [ENV_PREFIX + v for v in _KEY_SOURCE_IDENTITY if env.get(ENV_PREFIX + v)]
    if not set_vars:
        return
    scoped = ", ".join(env_prefix("index") + v.removeprefix(ENV_PREFIX) for v in set_vars)
    raise ConfigError(
        f"{', '.join(set_vars)} set, and config file {path} is not $SEALSTORE_CONFIG: the "
        "variable chooses which key store is loaded, and applied to another keyring's file "
        "it would make both keyrings one. Name the configuration: load_config(path, "
        "name='default') for the column keyring (or set SEALSTORE_CONFIG to this file), "
        f"load_config(path, name='index') for the blind-index keyring, whose variables are "
        f"{scoped} (on the command line: --config-name default|index)"
    )


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    name: str | None = None,
) -> SealstoreConfig:
    """Configuration from ``path`` (or ``$SEALSTORE_CONFIG``, if set), then the environment.

    With neither, the defaults apply: a plain local key file ``sealstore-keys.json``.
    ``name`` names the configuration (module docstring): ``"index"`` reads
    ``$SEALSTORE_INDEX_CONFIG`` and only ``SEALSTORE_INDEX_<FIELD>`` variables; ``"default"``
    (and no name) ``$SEALSTORE_CONFIG`` and the unscoped ``SEALSTORE_<FIELD>`` ones.  Without a
    name, an explicit ``path`` other than ``$SEALSTORE_CONFIG`` while a variable choosing the
    key store (``SEALSTORE_KEY_SOURCE__TYPE``/``__PATH``/``__URL``) is set raises ConfigError.
    """
    env = os.environ if env is None else env
    prefix = env_prefix(DEFAULT_NAME if name is None else name)
    if path is None and env.get(prefix + "CONFIG"):
        path = env[prefix + "CONFIG"]
    elif path is not None and name is None:
        _check_unnamed(path, env)
    data = _read_file(Path(path)) if path is not None else {}
    overrides, used = _env_overrides(env, prefix)
    merged = _merge(data, overrides)
    source = merged.get("key_source")
    if isinstance(source, dict):  # the discriminators default like the fields do
        source.setdefault("type", "file")
        if source["type"] == "file" and isinstance(source.get("wrapping"), dict):
            source["wrapping"].setdefault("type", "none")
    try:
        config = SealstoreConfig.model_validate(merged)
    except ValidationError as exc:
        lines = []
        for e in exc.errors():
            loc = [str(p) for p in e["loc"]]
            loc = [
                p
                for i, p in enumerate(loc)
                if not (i and loc[i - 1] in ("key_source", "wrapping") and p in _TAGS)
            ]
            env_name = prefix + "__".join(loc).upper()
            where = env_name if env_name in used else (f"config file {path}" if path else "config")
            msg = e["msg"].removeprefix("Value error, ")
            lines.append(f"{where}: {'.'.join(loc) or '(top level)'}: {msg}")
        raise ConfigError("\n".join(lines)) from None
    if name not in (None, DEFAULT_NAME) and not (
        isinstance(source, dict) and ("path" in source or source.get("type") != "file")
    ):  # the default key file is the column keyring's: a named one must say where its keys are
        where = f"config file {path}" if path is not None else f"${prefix}CONFIG (not set)"
        raise ConfigError(
            f"configuration {name!r} ({where}) names no key store; the default key file "
            f"{DEFAULT_KEY_FILE} is the column keyring's: set key_source.path (or a database "
            f"key_source) in its file, or {prefix}KEY_SOURCE__PATH"
        )
    return config
