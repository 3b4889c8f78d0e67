"""Typed settings on pydantic-settings, read from RB_* environment variables, secret files and
CLI flags.

Three layers, each a superset of the one before:

* `KafkaSettings`: how to reach the broker (addresses, topic prefix, SASL/TLS). Shared by the
  agent-side client, topic creation, the security helpers and the worker.
* `ClientSettings`: what the agent side needs on top (its decision deadline). The client
  validates only these, never the worker's fields.
* `Settings`: the worker's (and `replay`'s) full configuration.

The first two live in `streams.kafka.client_settings` (no import of the core, for a client-only
install) and are re-exported here; `Settings` needs the core (its run defaults and limits).

Precedence: explicit values (CLI flags, keyword arguments) > RB_* variables > secret files
(`RB_<NAME>_FILE`, or a file named `RB_<NAME>` in `RB_SECRETS_DIR`) > defaults. An invalid value
fails at start-up with one line naming the variable and the value.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from .core.budget import WAIT_BUDGET_CALLS, WAIT_BUDGET_S, WAIT_BUDGET_USD, WaitBudget
from .core.events import Limits
from .core.holdout import Experiments
from .core.ladder import Defaults
from .core.prices import NO_PRICES, PriceTable
from .core.retention import DEFAULT_MAX_RUNS, DEFAULT_MAX_RUNS_PER_ORG

# The broker's and the agent side's settings live in streams.kafka.client_settings (no core
# import: a client-only install reads them); their names are imported from there, not from here.
from .kafka.client_settings import (
    ENV_PREFIX,
    MASK,
    SECRETS_DIR_ENV,
    TOPIC_CHARS,
    ClientSettings,
    SettingsError,
    _env,
    _secrets_dir,
    check_tenant_name,
    read_secret_file,
)

Guarantee = Literal["at_least_once", "exactly_once"]
# The worker's producer codec (Kafka's compression.type setting; aiokafka's codecs come with cramjam,
# a base dependency: every client must read compressed decisions). zstd: the smallest and the
# cheapest on the dev runs' states (bench/state_bytes.py, BENCHMARKS.md).
Compression = Literal["none", "gzip", "lz4", "zstd"]
StateCodecName = Literal["zstd", "json"]  # RB_STATE_CODEC (streams.worker.state_codec)
StateLayoutName = Literal["parts", "whole"]  # RB_STATE_LAYOUT (streams.worker.state_parts)
# Kafka's topic names have at most 249 characters; an app id leaves room for the topics named
# after it (`<app id>-runs-changelog`, `<app id>-owner-<prefix>`).
MAX_APP_ID_CHARS = 120


MAX_TOPIC_CHARS = 249


def owner_topic(app_id: str, topic_prefix: str) -> str:
    """The topic whose existence says that `topic_prefix`'s deployment owns `app_id`
    (streams.admin.ownership): it holds no records, its name is the claim."""
    return f"{app_id}-owner-{topic_prefix}"


def default_app_id(topic_prefix: str) -> str:
    """The app id of a deployment that sets none: its topic prefix's, `<prefix>-streams`. The
    default prefix `rb` keeps the app id of every release before (rb-streams), hence its
    consumer group and its run table's changelog."""
    return f"{topic_prefix}-streams"


LogLevel = Literal["debug", "info", "warn", "error", "crit"]


