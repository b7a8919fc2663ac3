"""Why a cluster that answered would not serve us: credentials refused, certificate not trusted, host name mismatch.

librdkafka reports a refused login as a failed connection and says the same ``certificate verify failed`` for a
certificate from an unknown CA as for a certificate of another host, so an on-call reader looked at the network when
the password or the truststore was wrong. :func:`refusal` tells these apart and says which setting to check; for a
failed TLS verification it asks the broker once more with Python's ``ssl`` (OpenSSL, as librdkafka), which does say
why. Nothing here ever names a secret: settings are named by key.
"""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError

from .clients import server_address
from .errors import event_words

_CREDENTIALS = (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED)
# OpenSSL's verification results that mean "a certificate for another name" (X509_V_ERR_HOSTNAME_MISMATCH,
# X509_V_ERR_IP_ADDRESS_MISMATCH).
_NAME_MISMATCH = (62, 64)
_TLS_PROBE_S = 3.0


def _first_server(bootstrap: str) -> tuple[str, int] | None:
    return next(filter(None, (server_address(s) for s in bootstrap.split(",") if s.strip())), None)


def _context(config: Mapping[str, Any]) -> ssl.SSLContext:
    """An OpenSSL client context that trusts what librdkafka was told to trust and checks host names as it does."""
    location, pem = config.get("ssl.ca.location"), config.get("ssl.ca.pem")
    if location or pem:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if location:
            context.load_verify_locations(**({"capath": location} if os.path.isdir(location) else {"cafile": location}))
        if pem:
            context.load_verify_locations(cadata=str(pem))
    else:
        context = ssl.create_default_context()
    algorithm = str(config.get("ssl.endpoint.identification.algorithm", "https")).strip().lower()
    context.check_hostname = algorithm == "https"
    return context


def tls_verdict(bootstrap: str, config: Mapping[str, Any], timeout: float = _TLS_PROBE_S) -> tuple[bool, str] | None:
    """Why a broker's certificate fails verification with the client's trust settings: (host name mismatch?, words).

    One TLS handshake with the CA librdkafka was given (``ssl.ca.location``, ``ssl.ca.pem``, else the system's)
    and host name checking as ``ssl.endpoint.identification.algorithm`` says. None when it cannot tell (no answer,
    or the handshake passes here).
    """
    server = _first_server(bootstrap)
    if server is None:
        return None
    host, port = server
    try:
        context = _context(config)
        with (
            socket.create_connection((host, port), timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=host),
        ):
            return None
    except ssl.SSLCertVerificationError as exc:
        return exc.verify_code in _NAME_MISMATCH, str(exc.verify_message)
    except (OSError, ValueError):
        return None


def refusal(errors: Iterable[KafkaError], alias: str, bootstrap: str, config: Mapping[str, Any]) -> str | None:
    """What the cluster refused, in words that name the setting to check; None when nothing was refused."""
    errors = list(errors)
    login = [e for e in errors if e.code() in _CREDENTIALS]
    if login:
        return (
            f"refused the credentials (SASL authentication failed: {event_words(login[-1])}): "
            f"check {alias}'s sasl.jaas.config and sasl.mechanism"
        )
    tls = [e for e in errors if e.code() == KafkaError._SSL]
    if not tls:
        return None
    server = _first_server(bootstrap)
    where = f"{server[0]}:{server[1]}" if server else "the broker"
    verdict = tls_verdict(bootstrap, config) if "certificate verify failed" in tls[-1].str() else None
    if verdict is not None:
        mismatch, words = verdict
        if mismatch:
            return (
                f"presented a TLS certificate that does not name {server[0] if server else 'the host'} ({words}): "
                f"check the host names of {alias}'s bootstrap.servers, or set "
                f"{alias}.ssl.endpoint.identification.algorithm= (empty) to turn the check off"
            )
        return (
            f"presented a TLS certificate that is not trusted by {alias}'s truststore ({words}, at {where}): "
            f"check {alias}'s ssl.truststore.location or ssl.truststore.certificates"
        )
    return f"failed the TLS handshake ({event_words(tls[-1])}): check {alias}'s ssl.* settings"


__all__ = ["refusal", "tls_verdict"]
