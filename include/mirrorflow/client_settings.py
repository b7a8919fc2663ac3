"""Kafka's Java client settings in librdkafka's terms: what each security setting of ``mm2.properties`` becomes.

``mm2.properties`` carries the Java client's settings (``sasl.jaas.config``, ``ssl.truststore.location``); the
clients are librdkafka's (confluent-kafka), which names some of them differently, reads no Java key store and runs
no Java login module. :func:`translate` maps one client's Java settings to librdkafka's, or refuses a setting
librdkafka cannot honour, naming the key and what to write instead. ``config validate`` runs it for every client of
every enabled flow and ``kafka.clients`` for every client it creates, so a file the first accepts is a file the
second can use. The whole table is in the documentation's security guide.

Every message names keys, login modules and classes, never a value: a value may be a secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from .jaas import JaasEntry, JaasError, parse
from .tls_cipher_names import OPENSSL_NAMES, TLS13_SUITES

#: Java client settings with no librdkafka meaning; they are dropped. Serializers and interceptors are Java
#: classes (records are bytes here); the rest tune the JVM's TLS, the Java login's refresh or client internals that
#: librdkafka does its own way.
JAVA_ONLY = frozenset(
    {
        "key.serializer",
        "value.serializer",
        "key.deserializer",
        "value.deserializer",
        "max.poll.records",
        "max.poll.interval.ms",
        "interceptor.classes",
        "metric.reporters",
        "partitioner.class",
        "default.api.timeout.ms",
        "client.dns.lookup",
        "exclude.internal.topics",
        "buffer.memory",
        "max.block.ms",
        "security.providers",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.secure.random.implementation",
        "ssl.provider",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.oauthbearer.scope.claim.name",
        "sasl.oauthbearer.sub.claim.name",
        "sasl.oauthbearer.clock.skew.seconds",
        "sasl.oauthbearer.expected.audience",
        "sasl.oauthbearer.expected.issuer",
        "sasl.oauthbearer.header.urlencode",
    }
)
#: Java-only prefixes: the Java login's refresh and retry timing, and the broker-side token validation settings.
JAVA_ONLY_PREFIXES = (
    "sasl.login.refresh.",
    "sasl.login.retry.",
    "sasl.login.connect.",
    "sasl.login.read.",
    "sasl.oauthbearer.jwks.endpoint.",
)

#: Same meaning, other name.
RENAMED = {"sasl.mechanism": "sasl.mechanisms", "delivery.timeout.ms": "message.timeout.ms"}

#: The Java keys this module reads itself (nothing else passes them on).
_HANDLED = frozenset(
    {
        "sasl.jaas.config",
        "sasl.mechanism",
        "sasl.login.callback.handler.class",
        "sasl.client.callback.handler.class",
        "sasl.oauthbearer.token.endpoint.url",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.endpoint.identification.algorithm",
        "ssl.protocol",
        "ssl.enabled.protocols",
        "ssl.cipher.suites",
        "ssl.engine.factory.class",
    }
)

#: Kafka's OIDC client-credentials login handlers: 3.1 to 3.x, and 3.4 onwards (the only one in 4.x).
OIDC_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
)
#: What each login module needs as ``sasl.mechanism`` (Java's default mechanism is GSSAPI).
_MECHANISMS = {
    "PlainLoginModule": ("PLAIN",),
    "ScramLoginModule": ("SCRAM-SHA-256", "SCRAM-SHA-512"),
    "OAuthBearerLoginModule": ("OAUTHBEARER",),
    "Krb5LoginModule": ("GSSAPI",),
}
_PROTOCOLS_NEGOTIATED = {"TLS", "TLSV1.2", "TLSV1.3"}
_NO_TLS_VERSION = (
    "librdkafka has no setting for the TLS version: OpenSSL negotiates the highest version both sides allow "
    "(TLS 1.2 or 1.3), so older versions are not used"
)


class ClientSettingError(ValueError):
    """A client setting librdkafka cannot honour: ``key`` is the Java key to blame; the message names no value."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.reason = message


@dataclass
class Translation:
    """One client's librdkafka settings, and notes on Java settings that have no exact equivalent."""

    config: dict[str, str] = field(default_factory=dict)
    #: (Java key, what happens to it): shown as warnings by ``config validate``.
    notes: list[tuple[str, str]] = field(default_factory=list)


@lru_cache(maxsize=256)
def _jaas(text: str) -> JaasEntry:
    return parse(text)