class Settings(ClientSettings):
    """The worker's and `replay`'s configuration."""

    SECRETS: ClassVar[tuple[str, ...]] = (
        "sasl_password",
        "ssl_key_password",
        "qdrant_api_key",
        "web_token",
        "control_key",
        "decision_key",
        "tenant_tokens",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        shared = super().settings_customise_sources(
            settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings
        )
        return (*shared, _TenantTokensSource(settings_cls, init_settings))

    partitions: int = Field(8, ge=1)
    replication_factor: int = Field(1, ge=1)
    # Faust's app id: the consumer group, and the prefix of the run table's changelog and of
    # the app's other topics. Empty: `<RB_TOPIC_PREFIX>-streams` (rb-streams for the default
    # prefix), so two deployments with different prefixes share no state; a worker refuses an
    # id that another prefix has claimed (streams.admin.ownership).
    app_id: str = ""
    store: str = Field("rocksdb://", pattern=r"^(rocksdb|memory)://")
    data_dir: str = ".local/worker"
    web_host: str = "127.0.0.1"
    web_port: int = Field(6066, ge=1, le=65535)
    web_advertised_url: str = ""  # how other workers reach this one (default http://<host>:<port>)
    # when set, /runs and /metrics need "Authorization: Bearer <token>"; in multi-tenant mode it
    # is the operator's token (every tenant's runs and metrics), and each tenant may have its own
    web_token: SecretStr = SecretStr("")
    # multi-tenant mode: tenant -> its web token, which reads that tenant's runs, steps and
    # metrics only; read per tenant from RB_TENANT_TOKEN_<TENANT> like any secret
    # (tenant_token_var; also RB_..._FILE and RB_SECRETS_DIR). Requires RB_WEB_TOKEN.
    tenant_tokens: dict[str, SecretStr] = Field(default_factory=dict)
    # without a token the worker refuses a web host other than loopback, unless this is true
    web_allow_anonymous: bool = False
    processing_guarantee: Guarantee = "at_least_once"
    # what the worker produces (changelog, decisions, dead letters, evictions) is compressed
    producer_compression: Compression = "zstd"
    # how the run table stores a state: zstd with the shipped dictionary, or its plain JSON
    # (either reads both: streams.worker.state_codec)
    state_codec: StateCodecName = "zstd"
    # a state as its record and the parts that barely change (its config, its loop window's
    # entries), each a table entry, or whole (either reads both: streams.worker.state_parts)
    state_layout: StateLayoutName = "parts"
    session_timeout_s: float = Field(10.0, gt=0)
    heartbeat_interval_s: float = Field(1.0, gt=0)
    finished_retention_s: float = Field(3600.0, ge=0)  # a finished run's state is kept this long (0: forever)
    idle_timeout_s: float = Field(
        86400.0, ge=0
    )  # an unfinished run with no event this long is dropped (0: never)
    evict_interval_s: float = Field(30.0, gt=0)  # how often the worker looks for runs to evict
    # runs one org may hold in the table (unfinished, and finished within retention); split
    # evenly over the partitions; past it run_start is dead-lettered too_many_runs (0: no cap)
    max_runs_per_org: int = Field(DEFAULT_MAX_RUNS_PER_ORG, ge=0)
    # runs of all orgs together the table may hold (one run per org of a flood of distinct
    # orgs passes the per-org cap); split the same way; past it run_start is dead-lettered
    # table_full (0: no cap)
    max_runs: int = Field(DEFAULT_MAX_RUNS, ge=0)
    # when set, rb.evict control records are signed and unsigned ones refused
    control_key: SecretStr = SecretStr("")
    # multi-tenant mode: the tenants served, comma-separated. Each has its own topics and
    # principal; a run's org is its tenant, taken from the topic, never from the event
    tenants: str = ""
    # /ready answers 503 while an event read from a partition has waited this long for its ack,
    # or while events have waited on a partition this long with none evaluated
    stall_threshold_s: float = Field(30.0, gt=0)
    # events waiting on a partition this long with none evaluated: the worker exits (code 3)
    # for its supervisor (compose, Kubernetes) to start it again (0: never)
    stall_exit_s: float = Field(180.0, ge=0)
    max_event_bytes: int = Field(256 * 1024, ge=1)
    max_thought_chars: int = Field(20_000, ge=1)
    log_level: LogLevel = "info"
    monitor_profiles: str = ""  # JSON/TOML file of custom monitor weight profiles
    # The price table (TOML or JSON, deploy/prices.example.toml) routing prices its switches
    # with, and `rb-streams cost` and the rb_cost_* metrics use. Empty: routing's prior.
    prices_file: str = ""
    # The escalation ladder's defaults (docs/escalation.md), JSON: a policy for runs whose
    # run_start names none, and {org_id: policy} (an org's own wins). Empty: the built-in
    # default ladder (`ladder.DEFAULT_ESCALATION`); '{"enabled": false}': none.
    escalation: str = ""
    org_escalation: str = ""
    # Default monitor settings, JSON {"monitors_off": [...], "monitor_thresholds": {...}} for
    # runs whose run_start sets none, and {org_id: that} (an org's own wins). Empty: none.
    monitor_defaults: str = ""
    org_monitor_defaults: str = ""
    # a run waiting on the same call (a CI job, a busy service) gets advice once it has waited
    # this long, and again each time as long (docs/monitors.md#waiting-is-not-looping)
    wait_budget_s: float = Field(WAIT_BUDGET_S, gt=0, le=7 * 86400)
    # ... and a wait whose result has not changed is warned as a loop (the ladder judges it)
    # past this many calls or estimated dollars (or wait_budget_s seconds), per org too:
    # RB_ORG_WAIT_BUDGET, JSON {org_id: {"seconds": s, "calls": n, "usd": x}} (fields it
    # leaves out are the deployment's)
    wait_budget_calls: int = Field(WAIT_BUDGET_CALLS, ge=2, le=100_000)
    wait_budget_usd: float = Field(WAIT_BUDGET_USD, gt=0, le=1_000_000)
    org_wait_budget: str = ""
    # A held-out arm (issue 50, core.holdout), JSON {"name", "holdout" (0 to 0.5), "seed"}:
    # one experiment for every org, and {org_id: experiment or null} (an org's own wins; null
    # opts the org out). A run_start's `experiment` wins over both. Empty: no experiment.
    experiment: str = ""
    org_experiment: str = ""
    qdrant_url: str = Field(
        "", pattern=r"^(https?://.*)?$"
    )  # a Qdrant server (also QDRANT_URL); empty: local mode
    qdrant_api_key: SecretStr = SecretStr("")
    patterns_path: str = ""  # local-mode store directory (default <data_dir>/patterns)
    patterns_seed: str = ""  # JSONL loaded (upserted) into the store when the worker starts
    etrace_timeout_ms: int = Field(150, ge=1)  # the longest a decision waits for its E-trace answers
    etrace_concurrency: int = Field(2, ge=1)  # E-trace embedding queries in flight per worker
    etrace_retry_s: float = Field(5.0, ge=0)  # rest given to a failing store before trying it again
    # where E-trace query embeddings run: a niced child process (default; never holds the
    # worker's GIL or its CPU share) or the retriever's threads inside the worker
    etrace_embedder: Literal["process", "thread"] = "process"
    # Do no harm (core.guard, docs/experiments.md): switch steering that makes an experiment's
    # treatment runs fail more often than its control runs to observe-only. Opt-in.
    guard: Literal["off", "on"] = "off"
    guard_alpha: float = Field(0.05, gt=0, lt=1)  # the sequential test's level
    guard_min_runs: int = Field(50, ge=1)  # runs in each arm of a comparison before it may switch

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Self:
        source = os.environ if env is None else env
        if "qdrant_url" not in overrides and not source.get("RB_QDRANT_URL") and source.get("QDRANT_URL"):
            overrides = {**overrides, "qdrant_url": source["QDRANT_URL"]}
        return super().from_env(env, **overrides)

    @model_validator(mode="before")
    @classmethod
    def _derive_app_id(cls, data: Any) -> Any:
        """An unset (or empty) app id is the topic prefix's own: `<prefix>-streams`."""
        if isinstance(data, dict) and not data.get("app_id"):
            prefix = data.get("topic_prefix") or cls.model_fields["topic_prefix"].default
            data = {**data, "app_id": default_app_id(str(prefix))}
        return data

    @field_validator("app_id")
    @classmethod
    def _app_id_valid(cls, v: str) -> str:
        if any(c not in TOPIC_CHARS for c in v):
            raise ValueError("not valid in a Kafka topic or group name (letters, digits, '.', '_', '-')")
        if len(v) > MAX_APP_ID_CHARS:
            raise ValueError(
                f"longer than {MAX_APP_ID_CHARS} characters (its topics' names must fit Kafka's)"
            )
        return v

    def with_(self, **changes: Any) -> Self:
        """As `KafkaSettings.with_`; an app id that was the old prefix's default follows a new
        prefix (a copy for another deployment must not keep the first one's group)."""
        if (
            "topic_prefix" in changes
            and "app_id" not in changes
            and self.app_id == default_app_id(self.topic_prefix)
        ):
            changes = {**changes, "app_id": ""}
        return super().with_(**changes)

    @field_validator("patterns_seed")
    @classmethod
    def _seed_exists(cls, v: str) -> str:
        if v and not Path(v).is_file():
            raise ValueError("not a file")
        return v

    @field_validator("prices_file")
    @classmethod
    def _prices_valid(cls, v: str) -> str:
        if v.strip():
            from .price_file import load_prices

            load_prices(v)  # a PriceFileError (a ValueError): one line naming the file and entry
        return v

    @property
    def prices(self) -> PriceTable:
        """The user's price table (RB_PRICES_FILE), or the empty table (routing's prior)."""
        if not self.prices_file.strip():
            return NO_PRICES
        from .price_file import load_prices

        return load_prices(self.prices_file)

    @field_validator(
        "escalation", "org_escalation", "monitor_defaults", "org_monitor_defaults", "org_wait_budget"
    )
    @classmethod
    def _run_defaults_valid(cls, v: str, info: ValidationInfo) -> str:
        if v.strip():
            try:
                raw = json.loads(v)
            except ValueError as exc:
                raise ValueError(f"not JSON ({exc})") from None
            slot = (
                "escalation",
                "org_escalation",
                "monitor_defaults",
                "org_monitor_defaults",
                "org_wait_budget",
            )
            args: list[Any] = [None] * 5
            args[slot.index(str(info.field_name))] = raw
            try:  # the core's own check: the worker and replay read it alike
                Defaults.parse(args[0], args[1], args[2], args[3], wait_by_org=args[4])
            except ValueError as exc:
                raise ValueError(str(exc)) from None
        return v

    @property
    def escalation_defaults(self) -> Defaults:
        """The org-wide run defaults, for the core (`Policy.escalation`): the ladder's policy
        and the monitor settings (names checked against the suite by `plugins.load_policy`)."""

        def raw(v: str) -> Any:
            return json.loads(v) if v.strip() else None

        return Defaults.parse(
            raw(self.escalation),
            raw(self.org_escalation),
            raw(self.monitor_defaults),
            raw(self.org_monitor_defaults),
            WaitBudget(self.wait_budget_s, self.wait_budget_calls, self.wait_budget_usd),
            raw(self.org_wait_budget),
        )

    @field_validator("experiment", "org_experiment")
    @classmethod
    def _experiment_valid(cls, v: str, info: ValidationInfo) -> str:
        if v.strip():
            try:
                raw = json.loads(v)
            except ValueError as exc:
                raise ValueError(f"not JSON ({exc})") from None
            try:  # the core's own check: the worker and replay read it alike
                if info.field_name == "experiment":
                    Experiments.parse(raw)
                else:
                    Experiments.parse(None, raw)
            except ValueError as exc:
                raise ValueError(str(exc)) from None
        return v

    @property
    def experiments(self) -> Experiments:
        """The deployment's experiments, for the core (`Policy.experiments`)."""

        def raw(v: str) -> Any:
            return json.loads(v) if v.strip() else None

        return Experiments.parse(raw(self.experiment), raw(self.org_experiment))

    @field_validator("tenants")
    @classmethod
    def _tenants_valid(cls, v: str) -> str:
        names = [t.strip() for t in v.split(",") if t.strip()]
        for name in names:
            check_tenant_name(name)
        if len(set(names)) != len(names):
            raise ValueError("a tenant is named twice")
        owner: dict[str, str] = {}  # token variable -> tenant: a's and b's must differ
        for name in names:
            var = tenant_token_var(name)
            for v_ in (var, var + "_FILE"):
                other = owner.setdefault(v_, name)
                if other != name:
                    raise ValueError(
                        f"tenants {other!r} and {name!r} would share the token variable {v_} "
                        "(rename one of them)"
                    )
        return ",".join(names)

    @field_validator("tenant_tokens", mode="before")
    @classmethod
    def _tenant_tokens_text(cls, v: Any) -> Any:
        """The text form (`as_dict`, RB_TENANT_TOKENS): JSON {tenant: token}, or empty."""
        if isinstance(v, str):
            if not v.strip():
                return {}
            try:
                return json.loads(v)
            except ValueError:
                raise ValueError("not JSON {tenant: token}") from None
        return v

    @model_validator(mode="after")
    def _worker_consistent(self) -> Self:
        self._tenant_tokens_consistent()
        if self.tenant_names and not self.control_key.get_secret_value():
            raise ValueError(
                "RB_CONTROL_KEY: required with RB_TENANTS (an unsigned eviction record would let "
                "one tenant's producer evict another's runs)"
            )
        if len(owner_topic(self.app_id, self.topic_prefix)) > MAX_TOPIC_CHARS:
            raise ValueError(
                f"RB_APP_ID: {self.app_id!r} with RB_TOPIC_PREFIX {self.topic_prefix!r} names a claim "
                f"topic longer than Kafka's {MAX_TOPIC_CHARS} characters: shorten one of them"
            )
        if self.heartbeat_interval_s >= self.session_timeout_s:
            raise ValueError(
                "RB_HEARTBEAT_INTERVAL_S: must be below the session timeout (RB_SESSION_TIMEOUT_S)"
            )
        if self.etrace_timeout_ms >= self.client_deadline_ms:
            raise ValueError(
                "RB_ETRACE_TIMEOUT_MS: must be below the client deadline (RB_CLIENT_DEADLINE_MS)"
            )
        return self

    def _tenant_tokens_consistent(self) -> None:
        """Each tenant's token is its own: not another tenant's, not the operator's, and only
        with an operator token (without one the views would answer anyone)."""
        if not self.tenant_tokens:
            return
        operator = self.web_token.get_secret_value()
        seen: dict[str, str] = {}
        for tenant, secret in self.tenant_tokens.items():
            var = tenant_token_var(tenant)
            if tenant not in self.tenant_names:
                raise ValueError(f"{var}: {tenant[:80]!r} is not a tenant of RB_TENANTS")
            token = secret.get_secret_value()
            if not token.strip():
                raise ValueError(f"{var}: empty")
            if token == operator:
                raise ValueError(f"{var}: the same as RB_WEB_TOKEN (the operator's): give each its own")
            if token in seen:
                raise ValueError(f"{var}: the same as {tenant_token_var(seen[token])}: give each its own")
            seen[token] = tenant
        if not operator:
            raise ValueError(
                "RB_WEB_TOKEN: required with tenant tokens (RB_TENANT_TOKEN_<TENANT>): it is the "
                "operator's token; without it /runs and /metrics would answer anyone"
            )

    def as_dict(self, mask_secrets: bool = False) -> dict[str, Any]:
        """`tenant_tokens` in its text form (JSON, tokens masked if asked), so that a copy of
        these settings passed as RB_* variables (a worker child process) reads them back."""
        out = super().as_dict(mask_secrets)
        tokens = {t: MASK if mask_secrets else v.get_secret_value() for t, v in self.tenant_tokens.items()}
        out["tenant_tokens"] = json.dumps(tokens) if tokens else ""
        return out

    def check_decision_key(self) -> bool:
        """Whether decisions are signed (RB_DECISION_KEY). Required in multi-tenant mode: a
        tenant's steering topic would otherwise trust whoever can write it. Checked when a
        worker starts (replay, simulate and config sign nothing)."""
        if self.decision_key.get_secret_value():
            return True
        if self.tenant_names:
            raise SettingsError(
                "RB_DECISION_KEY: required with RB_TENANTS (the key the worker signs decisions "
                "with and the tenants' agents check them with; e.g. openssl rand -hex 32)"
            )
        return False

    def check_web_exposure(self) -> None:
        """Refuse to serve the worker's web port anonymously beyond this machine: /runs shows
        run states and decisions, /metrics every org's counts. Checked when a worker starts,
        not here at validation: `replay`, `simulate` and `config` serve nothing."""
        if self.web_exposed and not self.web_allow_anonymous:
            raise SettingsError(
                f"RB_WEB_HOST: {self.web_host!r} is reachable from other machines and RB_WEB_TOKEN "
                "is not set: set RB_WEB_TOKEN (or RB_WEB_TOKEN_FILE), bind 127.0.0.1, or set "
                "RB_WEB_ALLOW_ANONYMOUS=true"
            )

    # -- derived -------------------------------------------------------------
    @property
    def tenant_names(self) -> tuple[str, ...]:
        """The tenants served (multi-tenant mode), or () in single-tenant mode."""
        return tuple(t for t in self.tenants.split(",") if t)

    @property
    def web_exposed(self) -> bool:
        """Whether /runs and /metrics answer without a token on a non-loopback address."""
        return not self.web_token.get_secret_value() and not _is_loopback(self.web_host)

    @property
    def advertised_url(self) -> str:
        if self.web_advertised_url:
            return self.web_advertised_url
        host = socket.gethostname() if self.web_host in ("0.0.0.0", "::", "") else self.web_host
        return f"http://{host}:{self.web_port}"

    @property
    def limits(self) -> Limits:
        return Limits(max_event_bytes=self.max_event_bytes, max_thought_chars=self.max_thought_chars)

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir).resolve()

    @property
    def patterns_dir(self) -> Path:
        return Path(self.patterns_path).resolve() if self.patterns_path else self.data_path / "patterns"


