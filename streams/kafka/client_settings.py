"""Settings for reaching the broker and for the agent side, on pydantic-settings: RB_*
environment variables, secret files and explicit values.

* `KafkaSettings`: how to reach the broker (addresses, topic prefix, SASL/TLS). Shared by the
  agent-side client, topic creation, the security helpers and the worker.
* `ClientSettings`: what the agent side needs on top (its decision deadline, its tenant). The
  client validates only these, never the worker's fields.

The worker's `Settings` (streams.settings) extends them. This module imports nothing of the
core, so that a client-only install (`pip install rb-streams`, without the `worker` extra)
can read its settings.

Precedence: explicit values (CLI flags, keyword arguments) > RB_* variables > secret files
(`RB_<NAME>_FILE`, or a file named `RB_<NAME>` in `RB_SECRETS_DIR`) > defaults. An invalid value
fails at start-up with one line naming the variable and the value (the agent-side client
instead goes on unsteered: `SteeringClient`). An RB_* variable nothing reads (a misspelt name) is
warned about once per process, with the closest name.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    Field,
    SecretStr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

log = logging.getLogger("streams.settings")

ENV_PREFIX = "RB_"
SECRETS_DIR_ENV = "RB_SECRETS_DIR"
MASK = "****"
TOPIC_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")

SecurityProtocol = Literal["", "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


class SettingsError(ValueError):
    """Invalid configuration; the message names the variable (and the value).

    `field`: the one setting at fault, when there is one (the message then starts with its
    variable's name, `RB_<FIELD>: `): a caller that took the value from elsewhere (a command
    line flag) names that instead, with `named_as`."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field

    @property
    def detail(self) -> str:
        """The message without the variable's name in front: what is wrong with the value."""
        msg, prefix = str(self), f"{ENV_PREFIX}{(self.field or '').upper()}: "
        return msg[len(prefix) :] if self.field is not None and msg.startswith(prefix) else msg

    def named_as(self, name: str) -> SettingsError:
        """The same error naming `name` (e.g. `--broker`) where it named the variable."""
        return self if self.detail == str(self) else SettingsError(f"{name}: {self.detail}", self.field)


# The worker's own variables (streams.settings.Settings beyond ClientSettings, and its secret
# files): the agent side, which cannot import them (a client-only install has no core), must
# not warn about them, since agents and workers often share an environment.
# tests/unit/test_settings.py checks this list against Settings: add a new worker field here.
WORKER_ENV_NAMES = frozenset(
    "RB_" + n
    for n in [
        "PARTITIONS",
        "REPLICATION_FACTOR",
        "APP_ID",
        "STORE",
        "DATA_DIR",
        "WEB_HOST",
        "WEB_PORT",
        "WEB_ADVERTISED_URL",
        "WEB_TOKEN",
        "WEB_TOKEN_FILE",
        "WEB_ALLOW_ANONYMOUS",
        "PROCESSING_GUARANTEE",
        "PRODUCER_COMPRESSION",
        "STATE_CODEC",
        "STATE_LAYOUT",
        "SESSION_TIMEOUT_S",
        "HEARTBEAT_INTERVAL_S",
        "FINISHED_RETENTION_S",
        "IDLE_TIMEOUT_S",
        "EVICT_INTERVAL_S",
        "MAX_RUNS_PER_ORG",
        "MAX_RUNS",
        "CONTROL_KEY",
        "CONTROL_KEY_FILE",
        "TENANTS",
        "TENANT_TOKENS",
        "TENANT_TOKENS_FILE",
        "STALL_THRESHOLD_S",
        "STALL_EXIT_S",
        "MAX_EVENT_BYTES",
        "MAX_THOUGHT_CHARS",
        "LOG_LEVEL",
        "MONITOR_PROFILES",
        "PRICES_FILE",
        "ESCALATION",
        "ORG_ESCALATION",
        "MONITOR_DEFAULTS",
        "ORG_MONITOR_DEFAULTS",
        "WAIT_BUDGET_S",
        "WAIT_BUDGET_CALLS",
        "WAIT_BUDGET_USD",
        "ORG_WAIT_BUDGET",
        "EXPERIMENT",
        "ORG_EXPERIMENT",
        "QDRANT_URL",
        "QDRANT_API_KEY",
        "QDRANT_API_KEY_FILE",
        "PATTERNS_PATH",
        "PATTERNS_SEED",
        "ETRACE_TIMEOUT_MS",
        "ETRACE_CONCURRENCY",
        "ETRACE_RETRY_S",
        "GUARD",
        "GUARD_ALPHA",
        "GUARD_MIN_RUNS",
        "ETRACE_EMBEDDER",
    ]
)
# RB_* variables read outside the settings classes: the CLI's, the allocator's, heap tracing,
# the models' directory, the examples'; and whole families (the local broker's script, tests,
# benchmarks). tests/unit/test_settings.py checks that every RB_ name in the code is known.
OTHER_ENV_NAMES = frozenset(
    {
        SECRETS_DIR_ENV,
        "RB_DEBUG",
        "RB_MODELS_DIR",
        "RB_MALLOC_TUNING",
        "RB_MEMTRACE_FILE",
        "RB_MEMTRACE_INTERVAL_S",
        "RB_EXAMPLE_WORKER_PREFIX",
    }
)
# the tools' families, and the worker's per-tenant web tokens (RB_TENANT_TOKEN_<TENANT>[_FILE])
OTHER_ENV_PREFIXES = ("RB_KAFKA_", "RB_TEST_", "RB_BENCH_", "RB_TENANT_TOKEN_")
_WARNED: set[str] = set()  # unknown names already warned about in this process


