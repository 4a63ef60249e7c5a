"""The `agent` env: tasks for an agent written without agentrl, played through the gateway
(`agentrl train --env agent --agent MODULE:FUNCTION`; docs/gateway.md)."""
