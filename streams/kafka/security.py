"""Kafka security (SASL PLAIN/SCRAM, TLS) for every Kafka client we open, and a clear error
when the broker refuses the credentials instead of aiokafka's generic "unable to bootstrap"."""

from __future__ import annotations

import socket
import ssl
import time
from typing import Any

from .client_settings import KafkaSettings


class KafkaAuthError(RuntimeError):
    """The broker rejected our credentials or TLS handshake; retrying will not help."""


def ssl_context(s: KafkaSettings) -> ssl.SSLContext | None:
    if not s.kafka_security.endswith("SSL"):
        return None
    ctx = ssl.create_default_context(cafile=s.ssl_cafile or None)
    ctx.check_hostname = s.ssl_check_hostname
    if s.ssl_certfile:
        ctx.load_cert_chain(
            s.ssl_certfile, s.ssl_keyfile or None, s.ssl_key_password.get_secret_value() or None
        )
    return ctx


def client_kwargs(s: KafkaSettings) -> dict[str, Any]:
    """aiokafka producer/consumer/admin keyword arguments."""
    kw: dict[str, Any] = {"security_protocol": s.kafka_security}
    ctx = ssl_context(s)
    if ctx is not None:
        kw["ssl_context"] = ctx
    if s.sasl_mechanism:
        kw.update(
            sasl_mechanism=s.sasl_mechanism,
            sasl_plain_username=s.sasl_username,
            sasl_plain_password=s.sasl_password.get_secret_value(),
        )
    return kw


def faust_credentials(s: KafkaSettings) -> Any:
    """`broker_credentials` for faust.App (None for PLAINTEXT)."""
    import faust

    proto = s.kafka_security
    if proto == "PLAINTEXT":
        return None
    if proto == "SSL":
        return faust.SSLCredentials(ssl_context(s))
    return faust.SASLCredentials(
        username=s.sasl_username,
        password=s.sasl_password.get_secret_value(),
        mechanism=s.sasl_mechanism,
        ssl_context=ssl_context(s),
    )


def describe(s: KafkaSettings) -> str:
    if s.sasl_mechanism:
        return f"{s.kafka_security} {s.sasl_mechanism} as {s.sasl_username!r}"
    return s.kafka_security


async def diagnose(s: KafkaSettings, timeout_s: float = 10.0) -> None:
    """Open one connection per bootstrap address; raise KafkaAuthError if the broker turns
    our credentials or certificate down. Plain unreachability is left to the caller."""
    from aiokafka.conn import create_conn
    from aiokafka.errors import KafkaError, SaslAuthenticationFailed, UnsupportedSaslMechanismError

    kw = client_kwargs(s)
    for hp in s.bootstrap_servers.split(","):
        host, _, port = hp.rpartition(":")
        try:
            conn = await create_conn(host, int(port), request_timeout_ms=int(timeout_s * 1000), **kw)
        except (SaslAuthenticationFailed, UnsupportedSaslMechanismError) as exc:
            raise KafkaAuthError(
                f"Kafka at {hp} rejected the credentials ({describe(s)}): {exc}. "
                "Check RB_SASL_USERNAME, RB_SASL_PASSWORD and RB_SASL_MECHANISM."
            ) from None
        except ssl.SSLError as exc:
            raise KafkaAuthError(
                f"TLS handshake with Kafka at {hp} failed ({describe(s)}): {exc}. "
                "Check RB_SSL_CAFILE, RB_SSL_CERTFILE, RB_SSL_KEYFILE and RB_SECURITY_PROTOCOL."
            ) from None
        except KafkaError as exc:
            if s.kafka_security.endswith("SSL") and not s.ssl_certfile and "closed" in str(exc):
                # TLS 1.3: the broker checks the client's certificate after the handshake and
                # closes the connection when there is none
                raise KafkaAuthError(
                    f"Kafka at {hp} closed the TLS connection ({describe(s)}): it may require a "
                    "client certificate. Set RB_SSL_CERTFILE and RB_SSL_KEYFILE (a certificate its "
                    "CA issued)."
                ) from None
            continue
        except OSError:
            continue
        conn.close()


def unreachable(s: KafkaSettings, wait_s: float = 5.0) -> str | None:
    """None once any bootstrap address accepts a TCP connection within `wait_s` (a broker that
    is still starting gets that long); else one line saying which addresses were tried. Asked
    before any Kafka client starts, so that no broker is one line within seconds, not
    aiokafka's 30 s of "Unable connect" lines."""
    addrs = s.bootstrap_servers.split(",")
    deadline = time.monotonic() + wait_s
    while True:
        for hp in addrs:
            host, _, port = hp.rpartition(":")
            try:
                with socket.create_connection((host.strip("[]"), int(port)), timeout=1.0) as conn:
                    if s.kafka_security.endswith("SSL"):
                        return None  # TLS first: aiokafka's handshake says what is wrong there
                    return not_kafka(conn, hp)
            except OSError:
                continue
        if time.monotonic() >= deadline:
            return unreachable_message(addrs)
        time.sleep(0.5)


KAFKA_PROBE_S = 5.0  # how long a listening port gets to answer a Kafka request


def not_kafka(conn: socket.socket, where: str, timeout_s: float = KAFKA_PROBE_S) -> str | None:
    """None when the peer answers a Kafka ApiVersions request (v0, allowed before SASL) with a
    Kafka response; else one line saying that the port is not a Kafka broker. Without it a
    worker pointed at, say, a web server waits 30 s and says "KafkaConnectionError"."""
    correlation = 0x52425354
    client = b"rb-streams-probe"
    body = (18).to_bytes(2, "big") + (0).to_bytes(2, "big") + correlation.to_bytes(4, "big")
    body += len(client).to_bytes(2, "big") + client
    got = b""
    closed = False
    try:
        conn.settimeout(timeout_s)
        conn.sendall(len(body).to_bytes(4, "big") + body)
        end = time.monotonic() + timeout_s
        while len(got) < 8 and time.monotonic() < end:
            chunk = conn.recv(8 - len(got))
            if not chunk:
                closed = True
                break
            got += chunk
    except OSError:
        pass  # a reset or a timeout: judged by what came back
    size = int.from_bytes(got[:4], "big") if len(got) >= 4 else -1
    if len(got) == 8 and 4 <= size <= 1 << 20 and int.from_bytes(got[4:8], "big") == correlation:
        return None
    if not got:
        what = "the connection closed, no answer" if closed else f"no answer within {timeout_s:g} s"
    else:
        what = f"it answered {got[:8]!r}"
    return (
        f"{where} accepts connections but is not a Kafka broker ({what} to a Kafka request): "
        "check RB_BROKER's port (and RB_SECURITY_PROTOCOL)"
    )


def unreachable_message(addrs: list[str]) -> str:
    """One line naming the addresses tried and a command that exists wherever rb-streams is
    installed (`make kafka-start` is only in a checkout): the packaged `rb-streams kafka start`,
    on the port the user asked for when it is a local address."""
    host, _, port = addrs[0].rpartition(":")
    local = host.strip("[]") in ("127.0.0.1", "localhost", "::1", "0.0.0.0")
    start = f"`rb-streams kafka start --port {port}`" if local else "check RB_BROKER"
    return f"cannot reach the broker at {', '.join(addrs)} (RB_BROKER); is it running? ({start})"
