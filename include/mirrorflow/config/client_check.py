"""``config validate`` runs the clients' own translation (``client_settings``) on every client of an enabled flow.

A setting librdkafka cannot honour (a JKS store, an unquoted path in a JAAS line, a login module with no
librdkafka equivalent) is then an error at its line of the file, not a failure of the first run. The six clients of
a flow share most settings; repeats of one finding are dropped later (``problems.dedupe_problems``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..client_settings import ClientSettingError, kerberos_available, translate
from .model import Origin, Role, Setting, Side

#: Where a finding about a key the client does not set is reported: the setting that needs it.
_RELATED = ("sasl.jaas.config", "sasl.mechanism", "ssl.keystore.key", "ssl.keystore.location", "security.protocol")

Report = Callable[[Origin, str], None]

_NO_KERBEROS = (
    "this Python's confluent-kafka is built without Kerberos (GSSAPI): a client fails when it is created here; install "
    "a confluent-kafka built against a librdkafka with Cyrus SASL on every Airflow worker and Spark executor"
)


def _origin(settings: Mapping[str, Setting], key: str) -> tuple[Origin | None, bool]:
    """The origin of ``key``, or of the setting that needs it (and False: the message must name ``key``)."""
    if key in settings:
        return settings[key].origin, True
    for related in _RELATED:
        if related in settings:
            return settings[related].origin, False
    return None, False


def check_clients(clients: Mapping[tuple[Side, Role], Mapping[str, Setting]], error: Report, warning: Report) -> None:
    """Translate each client's settings; report what librdkafka cannot honour (errors) or honours in part (notes)."""
    for settings in clients.values():
        java = {key: setting.value for key, setting in settings.items()}
        try:
            translation = translate(java)
        except ClientSettingError as exc:
            origin, own = _origin(settings, exc.key)
            if origin is not None:
                error(origin, exc.reason if own else str(exc))
            continue
        notes = list(translation.notes)
        if translation.config.get("sasl.mechanisms") == "GSSAPI" and not kerberos_available():
            notes.append(("sasl.mechanism", _NO_KERBEROS))
        for key, note in notes:
            origin, own = _origin(settings, key)
            if origin is not None:
                warning(origin, note if own else f"{key}: {note}")


__all__ = ["check_clients"]
