"""Secret detection and redaction, in one place.

Passwords, JAAS configs, keys and webhook URLs must never reach logs, the UI, XCom or error messages. Every
component that prints configuration goes through :func:`redact_value`, so the rule lives here once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

REDACTED = "[redacted]"

# Kafka's ConfigDef PASSWORD-typed keys (ssl.key.password, ssl.keystore.password, ssl.truststore.password,
# ssl.keystore.key, ssl.keystore.certificate.chain, ssl.truststore.certificates, sasl.jaas.config,
# sasl.oauthbearer client secrets) and librdkafka's equivalents (sasl.password, ssl.key.pem, ...).
_SECRET_KEY = re.compile(
    r"(password|passwd|secret|jaas|credential|token|api[._-]?key|private|"
    r"keystore\.key|key\.pem|ssl\.key$|certificate\.chain|truststore\.certificates|"
    r"basic\.auth\.user\.info|"
    # a webhook URL usually carries its credential in the path or query (Slack, Teams, PagerDuty)
    r"webhook\.url$)",
    re.IGNORECASE,
)
# Values that carry secrets even under an innocent key (a JAAS line pasted into the wrong key).
_SECRET_VALUE = re.compile(r"(LoginModule|password\s*=|secret\s*=|-----BEGIN)", re.IGNORECASE)


def is_secret_key(key: str) -> bool:
    """True when a configuration key holds a secret, whatever prefix (``<alias>.``, ``consumer.``) it has."""
    return bool(_SECRET_KEY.search(key))


def is_secret(key: str, value: str | None) -> bool:
    """True when the key or the value looks secret."""
    return is_secret_key(key) or (value is not None and bool(_SECRET_VALUE.search(value)))


def redact_value(key: str, value: str | None) -> str | None:
    """The value, or ``[redacted]`` when it is (or looks) secret."""
    if value is None:
        return None
    return REDACTED if is_secret(key, value) else value


def redact_mapping(config: Mapping[str, object]) -> dict[str, object]:
    """A copy of a client configuration safe to log."""
    return {k: (redact_value(k, v) if isinstance(v, str) else v) for k, v in config.items()}
