"""A cluster that refuses us is told apart from one that does not answer, with the setting to check.

Why this exists: a refused login read "did not answer within 5 s", and librdkafka says "certificate verify failed"
alike for an unknown CA and for a certificate of another host, so an on-call reader looked at the network. The TLS
cases run librdkafka against a real TLS server on loopback (a certificate from an unknown CA, one for another host
name, one that verifies); the refused login, which needs a SASL server, is checked on librdkafka's error event.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from mirrorflow.config import parse_config
from mirrorflow.kafka.refusals import refusal
from mirrorflow.preflight import ClusterUnreachableError, check_cluster, check_connection

SECRET = "hunter2-not-to-be-shown"


def _certificate(
    name: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Certificate | None,
    issuer_key: ec.EllipticCurvePrivateKey,
    san: x509.GeneralName | None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
    )
    if issuer is None:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    if san is not None:
        builder = builder.add_extension(x509.SubjectAlternativeName([san]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _certificate("test CA", key, None, key, None)
    path = tmp_path_factory.mktemp("ca") / "ca.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path, cert, key


@pytest.fixture
def tls_server(
    ca: tuple[Path, x509.Certificate, ec.EllipticCurvePrivateKey], tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[int]:
    """A TLS server on loopback with a certificate the CA signed for ``request.param`` (a host name or an IP)."""
    _, ca_cert, ca_key = ca
    name: str = request.param
    try:
        san: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        san = x509.DNSName(name)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _certificate(name, key, ca_cert, ca_key, san)
    chain = tmp_path / "server.pem"
    chain.write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(chain)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:  # completes handshakes, then says nothing (no Kafka protocol here)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            try:
                with context.wrap_socket(conn, server_side=True):
                    stop.wait(0.5)
            except (ssl.SSLError, OSError):
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def _props(port: int, ca_file: Path | None) -> dict[str, str]:
    props = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required username="m" password="{SECRET}";',
    }
    if ca_file is not None:
        props |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca_file)}
    return props


@pytest.mark.parametrize("tls_server", ["127.0.0.1"], indirect=True)
def test_a_certificate_from_an_unknown_ca_is_not_trusted(tls_server: int) -> None:
    with pytest.raises(ClusterUnreachableError) as err:
        check_connection("east", _props(tls_server, None), timeout=2)
    line = str(err.value)
    assert "presented a TLS certificate that is not trusted by east's truststore" in line, line
    assert "check east's ssl.truststore.location or ssl.truststore.certificates" in line
    assert "did not answer" not in line and SECRET not in line


@pytest.mark.parametrize("tls_server", ["kafka.other.example"], indirect=True)
def test_a_certificate_for_another_host_is_a_host_name_mismatch(
    tls_server: int, ca: tuple[Path, object, object]
) -> None:
    with pytest.raises(ClusterUnreachableError) as err:
        check_connection("east", _props(tls_server, ca[0]), timeout=2)
    line = str(err.value)
    assert "presented a TLS certificate that does not name 127.0.0.1" in line, line
    assert "east.ssl.endpoint.identification.algorithm= (empty)" in line
    assert SECRET not in line


@pytest.mark.parametrize("tls_server", ["127.0.0.1"], indirect=True)
def test_a_flows_cluster_names_its_alias_and_role(tls_server: int, ca: tuple[Path, object, object]) -> None:
    """The same words from a flow's cluster check (runs, DAG tasks, status), with the cluster's role."""
    text = (
        f"clusters = east, west\neast.bootstrap.servers = 127.0.0.1:{tls_server}\nwest.bootstrap.servers = 127.0.0.1:1\n"
        "east->west.enabled = true\neast.security.protocol = SSL\n"
    )
    flow = parse_config(text).flow("east", "west")
    with pytest.raises(ClusterUnreachableError) as err:
        check_cluster(flow, "source", timeout=2)
    assert str(err.value).startswith(
        f"cluster 'east' (source of east->west, bootstrap.servers 127.0.0.1:{tls_server}) presented a TLS certificate "
        "that is not trusted by east's truststore"
    ), str(err.value)


@pytest.mark.parametrize("tls_server", ["127.0.0.1"], indirect=True)
def test_a_certificate_that_verifies_is_not_called_a_refusal(tls_server: int, ca: tuple[Path, object, object]) -> None:
    """The handshake passes; the server then says nothing (it is no Kafka broker): that is silence, not a refusal."""
    with pytest.raises(ClusterUnreachableError) as err:
        check_connection("east", _props(tls_server, ca[0]), timeout=2)
    assert "did not answer" in str(err.value) and "TLS certificate" not in str(err.value), str(err.value)


def test_a_refused_login_names_the_credentials_not_the_network() -> None:
    """librdkafka's event for a broker that refused SASL credentials (as Apache Kafka 3.7 answered a wrong password)."""
    event = KafkaError(
        KafkaError._AUTHENTICATION,
        "sasl_ssl://kafka-a:9093/bootstrap: SASL authentication error: Authentication failed during authentication "
        "due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 5ms in state AUTH_REQ)",
    )
    words = refusal([KafkaError(KafkaError._TRANSPORT, "x"), event], "east", "kafka-a:9093", {})
    assert words == (
        "refused the credentials (SASL authentication failed: SASL authentication error: Authentication failed during "
        "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512): "
        "check east's sasl.jaas.config and sasl.mechanism"
    )
    assert refusal([KafkaError(KafkaError._TRANSPORT, "Connection refused")], "east", "kafka-a:9093", {}) is None
