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
