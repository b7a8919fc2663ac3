"""Every row of the security settings table: what each Java client setting of ``mm2.properties`` becomes.

Why this exists: an MM2 file that Kafka's own tools accept must either work here or be refused at ``config validate``
with what to write instead, never fail in the middle of a run. Each test is one row (or a few of one kind) of the
table in docs/guides/security.md; the TLS rows also hand the result to librdkafka with real certificates, keys and
stores, so a translation librdkafka would refuse cannot pass.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from confluent_kafka import Producer
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from mirrorflow.client_settings import OIDC_HANDLERS, ClientSettingError, translate
from mirrorflow.config import ConfigError, parse_config
from mirrorflow.kafka.clients import LIBRDKAFKA_LOG

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
KRB5 = "com.sun.security.auth.module.Krb5LoginModule"


def refused(java: dict[str, str], key: str, *words: str) -> str:
    with pytest.raises(ClientSettingError) as err:
        translate(java)
    assert err.value.key == key, str(err.value)
    for word in words:
        assert word in str(err.value), str(err.value)
    return str(err.value)


# -- SASL PLAIN and SCRAM ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "jaas",
    [
        f'{PLAIN} required username="mirror" password="pw";',
        f"{PLAIN} required username=mirror password=pw;",
        f"{PLAIN} REQUIRED password='pw' username=mirror;",
        f'{PLAIN} required user_x="ignored" username="mirror" password="pw" extra=1;',
    ],
)
def test_plain_in_every_form_java_accepts(jaas: str) -> None:
    got = translate({"sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas, "security.protocol": "SASL_SSL"})
    assert got.config == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": "mirror",
        "sasl.password": "pw",
    }


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "scram-sha-512"])
def test_scram_with_escaped_quotes(mechanism: str) -> None:
    got = translate(
        {"sasl.mechanism": mechanism, "sasl.jaas.config": f'{SCRAM} required username="m" password="a\\"b";'}
    )
    assert got.config == {"sasl.mechanisms": mechanism.upper(), "sasl.username": "m", "sasl.password": 'a"b'}


def test_a_login_module_needs_its_mechanism_and_its_options() -> None:
    refused(
        {"sasl.jaas.config": f"{PLAIN} required username=a password=b;"},
        "sasl.mechanism",
        "Java's default is GSSAPI",
        "set PLAIN",
    )
    refused(
        {"sasl.mechanism": "PLAIN", "sasl.jaas.config": f"{SCRAM} required username=a password=b;"},
        "sasl.mechanism",
        "set SCRAM-SHA-256 or SCRAM-SHA-512",
    )
    message = refused(
        {"sasl.mechanism": "PLAIN", "sasl.jaas.config": f'{PLAIN} required username="a";'},
        "sasl.jaas.config",
        "password",
    )
    assert "username" not in message.split("needs")[-1]
    refused(
        {
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": f"{SCRAM} required username=a password=b tokenauth=true;",
        },
        "sasl.jaas.config",
        "delegation tokens",
    )


def test_a_jaas_line_java_refuses_is_refused_with_javas_reason_and_no_secret() -> None:
    message = refused(
        {"sasl.mechanism": "PLAIN", "sasl.jaas.config": f'{PLAIN} required username="a" password="hunter2"'},
        "sasl.jaas.config",
        "not terminated by semi-colon",
    )
    assert "hunter2" not in message


# -- SASL OAUTHBEARER --------------------------------------------------------------------------------------------


def test_oauthbearer_unsecured_jws_login_becomes_librdkafkas_unsecured_jwt() -> None:
    jaas = (
        f"{OAUTH} required unsecuredLoginStringClaim_sub=mirror unsecuredLoginLifetimeSeconds=600 "
        "unsecuredLoginListClaim_scope=',read,write' unsecuredLoginExtension_traceId=abc;"
    )
    got = translate({"sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": jaas})
    assert got.config == {
        "sasl.mechanisms": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": "true",
        "sasl.oauthbearer.config": "principal=mirror extension_traceId=abc lifeSeconds=600 scope=read,write",
    }
    refused(
        {"sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": f"{OAUTH} required;"},
        "sasl.jaas.config",
        "unsecuredLoginStringClaim_sub",
    )


@pytest.mark.parametrize("handler", OIDC_HANDLERS)
def test_oauthbearer_oidc_client_credentials_of_kafka_3_and_4(handler: str) -> None:
    java = {
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.login.callback.handler.class": handler,
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example.com/oauth2/token",
        "sasl.jaas.config": f'{OAUTH} required clientId="mirror" clientSecret="s3cret" scope="kafka" extension_logicalCluster=lkc-1;',
        "sasl.login.connect.timeout.ms": "10000",  # the Java login's own timing: no librdkafka equivalent
    }
    assert translate(java).config == {
        "sasl.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example.com/oauth2/token",
        "sasl.oauthbearer.client.id": "mirror",
        "sasl.oauthbearer.client.secret": "s3cret",
        "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.extensions": "logicalCluster=lkc-1",
    }
    without_url = {k: v for k, v in java.items() if k != "sasl.oauthbearer.token.endpoint.url"}
    refused(without_url, "sasl.oauthbearer.token.endpoint.url", "token endpoint")
    no_secret = {**java, "sasl.jaas.config": f"{OAUTH} required clientId=mirror;"}
    refused(no_secret, "sasl.jaas.config", "clientSecret")


def test_a_java_callback_class_is_refused_by_name() -> None:
    refused(
        {
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.login.callback.handler.class": "com.example.MyHandler",
            "sasl.jaas.config": f"{OAUTH} required;",
        },
        "sasl.login.callback.handler.class",
        "MyHandler",
    )
    refused(
        {"sasl.client.callback.handler.class": "com.example.X"}, "sasl.client.callback.handler.class", "Java callback"
    )


# -- SASL GSSAPI (Kerberos) --------------------------------------------------------------------------------------


def test_kerberos_with_a_keytab_or_the_ticket_cache() -> None:
    keytab = translate(
        {
            "sasl.mechanism": "GSSAPI",
            "sasl.kerberos.service.name": "kafka",
            "sasl.jaas.config": f'{KRB5} required useKeyTab=true storeKey=true keyTab="/etc/security/mirror.keytab" principal="mirror@EXAMPLE.COM";',
        }
    )
    assert keytab.config == {
        "sasl.mechanisms": "GSSAPI",
        "sasl.kerberos.service.name": "kafka",
        "sasl.kerberos.keytab": "/etc/security/mirror.keytab",
        "sasl.kerberos.principal": "mirror@EXAMPLE.COM",
    }
    cache = translate({"sasl.mechanism": "GSSAPI", "sasl.jaas.config": f"{KRB5} required useTicketCache=true;"})
    assert cache.config["sasl.kerberos.min.time.before.relogin"] == "0"
    refused({"sasl.mechanism": "GSSAPI", "sasl.jaas.config": f"{KRB5} required;"}, "sasl.jaas.config", "useKeyTab")
    refused(
        {"sasl.mechanism": "GSSAPI", "sasl.jaas.config": f"{KRB5} required useKeyTab=true principal=p;"},
        "sasl.jaas.config",
        "keyTab",
    )


# -- AWS MSK IAM and other login modules -------------------------------------------------------------------------


def test_aws_msk_iam_is_refused_with_what_to_configure_instead() -> None:
    refused(
        {"sasl.mechanism": "AWS_MSK_IAM", "sasl.jaas.config": "software.amazon.msk.auth.iam.IAMLoginModule required;"},
        "sasl.mechanism",
        "AWS_MSK_IAM",
        "SCRAM-SHA-512",
        "mutual TLS",
    )
    refused(
        {"sasl.mechanism": "PLAIN", "sasl.jaas.config": "com.example.LdapLoginModule required;"},
        "sasl.jaas.config",
        "LdapLoginModule",
    )


# -- TLS ---------------------------------------------------------------------------------------------------------


def test_tls_stores_java_cannot_share_are_refused_with_the_command_that_converts_them() -> None:
    refused(
        {"ssl.truststore.location": "/etc/kafka/trust.jks"},
        "ssl.truststore.location",
        "keytool -list -rfc -keystore /etc/kafka/trust.jks",
    )
    refused(
        {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": "/t.p12"},
        "ssl.truststore.location",
        "openssl pkcs12 -in /t.p12 -nokeys",
    )
    refused(
        {"ssl.keystore.location": "/etc/kafka/client.jks", "ssl.keystore.password": "hunter2"},
        "ssl.keystore.location",
        "keytool -importkeystore -srckeystore /etc/kafka/client.jks -srcstoretype JKS",
        "ssl.keystore.type=PKCS12",
    )
    refused(
        {"ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----"},
        "ssl.truststore.certificates",
        "ssl.truststore.type=PEM",
    )
    refused(
        {"ssl.keystore.type": "PEM", "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----"},
        "ssl.keystore.certificate.chain",
        "both",
    )
    refused({"ssl.engine.factory.class": "com.example.Engine"}, "ssl.engine.factory.class", "Java class")


@pytest.mark.parametrize(("value", "expected"), [("", "none"), ("https", "https"), ("HTTPS", "https"), (" ", "none")])
def test_endpoint_identification_as_java_reads_it(value: str, expected: str) -> None:
    assert translate({"ssl.endpoint.identification.algorithm": value}).config == {
        "ssl.endpoint.identification.algorithm": expected
    }


def test_endpoint_identification_other_than_https_is_refused() -> None:
    refused(
        {"ssl.endpoint.identification.algorithm": "ldaps"}, "ssl.endpoint.identification.algorithm", "https or empty"
    )


def test_tls_versions_librdkafka_negotiates_itself() -> None:
    assert translate({"ssl.protocol": "TLSv1.3", "ssl.enabled.protocols": "TLSv1.2,TLSv1.3"}).notes == []
    notes = translate({"ssl.protocol": "TLSv1.1", "ssl.enabled.protocols": "TLSv1,TLSv1.1"}).notes
    assert [key for key, _ in notes] == ["ssl.protocol", "ssl.enabled.protocols"]
    assert "OpenSSL negotiates the highest version" in notes[0][1]
    assert translate({"ssl.protocol": "TLSv1.1"}).config == {}


def test_cipher_suites_by_their_java_names() -> None:
    java = "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"
    assert translate({"ssl.cipher.suites": java}).config == {
        "ssl.cipher.suites": "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305"
    }
    assert translate({"ssl.cipher.suites": "TLS_AES_256_GCM_SHA384"}).config == {}  # TLS 1.3: always on
    assert translate({"ssl.cipher.suites": "ECDHE-RSA-AES128-GCM-SHA256"}).config == {
        "ssl.cipher.suites": "ECDHE-RSA-AES128-GCM-SHA256"
    }
    refused({"ssl.cipher.suites": "TLS_MADE_UP"}, "ssl.cipher.suites", "TLS_MADE_UP")


def test_java_only_settings_are_dropped_and_librdkafkas_own_pass() -> None:
    got = translate(
        {
            "ssl.keymanager.algorithm": "SunX509",
            "ssl.truststore.password": "changeit",
            "sasl.login.refresh.window.factor": "0.8",
            "max.poll.records": "500",
            "ssl.ca.location": "/etc/ssl/ca.pem",
            "ssl.key.password": "k",
            "delivery.timeout.ms": "120000",
        }
    )
    assert got.config == {"ssl.ca.location": "/etc/ssl/ca.pem", "ssl.key.password": "k", "message.timeout.ms": "120000"}


# -- TLS, handed to librdkafka -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A CA, a client certificate it signed, the client key encrypted, and the same as PEM files and PKCS12."""
    folder = tmp_path_factory.mktemp("pki")
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mirror")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    ca_pem = ca.public_bytes(pem).decode()
    cert_pem = cert.public_bytes(pem).decode()
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(b"k3y")
    ).decode()
    (folder / "ca.pem").write_text(ca_pem)
    (folder / "client.pem").write_text(cert_pem + key_pem)
    (folder / "client.p12").write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"mirror", key, cert, [ca], serialization.BestAvailableEncryption(b"st0re")
        )
    )
    return {"dir": str(folder), "ca": ca_pem, "cert": cert_pem, "key": key_pem}


