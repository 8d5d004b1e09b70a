"""sealstore.config: files, environment variables, defaults, and errors naming field and problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sealstore.config import (
    DatabaseKeySourceConfig,
    FileKeySourceConfig,
    KmsWrapping,
    MasterKeyWrapping,
    NoWrapping,
    SealstoreConfig,
    load_config,
)
from sealstore.errors import ConfigError
from sealstore.keysources.file import KeyFile
from sealstore.wrapping.kms import KmsWrapper
from sealstore.keysources.database import DatabaseKeySource
from sealstore.wrapping import MasterKeyWrapper

pytestmark = pytest.mark.wheel  # run on the built wheel too (.ci/run, the 3.13 step)


def test_defaults_without_file_or_environment():
    cfg = load_config(env={})
    assert cfg.suite == "AEGIS-128X4" and cfg.tag_size == 32 and cfg.allow_retired is False
    assert cfg.key_source == FileKeySourceConfig(path=Path("sealstore-keys.json"))
    assert cfg.key_source.wrapping == NoWrapping()


def test_toml_file(tmp_path):
    p = tmp_path / "sealstore.toml"
    p.write_text(
        'suite = "aegis-128l"\ntag_size = 16\nallow_retired = true\n'
        '[key_source]\ntype = "database"\nurl = "sqlite:///x.db"\n'
        '[key_source.wrapping]\ntype = "aws-kms"\nkms_key_id = "alias/k"\nregion = "eu-west-1"\n'
    )
    cfg = load_config(p, env={})
    assert cfg.suite == "AEGIS-128L" and cfg.tag_size == 16 and cfg.allow_retired
    assert cfg.key_source == DatabaseKeySourceConfig(
        type="database",
        url="sqlite:///x.db",
        wrapping=KmsWrapping(type="aws-kms", kms_key_id="alias/k", region="eu-west-1"),
    )


def test_json_file_via_sealstore_config_env(tmp_path):
    p = tmp_path / "cfg.json"
    p.write_text(json.dumps({"key_source": {"type": "file", "path": str(tmp_path / "k.json")}}))
    cfg = load_config(env={"SEALSTORE_CONFIG": str(p)})
    assert cfg.key_source.path == tmp_path / "k.json"


def test_environment_overrides_file(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text('suite = "AEGIS-128L"\n[key_source]\npath = "a.json"\n')
    env = {
        "SEALSTORE_SUITE": "AES-256-GCM",
        "SEALSTORE_TAG_SIZE": "16",
        "SEALSTORE_ALLOW_RETIRED": "true",
        "SEALSTORE_KEY_SOURCE__WRAPPING__TYPE": "master-key",
        "SEALSTORE_KEY_SOURCE__WRAPPING__PATH": "/etc/master.key",
        "SEALSTORE_KERNEL": "portable",  # another component's variable: ignored here
        "OTHER": "x",
    }
    cfg = load_config(p, env=env)
    assert cfg.suite == "AES-256-GCM" and cfg.tag_size == 16 and cfg.allow_retired
    assert cfg.key_source.path == Path("a.json")  # from the file, merged with env
    assert cfg.key_source.wrapping == MasterKeyWrapping(
        type="master-key", path=Path("/etc/master.key")
    )


def test_env_only_key_source_path():
    cfg = load_config(env={"SEALSTORE_KEY_SOURCE__PATH": "/srv/keys.json"})
    assert cfg.key_source.path == Path("/srv/keys.json")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("tag_size = 24\n", "tag_size: must be 16 or 32"),
        ('suite = "AEGIS-256X"\n', "suite: unknown suite 'AEGIS-256X'"),
        ('sute = "AEGIS-128L"\n', "sute: Extra inputs are not permitted"),
        ('[key_source]\ntype = "database"\n', "key_source.url: Field required"),
        ('[key_source]\ntype = "s3"\n', "key_source: Input tag 's3'"),
        (
            '[key_source]\ntype = "database"\nurl = "x"\n[key_source.wrapping]\ntype = "none"\n',
            "key_source.wrapping: Input tag 'none'",
        ),
        (
            '[key_source.wrapping]\ntype = "aws-kms"\n',
            "key_source.wrapping.kms_key_id: Field required",
        ),
        ('allow_retired = "perhaps"\n', "allow_retired: Input should be a valid boolean"),
    ],
)
def test_malformed_file_names_field_and_problem(tmp_path, text, expected):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(p, env={})
    assert f"config file {p}" in str(info.value)
    assert expected in str(info.value)


def test_malformed_env_names_the_variable():
    with pytest.raises(ConfigError, match="SEALSTORE_TAG_SIZE: tag_size: must be 16 or 32"):
        load_config(env={"SEALSTORE_TAG_SIZE": "8"})
    with pytest.raises(ConfigError, match="SEALSTORE_TAG_SIZE: tag_size"):
        load_config(env={"SEALSTORE_TAG_SIZE": "many"})


def test_unparseable_and_missing_files(tmp_path):
    p = tmp_path / "x.toml"
    p.write_text("suite = \n")
    with pytest.raises(ConfigError, match="cannot parse"):
        load_config(p, env={})
    q = tmp_path / "x.json"
    q.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="top level"):
        load_config(q, env={})
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "none.toml", env={})
    y = tmp_path / "x.yaml"
    y.write_text("a: 1")
    with pytest.raises(ConfigError, match=".toml or .json"):
        load_config(y, env={})


def test_config_builds_sources_and_wrappers(tmp_path):
    cfg = load_config(env={"SEALSTORE_KEY_SOURCE__PATH": str(tmp_path / "k.json")})
    src = cfg.key_source_object()
    assert isinstance(src, KeyFile) and src.wrapper is None
    src.init()
    kr = cfg.load_keyring()
    assert kr.tag_size == 32 and kr.open(kr.seal(b"x")) == b"x"

    mk = MasterKeyWrapper.create_file(tmp_path / "master.key")
    cfg = SealstoreConfig.model_validate(
        {
            "key_source": {
                "type": "database",
                "url": f"sqlite:///{tmp_path}/d.db",
                "wrapping": {"type": "master-key", "path": str(mk)},
            }
        }
    )
    src = cfg.key_source_object()
    assert isinstance(src, DatabaseKeySource) and isinstance(src.wrapper, MasterKeyWrapper)

    cfg = SealstoreConfig.model_validate(
        {
            "key_source": {
                "type": "file",
                "wrapping": {"type": "aws-kms", "kms_key_id": "alias/x", "region": "us-east-1"},
            }
        }
    )
    assert isinstance(cfg.wrapper(), KmsWrapper) and cfg.wrapper().kms_key_id == "alias/x"


def test_config_is_immutable():
    cfg = load_config(env={})
    with pytest.raises(Exception, match="frozen"):
        cfg.suite = "AEGIS-128L"


def test_reads_os_environ_by_default(monkeypatch):
    monkeypatch.setenv("SEALSTORE_SUITE", "AEGIS-128X2")
    monkeypatch.delenv("SEALSTORE_CONFIG", raising=False)
    assert load_config().suite == "AEGIS-128X2"


# ---- named configurations: the index keyring's never takes the column keyring's variables ----


def _two_files(tmp_path):
    col = tmp_path / "sealstore.toml"
    col.write_text('[key_source]\npath = "keys.json"\n')
    idx = tmp_path / "sealstore-index.toml"
    idx.write_text('tag_size = 16\n[key_source]\npath = "index-keys.json"\n')
    return col, idx


def test_index_configuration_ignores_the_unscoped_variables(tmp_path):
    """Issue 26 item 2: SEALSTORE_KEY_SOURCE__* made the index keyring the column keyring."""
    col, idx = _two_files(tmp_path)
    env = {
        "SEALSTORE_CONFIG": str(col),
        "SEALSTORE_KEY_SOURCE__PATH": "/run/secrets/keys.json",
        "SEALSTORE_KEY_SOURCE__TYPE": "file",
        "SEALSTORE_SUITE": "AEGIS-128L",
        "SEALSTORE_TAG_SIZE": "32",
    }
    column = load_config(env=env)
    index = load_config(idx, env=env, name="index")
    assert column.key_source.path == Path("/run/secrets/keys.json")
    assert (index.key_source.path, index.suite, index.tag_size) == (
        Path("index-keys.json"),
        "AEGIS-128X4",
        16,
    )


def test_index_configuration_has_its_own_variables(tmp_path):
    col, idx = _two_files(tmp_path)
    env = {
        "SEALSTORE_CONFIG": str(col),
        "SEALSTORE_INDEX_CONFIG": str(idx),
        "SEALSTORE_INDEX_KEY_SOURCE__PATH": "/run/secrets/index-keys.json",
        "SEALSTORE_INDEX_TAG_SIZE": "32",
    }
    index = load_config(env=env, name="index")
    assert (index.key_source.path, index.tag_size) == (Path("/run/secrets/index-keys.json"), 32)
    column = load_config(env=env)  # the scoped variables never reach the default configuration
    assert (column.key_source.path, column.tag_size) == (Path("keys.json"), 32)
    # only variables: no file at all
    only = load_config(env={"SEALSTORE_INDEX_KEY_SOURCE__PATH": "i.json"}, name="index")
    assert only.key_source.path == Path("i.json")
    with pytest.raises(ConfigError, match=r"^SEALSTORE_INDEX_TAG_SIZE: tag_size: must be 16"):
        load_config(env={"SEALSTORE_INDEX_TAG_SIZE": "20"}, name="index")
    with pytest.raises(ConfigError, match="SEALSTORE_INDEX_KEY_SOURCE__PAHT"):
        load_config(env={"SEALSTORE_INDEX_KEY_SOURCE__PAHT": "x"}, name="index")


def test_unnamed_explicit_file_with_key_source_variables_is_refused(tmp_path):
    col, idx = _two_files(tmp_path)
    env = {"SEALSTORE_CONFIG": str(col), "SEALSTORE_KEY_SOURCE__PATH": "/run/keys.json"}
    with pytest.raises(ConfigError) as info:
        load_config(idx, env=env)  # the old documented call for the index keyring
    text = str(info.value)
    assert text.startswith("SEALSTORE_KEY_SOURCE__PATH set, and config file ")
    assert "SEALSTORE_INDEX_KEY_SOURCE__PATH" in text and "name='index'" in text
    assert "/run/keys.json" not in text  # values are not repeated
    # the file named by $SEALSTORE_CONFIG (by any spelling of its path) takes them as before
    assert load_config(tmp_path / "." / "sealstore.toml", env=env).key_source.path == Path(
        "/run/keys.json"
    )
    # without $SEALSTORE_CONFIG an explicit file is ambiguous too
    with pytest.raises(ConfigError, match="SEALSTORE_KEY_SOURCE__URL"):
        load_config(col, env={"SEALSTORE_KEY_SOURCE__URL": "sqlite:///k.db"})
    # naming it settles it
    cfg = load_config(col, env={"SEALSTORE_KEY_SOURCE__PATH": "/run/keys.json"}, name="default")
    assert cfg.key_source.path == Path("/run/keys.json")
    # variables that do not choose the key store still apply to an unnamed file
    assert load_config(idx, env={"SEALSTORE_TAG_SIZE": "32"}).tag_size == 32


@pytest.mark.parametrize("name", ["Index", "idx-2", "", "suite", "tag", "key", "config", "a_b"])
def test_configuration_names_that_cannot_have_variables_are_refused(name):
    with pytest.raises(ConfigError, match="configuration name"):
        load_config(env={}, name=name)


def test_config_present():
    from sealstore.config import config_present, env_prefix

    assert env_prefix("index") == "SEALSTORE_INDEX_" and env_prefix() == "SEALSTORE_"
    assert not config_present("index", env={"SEALSTORE_KEY_SOURCE__PATH": "k.json"})
    assert config_present("index", env={"SEALSTORE_INDEX_CONFIG": "i.toml"})
    assert config_present("index", env={"SEALSTORE_INDEX_KEY_SOURCE__PATH": "i.json"})
    assert not config_present("index", env={"SEALSTORE_INDEX_CONFIG": ""})
    assert config_present("default", env={})


def test_a_named_configuration_must_name_its_key_store(tmp_path):
    """The default key file (sealstore-keys.json) is the column keyring's: an index
    configuration without a key store of its own is refused, not pointed at it."""
    with pytest.raises(ConfigError, match=r"'index' \(\$SEALSTORE_INDEX_CONFIG \(not set\)\)"):
        load_config(env={}, name="index")
    with pytest.raises(ConfigError, match="SEALSTORE_INDEX_KEY_SOURCE__PATH"):
        load_config(env={"SEALSTORE_INDEX_TAG_SIZE": "16"}, name="index")
    bare = tmp_path / "index.toml"
    bare.write_text('tag_size = 16\n[key_source.wrapping]\ntype = "master-key"\npath = "m.key"\n')
    with pytest.raises(ConfigError, match="names no key store"):
        load_config(bare, env={}, name="index")
    db = load_config(
        env={"SEALSTORE_INDEX_KEY_SOURCE__TYPE": "database",
             "SEALSTORE_INDEX_KEY_SOURCE__URL": "sqlite:///index.db",
             "SEALSTORE_INDEX_KEY_SOURCE__WRAPPING__TYPE": "master-key",
             "SEALSTORE_INDEX_KEY_SOURCE__WRAPPING__PATH": "m.key"},
        name="index",
    )  # fmt: skip
    assert db.key_source.url == "sqlite:///index.db"
    assert load_config(env={}).key_source.path == Path("sealstore-keys.json")  # unchanged
