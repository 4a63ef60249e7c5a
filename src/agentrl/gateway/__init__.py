"""An OpenAI-compatible endpoint that records exact tokens, for agents written without agentrl.

An agent that calls `POST /v1/chat/completions` (the `openai` client, the OpenAI Agents SDK,
LangGraph, its own loop) is trained unchanged: each episode gets a session (its own base URL
`/s/{session_id}/v1`); the gateway samples through any agentrl `Sampler` with the model's own
chat template and turns the session's calls into an ordinary `Trajectory`, whose trained tokens
are the sampled tokens (`agentrl.gateway.session` has the rule). `AgentPlayer` runs K copies of
an agent function per task for the `Trainer`; `agentrl serve` serves a model by itself.
docs/gateway.md has the guide.
"""

from agentrl.gateway.agent import AgentEndpoint, AgentFn, AgentPlayer, AgentResult
from agentrl.gateway.openai_shapes import ChatRequest, GatewayError
from agentrl.gateway.server import LOOPBACK, GatewayServer, GatewayThread
from agentrl.gateway.service import Gateway, GatewayStats
from agentrl.gateway.session import GatewaySession

__all__ = [
    "LOOPBACK",
    "AgentEndpoint",
    "AgentFn",
    "AgentPlayer",
    "AgentResult",
    "ChatRequest",
    "Gateway",
    "GatewayError",
    "GatewayServer",
    "GatewaySession",
    "GatewayStats",
    "GatewayThread",
]