def _mechanism(java: Mapping[str, str]) -> str:
    return java.get("sasl.mechanism", "GSSAPI").strip().upper()


def _require(options: Mapping[str, str], module: str, *names: str) -> None:
    missing = [n for n in names if not options.get(n)]
    if missing:
        raise ClientSettingError(
            "sasl.jaas.config", f"{module} needs the option{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
        )


def _sasl(java: Mapping[str, str], out: Translation) -> None:
    mechanism = _mechanism(java)
    if "sasl.mechanism" in java:
        out.config["sasl.mechanisms"] = mechanism
    if mechanism == "AWS_MSK_IAM" or "IAMLoginModule" in java.get("sasl.jaas.config", ""):
        raise ClientSettingError(
            "sasl.mechanism",
            "AWS_MSK_IAM (IAMLoginModule) is a Java plug-in that librdkafka cannot run; give the MSK cluster's "
            "mirrorflow user SASL/SCRAM (sasl.mechanism=SCRAM-SHA-512 with ScramLoginModule) or mutual TLS instead",
        )
    if java.get("sasl.client.callback.handler.class"):
        raise ClientSettingError(
            "sasl.client.callback.handler.class", "a Java callback class cannot run in librdkafka; remove it"
        )
    handler = java.get("sasl.login.callback.handler.class", "").strip()
    if handler and handler not in OIDC_HANDLERS:
        raise ClientSettingError(
            "sasl.login.callback.handler.class",
            f"{handler.rsplit('.', 1)[-1]} is a Java class librdkafka cannot run; mirrorflow reads Kafka's "
            "OAuthBearerLoginCallbackHandler (OIDC client credentials) only",
        )
    text = java.get("sasl.jaas.config")
    if text is None:
        if handler:
            raise ClientSettingError("sasl.jaas.config", "the OIDC login needs OAuthBearerLoginModule with clientId")
        return
    try:
        entry = _jaas(text)
    except JaasError as exc:
        raise ClientSettingError("sasl.jaas.config", str(exc)) from None
    module = entry.module_name
    if module not in _MECHANISMS:
        raise ClientSettingError(
            "sasl.jaas.config",
            f"login module {module} cannot run in librdkafka; use PlainLoginModule, ScramLoginModule, "
            "OAuthBearerLoginModule or Krb5LoginModule",
        )
    if mechanism not in _MECHANISMS[module]:
        wanted = " or ".join(_MECHANISMS[module])
        shown = f"is {mechanism}" if "sasl.mechanism" in java else "is not set (Java's default is GSSAPI)"
        raise ClientSettingError("sasl.mechanism", f"{shown}, but sasl.jaas.config uses {module}: set {wanted}")
    options = entry.options
    if module in ("PlainLoginModule", "ScramLoginModule"):
        _require(options, module, "username", "password")
        if options.get("tokenauth", "").lower() == "true":
            raise ClientSettingError("sasl.jaas.config", "delegation tokens (tokenauth=true) are not in librdkafka")
        out.config.update({"sasl.username": options["username"], "sasl.password": options["password"]})
    elif module == "OAuthBearerLoginModule":
        _oauthbearer(java, options, handler, out)
    else:
        _kerberos(options, out)


def _extensions(options: Mapping[str, str], prefix: str) -> list[tuple[str, str]]:
    return [(k[len(prefix) :], v) for k, v in sorted(options.items()) if k.startswith(prefix)]