def librdkafka_takes(config: dict[str, str]) -> None:
    """librdkafka builds a client from it: it reads every store and key then (no broker is contacted)."""
    Producer(
        {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SSL", "logger": LIBRDKAFKA_LOG, **config}
    ).flush(0)


def test_pem_truststore_and_keystore_as_files_with_an_encrypted_key(pki: dict[str, str]) -> None:
    folder = Path(pki["dir"])
    got = translate(
        {
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(folder / "ca.pem"),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(folder / "client.pem"),
            "ssl.key.password": "k3y",
        }
    )
    assert got.config == {
        "ssl.key.password": "k3y",
        "ssl.ca.location": str(folder / "ca.pem"),
        "ssl.certificate.location": str(folder / "client.pem"),
        "ssl.key.location": str(folder / "client.pem"),
    }
    librdkafka_takes(got.config)


def test_pem_truststore_and_keystore_inline(pki: dict[str, str]) -> None:
    got = translate(
        {
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": pki["ca"],
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": pki["cert"],
            "ssl.keystore.key": pki["key"],
            "ssl.key.password": "k3y",
        }
    )
    assert got.config == {
        "ssl.key.password": "k3y",
        "ssl.ca.pem": pki["ca"],
        "ssl.certificate.pem": pki["cert"],
        "ssl.key.pem": pki["key"],
    }
    librdkafka_takes(got.config)


def test_pkcs12_keystore(pki: dict[str, str]) -> None:
    got = translate(
        {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(Path(pki["dir"]) / "client.p12"),
            "ssl.keystore.password": "st0re",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": pki["ca"],
        }
    )
    assert got.config["ssl.keystore.password"] == "st0re"
    librdkafka_takes(got.config)


def test_librdkafka_refuses_a_wrong_key_password_so_the_translation_is_what_it_reads(pki: dict[str, str]) -> None:
    got = translate(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": pki["key"],
            "ssl.keystore.certificate.chain": pki["cert"],
            "ssl.key.password": "wrong",
        }
    )
    with pytest.raises(Exception):  # noqa: B017 - librdkafka's own error (KafkaException), whatever its words
        librdkafka_takes(got.config)