def unknown_env_names(env: Mapping[str, str], known: frozenset[str]) -> list[tuple[str, str | None]]:
    """The RB_* names in `env` that nothing reads, each with the closest known name (or None)."""
    out: list[tuple[str, str | None]] = []
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or name in known or name.startswith(OTHER_ENV_PREFIXES):
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
        out.append((name, close[0] if close else None))
    return out


def warn_unknown_env(env: Mapping[str, str], known: frozenset[str]) -> None:
    """One warning per process for each RB_* name nothing reads: a misspelt variable is
    otherwise ignored in silence (a misspelt broker variable, and the agent talks to the
    default broker)."""
    for name, close in unknown_env_names(env, known):
        if name in _WARNED:
            continue
        _WARNED.add(name)
        hint = f" (did you mean {close}?)" if close else ""
        log.warning("%s is not a variable rb-streams reads%s: ignored", name[:80], hint)


# The environment a `from_env` call reads: os.environ unless a mapping is given (tests, the
# CLI's own lookups). A context variable, so concurrent constructions do not mix.
_ENV: ContextVar[Mapping[str, str] | None] = ContextVar("rb_settings_env", default=None)


@contextmanager
def _reading(env: Mapping[str, str] | None) -> Iterator[None]:
    token = _ENV.set(env)
    try:
        yield
    finally:
        _ENV.reset(token)


def _env() -> Mapping[str, str]:
    env = _ENV.get()
    return os.environ if env is None else env


class _EnvSource(EnvSettingsSource):
    """RB_* variables from the mapping being read (os.environ by default); empty means unset."""

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {k.lower(): v for k, v in _env().items() if v != ""}


