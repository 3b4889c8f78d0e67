"""One typed settings object, read from RB_* environment variables and CLI flags."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from .core.events import Limits
from .core.retention import DEFAULT_MAX_RUNS_PER_ORG

ENV_PREFIX = "RB_"
GUARANTEES = ("at_least_once", "exactly_once")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
LOG_LEVELS = ("debug", "info", "warn", "error", "crit")


class SettingsError(ValueError):
    """Invalid configuration; the message names the variable."""


@dataclass(frozen=True)
class Settings:
    broker: str = "kafka://127.0.0.1:9092"
    topic_prefix: str = "rb"
    partitions: int = 8
    replication_factor: int = 1
    app_id: str = "rb-streams"
    store: str = "rocksdb://"
    data_dir: str = ".local/worker"
    web_host: str = "127.0.0.1"
    web_port: int = 6066
    web_advertised_url: str = ""  # how other workers reach this one (default http://<host>:<port>)
    web_token: str = ""  # secret: when set, /runs and /metrics need "Authorization: Bearer <token>"
    processing_guarantee: str = "at_least_once"
    session_timeout_s: float = 10.0
    heartbeat_interval_s: float = 1.0
    client_deadline_ms: int = 250
    finished_retention_s: float = 3600.0  # a finished run's state is kept this long (0: forever)
    idle_timeout_s: float = 86400.0  # an unfinished run with no event this long is dropped (0: never)
    evict_interval_s: float = 30.0  # how often the worker looks for runs to evict
    # runs one org may hold in the table (unfinished, and finished within retention); split
    # evenly over the partitions; past it run_start is dead-lettered too_many_runs (0: no cap)
    max_runs_per_org: int = DEFAULT_MAX_RUNS_PER_ORG
    # secret: when set, rb.evict control records are signed and unsigned ones refused
    control_key: str = ""
    # /ready answers 503 while an event read from a partition has waited this long for its ack
    stall_threshold_s: float = 30.0
    max_event_bytes: int = 256 * 1024
    max_thought_chars: int = 20_000
    log_level: str = "info"
    monitor_profiles: str = ""  # JSON/TOML file of custom monitor weight profiles
    qdrant_url: str = ""  # a Qdrant server (also read from QDRANT_URL); empty: local mode on disk
    qdrant_api_key: str = ""  # secret: masked by `rb-streams config`
    patterns_path: str = ""  # local-mode store directory (default <data_dir>/patterns)
    patterns_seed: str = ""  # JSONL loaded (upserted) into the store when the worker starts
    etrace_timeout_ms: int = 150  # per decision, for all its E-trace queries
    etrace_concurrency: int = 2  # E-trace queries in flight per worker
    etrace_retry_s: float = 5.0  # rest given to a failing store before trying it again
    # Kafka security, for the worker and the agent-side client alike. The protocol defaults
    # to what the other settings imply: SASL_* with a mechanism, SSL with a CA file.
    security_protocol: str = ""  # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    sasl_mechanism: str = ""  # PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
    sasl_username: str = ""
    sasl_password: str = ""  # secret
    ssl_cafile: str = ""  # CA bundle (PEM) that signed the brokers' certificates
    ssl_certfile: str = ""  # client certificate (PEM), for mutual TLS
    ssl_keyfile: str = ""  # its private key (PEM)
    ssl_key_password: str = ""  # secret
    ssl_check_hostname: bool = True

    # -- derived -------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        """aiokafka form: host:port[,host:port] without the kafka:// scheme."""
        parts = []
        for part in self.broker.split(";"):
            for hp in part.split(","):
                hp = hp.strip()
                if "://" in hp:
                    hp = hp.split("://", 1)[1]
                if hp:
                    parts.append(hp)
        return ",".join(parts)

    @property
    def faust_broker(self) -> str:
        return ";".join(f"kafka://{hp}" for hp in self.bootstrap_servers.split(","))

    @property
    def advertised_url(self) -> str:
        if self.web_advertised_url:
            return self.web_advertised_url
        host = socket.gethostname() if self.web_host in ("0.0.0.0", "::", "") else self.web_host
        return f"http://{host}:{self.web_port}"

    @property
    def steps_topic(self) -> str:
        return f"{self.topic_prefix}.steps"

    @property
    def steering_topic(self) -> str:
        return f"{self.topic_prefix}.steering"

    @property
    def deadletter_topic(self) -> str:
        return f"{self.topic_prefix}.deadletter"

    @property
    def limits(self) -> Limits:
        return Limits(max_event_bytes=self.max_event_bytes, max_thought_chars=self.max_thought_chars)

    @property
    def kafka_security(self) -> str:
        if self.security_protocol:
            return self.security_protocol
        tls = bool(self.ssl_cafile or self.ssl_certfile)
        if self.sasl_mechanism:
            return "SASL_SSL" if tls else "SASL_PLAINTEXT"
        return "SSL" if tls else "PLAINTEXT"

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir).resolve()

    @property
    def patterns_dir(self) -> Path:
        return Path(self.patterns_path).resolve() if self.patterns_path else self.data_path / "patterns"

    # -- construction --------------------------------------------------------
    @classmethod
    def env_name(cls, field_name: str) -> str:
        return ENV_PREFIX + field_name.upper()

    @classmethod
    def parse_value(cls, field_name: str, raw: str) -> Any:
        """A setting's value from its text form (env var or CLI flag)."""
        typ = next(f.type for f in fields(cls) if f.name == field_name)
        return _coerce(cls.env_name(field_name), raw, typ)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for f in fields(cls):
            name = cls.env_name(f.name)
            if name in env and env[name] != "":
                values[f.name] = _coerce(name, env[name], f.type)
        if "qdrant_url" not in values and env.get("QDRANT_URL"):
            values["qdrant_url"] = env["QDRANT_URL"]
        values.update({k: v for k, v in overrides.items() if v is not None})
        s = cls(**values)
        s.validate()
        return s

    def with_(self, **changes: Any) -> Settings:
        s = replace(self, **changes)
        s.validate()
        return s

    def validate(self) -> None:
        def bad(field_name: str, msg: str) -> SettingsError:
            return SettingsError(f"{self.env_name(field_name)}: {msg}")

        if not self.bootstrap_servers:
            raise bad("broker", "no broker address given")
        if not self.topic_prefix or any(c not in _TOPIC_CHARS for c in self.topic_prefix):
            raise bad("topic_prefix", f"{self.topic_prefix!r} is not a valid Kafka topic prefix")
        for name in (
            "partitions",
            "replication_factor",
            "web_port",
            "client_deadline_ms",
            "max_event_bytes",
            "max_thought_chars",
            "etrace_timeout_ms",
            "etrace_concurrency",
        ):
            if getattr(self, name) < 1:
                raise bad(name, "must be >= 1")
        if self.web_port > 65535:
            raise bad("web_port", "must be <= 65535")
        if self.processing_guarantee not in GUARANTEES:
            raise bad("processing_guarantee", f"must be one of {', '.join(GUARANTEES)}")
        if self.log_level not in LOG_LEVELS:
            raise bad("log_level", f"must be one of {', '.join(LOG_LEVELS)}")
        if not (self.store.startswith("rocksdb://") or self.store.startswith("memory://")):
            raise bad("store", "must be rocksdb:// or memory://")
        if self.session_timeout_s <= 0 or self.heartbeat_interval_s <= 0:
            raise bad("session_timeout_s", "timeouts must be positive")
        if self.heartbeat_interval_s >= self.session_timeout_s:
            raise bad("heartbeat_interval_s", "must be below the session timeout")
        if self.etrace_timeout_ms >= self.client_deadline_ms:
            raise bad("etrace_timeout_ms", "must be below the client deadline (RB_CLIENT_DEADLINE_MS)")
        for name in ("finished_retention_s", "idle_timeout_s"):
            if getattr(self, name) < 0:
                raise bad(name, "must be >= 0 (0 keeps runs forever)")
        if self.evict_interval_s <= 0:
            raise bad("evict_interval_s", "must be > 0")
        if self.max_runs_per_org < 0:
            raise bad("max_runs_per_org", "must be >= 0 (0: no cap)")
        if self.stall_threshold_s <= 0:
            raise bad("stall_threshold_s", "must be > 0")
        if self.etrace_retry_s < 0:
            raise bad("etrace_retry_s", "must be >= 0")
        if self.qdrant_url and not self.qdrant_url.startswith(("http://", "https://")):
            raise bad("qdrant_url", f"{self.qdrant_url!r} is not an http(s) URL")
        if self.patterns_seed and not Path(self.patterns_seed).is_file():
            raise bad("patterns_seed", f"{self.patterns_seed!r} is not a file")
        self._validate_security(bad)

    def _validate_security(self, bad: Any) -> None:
        if self.security_protocol and self.security_protocol not in SECURITY_PROTOCOLS:
            raise bad("security_protocol", f"must be one of {', '.join(SECURITY_PROTOCOLS)}")
        if self.sasl_mechanism and self.sasl_mechanism not in SASL_MECHANISMS:
            raise bad("sasl_mechanism", f"must be one of {', '.join(SASL_MECHANISMS)}")
        proto = self.kafka_security
        if proto.startswith("SASL_"):
            if not self.sasl_mechanism:
                raise bad("sasl_mechanism", f"required with security protocol {proto}")
            if not self.sasl_username:
                raise bad("sasl_username", f"required with SASL mechanism {self.sasl_mechanism}")
            if not self.sasl_password:
                raise bad("sasl_password", f"required with SASL mechanism {self.sasl_mechanism}")
        elif self.sasl_mechanism:
            raise bad("sasl_mechanism", f"set, but the security protocol is {proto}")
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            path = getattr(self, name)
            if path and not proto.endswith("SSL"):
                raise bad(name, f"set, but the security protocol is {proto}")
            if path and not Path(path).is_file():
                raise bad(name, f"{path!r} is not a file")
        if self.ssl_keyfile and not self.ssl_certfile:
            raise bad("ssl_certfile", "required with RB_SSL_KEYFILE")

    def as_dict(self, mask_secrets: bool = False) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        if mask_secrets:
            for name in SECRETS:
                if d.get(name):
                    d[name] = "****"
        return d


SECRETS = ("qdrant_api_key", "sasl_password", "ssl_key_password", "web_token", "control_key")
_TOPIC_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def _coerce(name: str, raw: str, typ: Any) -> Any:
    t = typ if isinstance(typ, str) else getattr(typ, "__name__", str(typ))
    try:
        if t == "int":
            return int(raw)
        if t == "float":
            return float(raw)
        if t == "bool":
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
    except ValueError:
        raise SettingsError(f"{name}: {raw!r} is not a valid {t}") from None
    return raw