# -- config validate runs the same translation -------------------------------------------------------------------

BASE = "clusters = a, b\na.bootstrap.servers = h1:1\nb.bootstrap.servers = h2:1\na->b.enabled = true\n"


def test_validate_names_the_file_line_and_key_of_what_a_client_would_refuse() -> None:
    text = BASE + "b.ssl.truststore.location = /etc/kafka/trust.jks\nb.ssl.truststore.password = hunter2\n"
    with pytest.raises(ConfigError) as err:
        parse_config(text, "mm2.properties")
    problems = [str(p) for p in err.value.problems if p.severity == "error"]
    assert problems == [
        (
            "mm2.properties:5: error: b.ssl.truststore.location: librdkafka cannot read a JKS truststore; convert it "
            "to PEM (`keytool -list -rfc -keystore /etc/kafka/trust.jks > truststore.pem`) and set "
            "ssl.truststore.type=PEM"
        )
    ]
    assert "hunter2" not in str(err.value)


def test_validate_accepts_the_unquoted_jaas_line_kafkas_tools_accept() -> None:
    text = BASE + (
        "b.security.protocol = SASL_SSL\nb.sasl.mechanism = SCRAM-SHA-512\n"
        f'b.sasl.jaas.config = {SCRAM} required username=admin password="s3cret";\n'
    )
    flow = parse_config(text).flow("a", "b")
    assert translate(flow.client_config("target", "producer")).config["sasl.username"] == "admin"