class _SecretFilesSource(PydanticBaseSettingsSource):
    """Secrets from files, so they need not sit in the environment or on a command line:
    `RB_<NAME>_FILE=/path` or a file `RB_<NAME>` in the directory `RB_SECRETS_DIR` (the layout
    of a mounted Kubernetes Secret). A trailing newline is dropped.

    Fails closed: a secret file that is named but missing, not a regular file, empty or not
    UTF-8 text, and an `RB_SECRETS_DIR` that is missing or not a directory, are configuration
    errors naming the variable. Ignoring them would start the worker without the secret (an
    empty web token leaves /runs and /metrics open)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        env = _env()
        secrets: tuple[str, ...] = getattr(self.settings_cls, "SECRETS", ())
        out: dict[str, Any] = {}
        folder = _secrets_dir(env)
        for name in secrets:
            var = ENV_PREFIX + name.upper()
            path = env.get(var + "_FILE", "")
            if path:
                out[name] = read_secret_file(Path(path), var + "_FILE")
            elif folder is not None:
                candidate = folder / var
                if candidate.exists() or candidate.is_symlink():
                    out[name] = read_secret_file(candidate, f"{var} (in {SECRETS_DIR_ENV})")
        return out


MAX_SECRET_BYTES = 64 * 1024  # far above any token or key; a larger file is the wrong file


def _secrets_dir(env: Mapping[str, str]) -> Path | None:
    """`RB_SECRETS_DIR` when set; a missing directory (an unmounted Secret) is an error."""
    folder = env.get(SECRETS_DIR_ENV, "")
    if not folder:
        return None
    p = Path(folder)
    if not p.exists():
        raise SettingsError(f"{SECRETS_DIR_ENV}: {folder!r} does not exist")
    if not p.is_dir():
        raise SettingsError(f"{SECRETS_DIR_ENV}: {folder!r} is not a directory")
    return p


def read_secret_file(path: Path, var: str) -> str:
    """A secret's text from `path` (one trailing newline dropped), or a `SettingsError` naming
    `var` when the file is missing, not a regular file, too large, not UTF-8 or empty."""
    shown = repr(str(path))
    if not path.exists():
        raise SettingsError(f"{var}: {shown} does not exist")
    if not path.is_file():
        raise SettingsError(f"{var}: {shown} is not a regular file")
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_SECRET_BYTES + 1)
    except OSError as exc:
        raise SettingsError(f"{var}: cannot read {shown}: {exc.strerror or exc}") from None
    if len(raw) > MAX_SECRET_BYTES:
        raise SettingsError(f"{var}: {shown} is larger than {MAX_SECRET_BYTES} bytes: not a secret")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SettingsError(f"{var}: {shown} is not UTF-8 text") from None
    value = text.removesuffix("\n").removesuffix("\r")
    if not value.strip():
        raise SettingsError(f"{var}: {shown} is empty")
    return value


class _Base(BaseSettings):
    """The shared machinery: sources, error messages naming the variable, masking."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, frozen=True, extra="ignore", validate_default=True
    )
    SECRETS: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, _EnvSource(settings_cls), _SecretFilesSource(settings_cls)

    # -- construction --------------------------------------------------------
    @classmethod
    def env_name(cls, field_name: str) -> str:
        return ENV_PREFIX + field_name.upper()

    @classmethod
    def field_names(cls) -> list[str]:
        return list(cls.model_fields)

    @classmethod
    def known_env_names(cls) -> frozenset[str]:
        """Every RB_* name something in rb-streams reads, this class's fields first."""
        own = {cls.env_name(n) for n in cls.model_fields}
        own |= {cls.env_name(n) + "_FILE" for n in cls.SECRETS}
        return frozenset(own) | WORKER_ENV_NAMES | OTHER_ENV_NAMES

    @classmethod
    def default(cls, field_name: str) -> Any:
        d = cls.model_fields[field_name].default
        return d.get_secret_value() if isinstance(d, SecretStr) else d

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Self:
        """Settings from `env` (default os.environ) with `overrides` (None: not given) on top."""
        given = {k: v for k, v in overrides.items() if v is not None}
        unknown = set(given) - set(cls.model_fields)
        if unknown:
            raise TypeError(f"unknown settings: {', '.join(sorted(unknown))}")
        if env is None:  # the process's own environment: a misspelt name is said, once
            warn_unknown_env(os.environ, cls.known_env_names())
        with _reading(env):
            try:
                return cls(**given)
            except ValidationError as exc:
                raise SettingsError(cls._explain(exc), cls._field_of(exc)) from None

    @classmethod
    def parse_value(cls, field_name: str, raw: str) -> Any:
        """A setting's value from its text form (a CLI flag): its type and constraints are
        checked here, the checks across fields when the whole object is built."""
        field = cls.model_fields[field_name]
        typ: Any = field.annotation
        if field.metadata:
            typ = Annotated.__class_getitem__((typ, *field.metadata))  # type: ignore[attr-defined]
        adapter: TypeAdapter[Any] = TypeAdapter(typ)
        try:
            value = adapter.validate_strings(raw)
        except ValidationError as exc:
            msg = str(exc.errors()[0].get("msg", "invalid"))
            raise SettingsError(
                f"{cls.env_name(field_name)}: {raw!r} is not valid: {msg}", field_name
            ) from None
        return value.get_secret_value() if isinstance(value, SecretStr) else value

    @classmethod
    def _field_of(cls, exc: ValidationError) -> str | None:
        loc = exc.errors()[0].get("loc") or ()
        return str(loc[0]) if loc and str(loc[0]) in cls.model_fields else None

    @classmethod
    def _explain(cls, exc: ValidationError) -> str:
        """One line per the first error: the variable, the value, what is wrong."""
        err = exc.errors()[0]
        loc = err.get("loc") or ()
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if not loc:  # a cross-field check: its message names the variable already
            return msg
        name = str(loc[0])
        value = err.get("input")
        shown = MASK if name in cls.SECRETS else repr(value)
        return f"{cls.env_name(name)}: {shown} is not valid: {msg}"

    def with_(self, **changes: Any) -> Self:
        """A copy with `changes`, validated again (the environment is not read again)."""
        return type(self).from_env({}, **{**self.as_dict(), **changes})

    def as_dict(self, mask_secrets: bool = False) -> dict[str, Any]:
        """Plain values (secrets in clear unless `mask_secrets`: a worker child process gets
        its settings this way)."""
        out: dict[str, Any] = {}
        for name in type(self).model_fields:
            v = getattr(self, name)
            if isinstance(v, SecretStr):
                v = v.get_secret_value()
                if mask_secrets and v:
                    v = MASK
            out[name] = v
        return out

    @staticmethod
    def secret(value: SecretStr) -> str:
        return value.get_secret_value()


