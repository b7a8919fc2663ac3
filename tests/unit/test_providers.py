"""Config providers: ${env:}, ${file:}, ${dir:} with Kafka's meaning and clear errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mirrorflow.config import ConfigError, parse_config

BASE = "clusters = a, b\na.bootstrap.servers = h1:9092\nb.bootstrap.servers = h2:9092\na->b.enabled = true\n"
PROVIDERS = (
    "config.providers = file, env, dir\n"
    "config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider\n"
    "config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
    "config.providers.dir.class = org.apache.kafka.common.config.provider.DirectoryConfigProvider\n"
)


def client(text: str, key: str, side: str = "target", role: str = "producer") -> str:
    config = parse_config(BASE + PROVIDERS + text)
    return config.flow("a", "b").client_config(side, role)[key]  # type: ignore[arg-type]


def test_env_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MF_TEST_PW", "s3cret")
    assert client("b.ssl.key.password = ${env:MF_TEST_PW}\n", "ssl.key.password") == "s3cret"


def test_file_provider_reads_a_key_of_a_properties_file(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets.properties"
    secrets.write_text(
        'jaas = org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";\n'
    )
    value = client(f"b.sasl.mechanism = PLAIN\nb.sasl.jaas.config = ${{file:{secrets}:jaas}}\n", "sasl.jaas.config")
    assert value.startswith("org.apache.kafka.common.security.plain.PlainLoginModule") and 'password="p"' in value


def test_dir_provider_reads_a_whole_file(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("from-dir")
    assert client(f"b.ssl.truststore.password = ${{dir:{tmp_path}:pw}}\n", "ssl.truststore.password") == "from-dir"


def test_custom_alias_of_a_known_provider_class(tmp_path: Path) -> None:
    secrets = tmp_path / "s.properties"
    secrets.write_text("pw=abc\n")
    text = (
        BASE + "config.providers = vault\n"
        "config.providers.vault.class = org.apache.kafka.common.config.provider.FileConfigProvider\n"
        f"b.ssl.key.password = ${{vault:{secrets}:pw}}\n"
    )
    assert parse_config(text).flow("a", "b").client_config("target", "admin")["ssl.key.password"] == "abc"


def test_builtin_provider_without_declaration_works_but_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MF_TEST_HOST", "h9:9092")
    config = parse_config(BASE.replace("h1:9092", "${env:MF_TEST_HOST}"))
    assert config.clusters["a"].bootstrap_servers == "h9:9092"
    assert any("MM2 resolves it only with config.providers=env" in w for w in config.warnings)


def test_unresolvable_references_are_errors_with_lines_and_no_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MF_MISSING", raising=False)
    secrets = tmp_path / "s.properties"
    secrets.write_text("other=supersecretvalue\n")
    text = (
        BASE
        + PROVIDERS
        + (
            "b.ssl.key.password = ${env:MF_MISSING}\n"
            f"b.sasl.jaas.config = ${{file:{secrets}:jaas}}\n"
            "b.ssl.keystore.password = ${file:/nonexistent/x.properties:pw}\n"
            "b.ssl.truststore.password = ${nope:whatever}\n"
        )
    )
    with pytest.raises(ConfigError) as err:
        parse_config(text, "mm2.properties")
    message = str(err.value)
    assert (
        "mm2.properties:9: error: b.ssl.key.password: cannot resolve ${env:MF_MISSING}: environment variable MF_MISSING is not set"
        in message
    )
    assert (
        f"mm2.properties:10: error: b.sasl.jaas.config: cannot resolve ${{file:{secrets}:jaas}}: {secrets} has no key 'jaas'"
        in message
    )
    assert "cannot read /nonexistent/x.properties" in message
    assert "unknown config provider 'nope'" in message
    assert "supersecretvalue" not in message


def test_shell_style_variable_is_left_alone_with_a_warning() -> None:
    jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required username=u password=${APIKEY};"
    config = parse_config(BASE + f"b.sasl.mechanism = PLAIN\nb.sasl.jaas.config = {jaas}\n")
    assert config.flow("a", "b").client_config("target", "producer")["sasl.jaas.config"] == jaas
    assert any("write ${env:APIKEY}" in w for w in config.warnings)


def test_dir_provider_reads_the_bytes_unchanged(tmp_path: Path) -> None:
    (tmp_path / "pem").write_bytes(b"line1\r\nline2\r\n")
    assert client(f"b.ssl.key.password = ${{dir:{tmp_path}:pem}}\n", "ssl.key.password") == "line1\r\nline2\r\n"


def test_only_regular_files_are_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")  # reading it would block validation forever
    with pytest.raises(ConfigError) as err:
        parse_config(BASE + PROVIDERS + f"b.ssl.key.password = ${{dir:{tmp_path}:fifo}}\n", "mm2.properties")
    assert f"cannot read {tmp_path / 'fifo'}: it is not a regular file" in str(err.value)
    with pytest.raises(ConfigError, match="'sub/pw' is not the name of a file in"):
        parse_config(BASE + PROVIDERS + f"b.ssl.key.password = ${{dir:{tmp_path}:sub/pw}}\n")


def test_a_bad_secrets_file_is_named_but_never_quoted(tmp_path: Path) -> None:
    secrets = tmp_path / "s.properties"
    secrets.write_text("a = 1\npw = hunter2\\u12\n")
    with pytest.raises(ConfigError) as err:
        parse_config(BASE + PROVIDERS + f"b.ssl.key.password = ${{file:{secrets}:pw}}\n", "mm2.properties")
    message = str(err.value)
    assert (
        f"mm2.properties:9: error: b.ssl.key.password: cannot resolve ${{file:{secrets}:pw}}: {secrets}:2:" in message
    )
    assert "hunter2" not in message