def _oauthbearer(java: Mapping[str, str], options: Mapping[str, str], handler: str, out: Translation) -> None:
    """Kafka's OIDC client credentials, or its unsecured JWS login (tests and development)."""
    if handler:
        _require(options, "OAuthBearerLoginModule", "clientId", "clientSecret")
        url = java.get("sasl.oauthbearer.token.endpoint.url")
        if not url:
            raise ClientSettingError("sasl.oauthbearer.token.endpoint.url", "the OIDC login needs the token endpoint")
        out.config.update(
            {
                "sasl.oauthbearer.method": "oidc",
                "sasl.oauthbearer.token.endpoint.url": url,
                "sasl.oauthbearer.client.id": options["clientId"],
                "sasl.oauthbearer.client.secret": options["clientSecret"],
            }
        )
        if options.get("scope"):
            out.config["sasl.oauthbearer.scope"] = options["scope"]
        extensions = _extensions(options, "extension_")
        if extensions:
            out.config["sasl.oauthbearer.extensions"] = ",".join(f"{k}={v}" for k, v in extensions)
        return
    _require(options, "OAuthBearerLoginModule", "unsecuredLoginStringClaim_sub")
    parts = [f"principal={options['unsecuredLoginStringClaim_sub']}"]
    renamed = {
        "unsecuredLoginLifetimeSeconds": "lifeSeconds",
        "unsecuredLoginScopeClaimName": "scopeClaimName",
        "unsecuredLoginPrincipalClaimName": "principalClaimName",
    }
    for name, value in sorted(options.items()):
        if name in renamed:
            parts.append(f"{renamed[name]}={value}")
        elif name == "unsecuredLoginListClaim_scope":
            # Kafka's list claim: its first character is the separator of the rest.
            scopes = value[1:].split(value[:1]) if len(value) > 1 else []
            parts.append(f"scope={','.join(s for s in scopes if s)}")
        elif name.startswith("unsecuredLoginExtension_"):
            parts.append(f"extension_{name[len('unsecuredLoginExtension_') :]}={value}")
        elif name.startswith("unsecuredLogin") and name != "unsecuredLoginStringClaim_sub":
            raise ClientSettingError(
                "sasl.jaas.config",
                f"OAuthBearerLoginModule option {name} has no equivalent in librdkafka's unsecured JWT",
            )
    if any(" " in p for p in parts):
        raise ClientSettingError(
            "sasl.jaas.config", "an unsecured JWT claim with a space cannot be given to librdkafka"
        )
    out.config.update({"enable.sasl.oauthbearer.unsecure.jwt": "true", "sasl.oauthbearer.config": " ".join(parts)})


def _kerberos(options: Mapping[str, str], out: Translation) -> None:
    """``Krb5LoginModule``: a keytab (``useKeyTab``) or the ticket cache (``useTicketCache``)."""
    if options.get("useKeyTab", "").lower() == "true":
        _require(options, "Krb5LoginModule", "keyTab", "principal")
        out.config.update({"sasl.kerberos.keytab": options["keyTab"], "sasl.kerberos.principal": options["principal"]})
    elif options.get("useTicketCache", "").lower() == "true":
        if options.get("principal"):
            out.config["sasl.kerberos.principal"] = options["principal"]
        out.config["sasl.kerberos.min.time.before.relogin"] = "0"  # use the ticket cache as it is; never kinit
    else:
        raise ClientSettingError(
            "sasl.jaas.config", "Krb5LoginModule needs useKeyTab=true (with keyTab) or useTicketCache=true"
        )


def _keytool(kind: str, location: str, store_type: str) -> str:
    """The command that converts a Java store into what librdkafka reads (the path is the user's own file name)."""
    if kind == "trust":
        if store_type == "PKCS12":
            return f"openssl pkcs12 -in {location} -nokeys -out truststore.pem"
        return f"keytool -list -rfc -keystore {location} > truststore.pem"
    return (
        f"keytool -importkeystore -srckeystore {location} -srcstoretype {store_type} "
        "-destkeystore keystore.p12 -deststoretype PKCS12"
    )


def _truststore(java: Mapping[str, str], out: Translation) -> None:
    store_type = java.get("ssl.truststore.type", "JKS").strip().upper()
    location = java.get("ssl.truststore.location")
    inline = java.get("ssl.truststore.certificates")
    if inline:
        if store_type != "PEM":
            raise ClientSettingError("ssl.truststore.certificates", "needs ssl.truststore.type=PEM")
        if location:
            raise ClientSettingError("ssl.truststore.location", "set it or ssl.truststore.certificates, not both")
        out.config["ssl.ca.pem"] = inline
        return
    if not location:
        return
    if store_type != "PEM":
        raise ClientSettingError(
            "ssl.truststore.location",
            f"librdkafka cannot read a {store_type} truststore; convert it to PEM "
            f"(`{_keytool('trust', location, store_type)}`) and set ssl.truststore.type=PEM",
        )
    out.config["ssl.ca.location"] = location