class KafkaSettings(_Base):
    """How to reach the broker; the agent-side client, topic creation and the worker share it."""

    SECRETS: ClassVar[tuple[str, ...]] = ("sasl_password", "ssl_key_password")

    broker: str = "kafka://127.0.0.1:9092"
    topic_prefix: str = "rb"
    # Kafka security. The protocol defaults to what the other settings imply: SASL_* with a
    # mechanism, SSL with a CA file.
    security_protocol: SecurityProtocol = ""
    sasl_mechanism: SaslMechanism = ""
    sasl_username: str = ""
    sasl_password: SecretStr = SecretStr("")
    ssl_cafile: str = ""  # CA bundle (PEM) that signed the brokers' certificates
    ssl_certfile: str = ""  # client certificate (PEM), for mutual TLS
    ssl_keyfile: str = ""  # its private key (PEM)
    ssl_key_password: SecretStr = SecretStr("")
    ssl_check_hostname: bool = True

    @field_validator("broker")
    @classmethod
    def _broker_given(cls, v: str) -> str:
        addrs = _host_ports(v)
        if not addrs:
            raise ValueError("no broker address given")
        for part in (p.strip() for chunk in v.split(";") for p in chunk.split(",")):
            scheme, sep, _ = part.partition("://")
            if sep and scheme.lower() != "kafka":  # ftp://x:1 is a mistake, not a broker at x:1
                raise ValueError(f"{part[:80]!r}: the only scheme is kafka:// (or none: host:port)")
        for hp in addrs:
            host, sep, port = hp.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(
                    f"{hp[:80]!r}: expected host:port (e.g. 127.0.0.1:9092 or kafka://broker-1:9092)"
                )
        return v

    @field_validator("topic_prefix")
    @classmethod
    def _topic_prefix_valid(cls, v: str) -> str:
        if not v or any(c not in TOPIC_CHARS for c in v):
            raise ValueError("not a valid Kafka topic prefix (letters, digits, '.', '_', '-')")
        return v

    @field_validator("ssl_cafile", "ssl_certfile", "ssl_keyfile")
    @classmethod
    def _file_exists(cls, v: str) -> str:
        if v and not Path(v).is_file():
            raise ValueError("not a file")
        return v

    @model_validator(mode="after")
    def _security_consistent(self) -> Self:
        proto = self.kafka_security
        if proto.startswith("SASL_"):
            if not self.sasl_mechanism:
                raise ValueError(f"RB_SASL_MECHANISM: required with security protocol {proto}")
            if not self.sasl_username:
                raise ValueError(f"RB_SASL_USERNAME: required with SASL mechanism {self.sasl_mechanism}")
            if not self.sasl_password.get_secret_value():
                raise ValueError(
                    f"RB_SASL_PASSWORD: required with SASL mechanism {self.sasl_mechanism} "
                    "(or RB_SASL_PASSWORD_FILE)"
                )
        elif self.sasl_mechanism:
            raise ValueError(f"RB_SASL_MECHANISM: set, but the security protocol is {proto}")
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            if getattr(self, name) and not proto.endswith("SSL"):
                raise ValueError(f"{self.env_name(name)}: set, but the security protocol is {proto}")
        if self.ssl_keyfile and not self.ssl_certfile:
            raise ValueError("RB_SSL_CERTFILE: required with RB_SSL_KEYFILE")
        return self

    # -- derived -------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        """aiokafka form: host:port[,host:port] without the kafka:// scheme."""
        return ",".join(_host_ports(self.broker))

    @property
    def faust_broker(self) -> str:
        return ";".join(f"kafka://{hp}" for hp in self.bootstrap_servers.split(","))

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
    def outcomes_topic(self) -> str:
        """One outcome record per run (compacted, keyed by run_id; every tenant's: the operator's)."""
        return f"{self.topic_prefix}.outcomes"

    def tenant_topic(self, tenant: str, kind: TopicKind) -> str:
        """A tenant's own topic in multi-tenant mode: `<prefix>.<tenant>.steps|steering|deadletter`
        (docs/production.md: the tenant's principal may use these and nothing else)."""
        return f"{self.topic_prefix}.{tenant}.{kind}"

    @property
    def kafka_security(self) -> str:
        if self.security_protocol:
            return self.security_protocol
        tls = bool(self.ssl_cafile or self.ssl_certfile)
        if self.sasl_mechanism:
            return "SASL_SSL" if tls else "SASL_PLAINTEXT"
        return "SSL" if tls else "PLAINTEXT"


