"""Kafka's OIDC client-credentials login, written as an MM2 user writes it, fetches its token from the endpoint.

Why this exists: the OAUTHBEARER row of the security table is a translation to librdkafka's own OIDC client. Here a
flow's client, built from ``mm2.properties`` exactly as a run builds it, asks a token endpoint on loopback: the
request must carry the client id and secret (HTTP Basic), the grant type and the scope. The broker part of the
login needs SASL, which the embedded brokers lack, so it is left to Apache Kafka.
"""

from __future__ import annotations

import base64
import http.server
import json
import time
from collections.abc import Iterator

import pytest

from mirrorflow.config import parse_config
from mirrorflow.kafka import clients
from mirrorflow_dev.loopback_http import serving

HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"


@pytest.fixture
def token_endpoint() -> Iterator[tuple[str, list[tuple[str, str | None, str]]]]:
    """An OAuth token endpoint on loopback answering every POST with an unsigned JWT; yields (url, requests)."""
    seen: list[tuple[str, str | None, str]] = []

    class Endpoint(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
            seen.append((self.path, self.headers.get("Authorization"), body))
            now = int(time.time())

            def part(value: dict[str, object]) -> str:
                return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

            token = f"{part({'alg': 'none'})}.{part({'sub': 'mirror', 'iat': now, 'exp': now + 3600})}.sig"
            out = json.dumps({"access_token": token, "token_type": "bearer", "expires_in": 3600}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving(Endpoint) as base:
        yield f"{base}/oauth2/token", seen


def test_a_flow_client_fetches_its_token_with_the_files_client_credentials(
    token_endpoint: tuple[str, list[tuple[str, str | None, str]]],
) -> None:
    url, seen = token_endpoint
    text = (
        "clusters = a, b\na.bootstrap.servers = 127.0.0.1:1\nb.bootstrap.servers = 127.0.0.1:1\na->b.enabled = true\n"
        "b.security.protocol = SASL_PLAINTEXT\nb.sasl.mechanism = OAUTHBEARER\n"
        f"b.sasl.login.callback.handler.class = {HANDLER}\nb.sasl.oauthbearer.token.endpoint.url = {url}\n"
        "b.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'clientId="mirror" clientSecret="s3cret" scope="kafka.mirror";\n'
    )
    producer = clients.producer(parse_config(text).flow("a", "b"), "target")
    deadline = time.monotonic() + 15
    while not seen and time.monotonic() < deadline:
        producer.poll(0.1)
    assert seen, "librdkafka never asked the token endpoint"
    path, authorization, body = seen[0]
    assert path == "/oauth2/token"
    assert authorization == "Basic " + base64.b64encode(b"mirror:s3cret").decode()
    assert sorted(body.split("&")) == ["grant_type=client_credentials", "scope=kafka.mirror"]