def _keystore(java: Mapping[str, str], out: Translation) -> None:
    """PEM (file or inline) and PKCS12 keystores; ``ssl.key.password`` (an encrypted key) passes as it is."""
    store_type = java.get("ssl.keystore.type", "JKS").strip().upper()
    location = java.get("ssl.keystore.location")
    key, chain = java.get("ssl.keystore.key"), java.get("ssl.keystore.certificate.chain")
    if key or chain:
        if store_type != "PEM":
            raise ClientSettingError(
                "ssl.keystore.key" if key else "ssl.keystore.certificate.chain", "needs ssl.keystore.type=PEM"
            )
        if not (key and chain):
            missing = "ssl.keystore.certificate.chain" if key else "ssl.keystore.key"
            raise ClientSettingError(missing, "an inline PEM keystore needs both ssl.keystore.key and this")
        if location:
            raise ClientSettingError("ssl.keystore.location", "set it or the inline ssl.keystore.key, not both")
        out.config.update({"ssl.certificate.pem": chain, "ssl.key.pem": key})
    elif not location:
        return
    elif store_type == "PEM":
        out.config.update({"ssl.certificate.location": location, "ssl.key.location": location})
    elif store_type == "PKCS12":
        out.config["ssl.keystore.location"] = location
        if java.get("ssl.keystore.password"):
            out.config["ssl.keystore.password"] = java["ssl.keystore.password"]
    else:
        raise ClientSettingError(
            "ssl.keystore.location",
            f"librdkafka cannot read a {store_type} keystore; convert it to PKCS12 "
            f"(`{_keytool('key', location, store_type)}`) and set ssl.keystore.type=PKCS12",
        )


def _endpoint_identification(value: str) -> str:
    algorithm = value.strip().lower()
    if algorithm in ("", "none"):
        return "none"  # Java: an empty value turns hostname verification off
    if algorithm == "https":
        return "https"
    raise ClientSettingError("ssl.endpoint.identification.algorithm", "must be https or empty (no hostname check)")


def _cipher_suites(value: str) -> str | None:
    names = []
    for suite in (s.strip() for s in value.split(",")):
        if not suite or suite in TLS13_SUITES:
            continue  # OpenSSL enables every TLS 1.3 suite by default
        if suite in OPENSSL_NAMES:
            names.append(OPENSSL_NAMES[suite])
        elif suite in OPENSSL_NAMES.values():
            names.append(suite)  # already OpenSSL's name
        else:
            raise ClientSettingError("ssl.cipher.suites", f"'{suite}' is not a cipher suite OpenSSL knows")
    return ":".join(names) or None


def _tls(java: Mapping[str, str], out: Translation) -> None:
    if java.get("ssl.engine.factory.class"):
        raise ClientSettingError("ssl.engine.factory.class", "a Java class cannot run in librdkafka; remove it")
    _truststore(java, out)
    _keystore(java, out)
    if "ssl.endpoint.identification.algorithm" in java:
        out.config["ssl.endpoint.identification.algorithm"] = _endpoint_identification(
            java["ssl.endpoint.identification.algorithm"]
        )
    if java.get("ssl.cipher.suites"):
        suites = _cipher_suites(java["ssl.cipher.suites"])
        if suites:
            out.config["ssl.cipher.suites"] = suites
    for key in ("ssl.protocol", "ssl.enabled.protocols"):
        versions = {v.strip().upper() for v in java.get(key, "").split(",") if v.strip()}
        if versions - _PROTOCOLS_NEGOTIATED:
            out.notes.append((key, _NO_TLS_VERSION))


@lru_cache(maxsize=1)
def kerberos_available() -> bool:
    """True when this Python's librdkafka is built with SASL/GSSAPI (the PyPI wheels of confluent-kafka are not)."""
    from confluent_kafka import KafkaException, Producer  # only when a file asks for Kerberos

    try:
        Producer({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "GSSAPI"}).flush(0)
    except KafkaException as exc:
        return "No provider for SASL mechanism" not in str(exc)
    return True


def is_java_only(key: str) -> bool:
    """True for a Java client setting librdkafka has no use for (dropped)."""
    return key in JAVA_ONLY or key.startswith(JAVA_ONLY_PREFIXES)


def translate(java: Mapping[str, str]) -> Translation:
    """librdkafka's settings for one client's Java settings; :class:`ClientSettingError` names a setting it refuses.

    Settings librdkafka has under the same name (``security.protocol``, ``sasl.kerberos.service.name``,
    ``ssl.ca.location``, ``linger.ms``) pass as they are; so does any librdkafka-only setting a user writes.
    """
    out = Translation()
    for key, value in java.items():
        if key in _HANDLED or is_java_only(key):
            continue
        out.config[RENAMED.get(key, key)] = value
    _sasl(java, out)
    _tls(java, out)
    return out


__all__ = [
    "JAVA_ONLY",
    "OIDC_HANDLERS",
    "RENAMED",
    "ClientSettingError",
    "Translation",
    "is_java_only",
    "kerberos_available",
    "translate",
]