class ClientSettings(KafkaSettings):
    """The agent side: the broker, plus how long an agent waits for a decision."""

    SECRETS: ClassVar[tuple[str, ...]] = (*KafkaSettings.SECRETS, "decision_key")

    client_deadline_ms: int = Field(250, ge=1)
    # the key workers sign decisions with (HMAC-SHA256, streams.kafka.signing): when set, the
    # client drops a decision whose signature is missing or wrong (anyone who can write the
    # steering topic could otherwise steer the agent). Required on workers with RB_TENANTS.
    decision_key: SecretStr = SecretStr("")
    # scorer, fsm_transition and task_profile names the workers have beyond the built-in ones
    # (plugins, RB_MONITOR_PROFILES), comma-separated: the client refuses other names before
    # sending a run_start (the worker would dead-letter it); `*`: any name (the worker checks)
    client_extra_names: str = ""
    # the pre-call gate (streams.agent.gate): a tool call whose arguments carry a value that only
    # a tool output introduced is refused before it runs, when the decision says so; false: off
    client_call_gate: bool = True
    # its mode: "lenient" denies a value from a tool result that held instructions; "strict"
    # also denies any value a tool result introduced in an acting call (send, pay, delete, ...)
    client_gate_mode: Literal["lenient", "strict"] = "lenient"
    # the gate's policy file (TOML or JSON, streams.shared.gate_policy): which tools act, which arguments
    # are destinations or payloads, which sources each may take values from, which tools are
    # trusted; empty: the defaults (tools named like send, pay, delete; arguments like to, iban, url)
    client_gate_policy: str = ""
    # with OpenTelemetry in use (streams.agent.tracing): also write each applied decision and
    # gate refusal as a `run_guardrail` span, the GenAI guardrail shape (proposed, not merged)
    client_trace_guardrail: bool = False
    # multi-tenant mode: the tenant whose topics this agent uses (`rb-streams tenants add`)
    tenant: str = ""

    @field_validator("tenant")
    @classmethod
    def _tenant_valid(cls, v: str) -> str:
        return check_tenant_name(v) if v else v

    @property
    def extra_names(self) -> tuple[str, ...]:
        return tuple(n.strip() for n in self.client_extra_names.split(",") if n.strip())

    @property
    def client_steps_topic(self) -> str:
        return self.tenant_topic(self.tenant, "steps") if self.tenant else self.steps_topic

    @property
    def client_steering_topic(self) -> str:
        return self.tenant_topic(self.tenant, "steering") if self.tenant else self.steering_topic


TopicKind = Literal["steps", "steering", "deadletter"]
TOPIC_KINDS: tuple[TopicKind, ...] = ("steps", "steering", "deadletter")
TENANT_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def check_tenant_name(name: str) -> str:
    """A tenant's name is part of its topic names and its principal: no dots (the topic
    `<prefix>.<tenant>.steps` must parse one way), at most 64 letters, digits, '_' or '-'."""
    if not TENANT_NAME.fullmatch(name):
        raise ValueError(f"{name[:80]!r} is not a tenant name (1-64 letters, digits, '_' or '-')")
    return name


def _host_ports(broker: str) -> list[str]:
    parts = []
    for part in broker.split(";"):
        for hp in part.split(","):
            hp = hp.strip()
            if "://" in hp:
                hp = hp.split("://", 1)[1]
            if hp:
                parts.append(hp)
    return parts