TENANT_TOKEN_PREFIX = "RB_TENANT_TOKEN_"


def tenant_token_var(tenant: str) -> str:
    """The variable holding a tenant's web token: RB_TENANT_TOKEN_<TENANT>, upper case, '-' as
    '_' (acme-eu: RB_TENANT_TOKEN_ACME_EU); its file forms are RB_TENANT_TOKEN_<TENANT>_FILE
    and a file of that name in RB_SECRETS_DIR (a Kubernetes Secret's key)."""
    return TENANT_TOKEN_PREFIX + tenant.upper().replace("-", "_")


class _TenantTokensSource(PydanticBaseSettingsSource):
    """Each served tenant's web token, read like every secret (the variable, then its `_FILE`,
    then RB_SECRETS_DIR): the tenants are those of RB_TENANTS (given or in the environment),
    so which variables exist depends on them, and no fixed field can name them."""

    def __init__(self, settings_cls: type[BaseSettings], init: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self._init = init

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        env = _env()
        given: Mapping[str, Any] = getattr(self._init, "init_kwargs", {}) or {}
        raw = given["tenants"] if "tenants" in given else env.get(ENV_PREFIX + "TENANTS", "")
        names = [t.strip() for t in str(raw).split(",") if t.strip()]
        if not names:
            return {}
        folder = _secrets_dir(env)
        tokens: dict[str, str] = {}
        for name in names:
            var = tenant_token_var(name)
            if env.get(var):
                tokens[name] = env[var]
            elif env.get(var + "_FILE"):
                tokens[name] = read_secret_file(Path(env[var + "_FILE"]), var + "_FILE")
            elif folder is not None and ((folder / var).exists() or (folder / var).is_symlink()):
                tokens[name] = read_secret_file(folder / var, f"{var} (in {SECRETS_DIR_ENV})")
        return {"tenant_tokens": tokens} if tokens else {}


def _is_loopback(host: str) -> bool:
    """Only `localhost` and loopback literals count; a name could resolve anywhere."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