def test_validate_says_where_the_mechanism_is_missing() -> None:
    text = BASE + f"b.sasl.jaas.config = {PLAIN} required username=a password=b;\n"
    with pytest.raises(ConfigError) as err:
        parse_config(text, "mm2.properties")
    assert [str(p) for p in err.value.problems if p.severity == "error"] == [
        (
            "mm2.properties:5: error: b.sasl.jaas.config: sasl.mechanism: is not set (Java's default is GSSAPI), "
            "but sasl.jaas.config uses PlainLoginModule: set PLAIN"
        )
    ]


def test_validate_warns_where_a_setting_is_honoured_in_part() -> None:
    config = parse_config(BASE + "ssl.protocol = TLSv1.1\n", "mm2.properties")
    assert any(
        w.startswith("mm2.properties:5: warning: ssl.protocol: librdkafka has no setting for the TLS version")
        for w in config.warnings
    ), config.warnings


def test_validate_warns_when_this_pythons_client_has_no_kerberos() -> None:
    """The PyPI wheel of confluent-kafka has no GSSAPI: a file asking for Kerberos is accepted (other machines may
    have it) with a warning at the mechanism's line."""
    from mirrorflow.client_settings import kerberos_available

    text = BASE + (
        "b.sasl.mechanism = GSSAPI\n"
        f'b.sasl.jaas.config = {KRB5} required useKeyTab=true keyTab="/etc/m.keytab" principal="m@EXAMPLE.COM";\n'
    )
    warnings = parse_config(text, "mm2.properties").warnings
    kerberos = [w for w in warnings if "built without Kerberos" in w]
    assert kerberos == ([] if kerberos_available() else [kerberos[0]])
    if kerberos:
        assert kerberos[0].startswith("mm2.properties:5: warning: b.sasl.mechanism:")
