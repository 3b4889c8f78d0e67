"""rb-streams: steer LLM agents from a Kafka stream of their steps.

The public API is re-exported here and imported on first use, so that `rb-streams` and the
worker do not pay for the agent side (and LangChain, an optional extra) at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "SteeringClient": "streams.agent.client",
    "SyncSteeringClient": "streams.agent.client",
    "Decision": "streams.agent.client",
    "SteeringSession": "streams.agent.session",
    "RunStopped": "streams.agent.session",
    "SteeringMiddleware": "streams.agent.adapters.langchain_middleware",
    "AgentsSteering": "streams.agent.adapters.openai_agents",
    "ClaudeAgentSteering": "streams.agent.adapters.claude_agent",
    "anthropic_request": "streams.agent.compose",
    "anthropic_system": "streams.agent.compose",
    "openai_system_message": "streams.agent.compose",
    "plain_system": "streams.agent.compose",
    "with_system": "streams.agent.compose",
    "injection_of": "streams.agent.compose",
    "model_of": "streams.agent.compose",
    "Settings": "streams.settings",
}

__all__ = [
    "AgentsSteering",
    "ClaudeAgentSteering",
    "Decision",
    "RunStopped",
    "Settings",
    "SteeringClient",
    "SteeringMiddleware",
    "SteeringSession",
    "SyncSteeringClient",
    "__version__",
    "anthropic_request",
    "anthropic_system",
    "injection_of",
    "model_of",
    "openai_system_message",
    "plain_system",
    "with_system",
]

if TYPE_CHECKING:
    from .agent.adapters.claude_agent import ClaudeAgentSteering
    from .agent.adapters.langchain_middleware import SteeringMiddleware
    from .agent.adapters.openai_agents import AgentsSteering
    from .agent.client import Decision, SteeringClient, SyncSteeringClient
    from .agent.compose import (
        anthropic_request,
        anthropic_system,
        injection_of,
        model_of,
        openai_system_message,
        plain_system,
        with_system,
    )
    from .agent.session import RunStopped, SteeringSession
    from .settings import Settings


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'streams' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
