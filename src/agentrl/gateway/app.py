"""The gateway's HTTP app (FastAPI): OpenAI's chat-completions routes over a `Gateway`.

Routes (a session is named by its base URL `/s/{session_id}/v1` or, on the plain `/v1`
routes, by the API key `Authorization: Bearer {session_id}`):

- `POST /s/{session_id}/v1/chat/completions`, `POST /v1/chat/completions`: a completion, or
  with `stream: true` server-sent `chat.completion.chunk` events ending in `data: [DONE]`;
- `GET /s/{session_id}/v1/models`, `GET /v1/models`: the one model served;
- `POST /sessions` (`agentrl serve`): open a session, answered with its id and base URL;
  `POST /sessions/{session_id}/end` with `{"reward": R, "won": B}`: end it, answered with its
  trajectory's summary (the gateway's `on_trajectory` hook gets the trajectory);
- `GET /stats`: calls, errors by code, clients gone mid-stream.

Every error is an OpenAI-style body `{"error": {message, type, param, code}}` with its status.
"""

# No `from __future__ import annotations`: FastAPI reads the route annotations at run time.
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from agentrl._optional import require
from agentrl.core.types import JsonObject, Trajectory
from agentrl.gateway.openai_shapes import ErrorCode, GatewayError
from agentrl.gateway.service import Gateway, completion_body, stream_chunks

__all__ = ["TrajectoryHook", "create_app"]

TrajectoryHook = Callable[[Trajectory], None]
"""Called with each trajectory a `POST /sessions/{id}/end` ends."""


def _session_from_header(gateway: Gateway, authorization: str | None) -> str:
    if not authorization or not authorization.lower().startswith("bearer "):
        raise gateway.refuse(
            GatewayError(
                404,
                "unknown_session",
                "no session named: call /s/{session_id}/v1/... or send the session id as the "
                "API key",
            )
        )
    return authorization.split(" ", 1)[1].strip()


def create_app(gateway: Gateway, *, on_trajectory: TrajectoryHook | None = None) -> Any:
    """The FastAPI app serving `gateway` (see the module docstring)."""
    require("fastapi", "gateway")
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse, StreamingResponse
    from starlette.exceptions import HTTPException
    from starlette.requests import Request

    app = FastAPI(title="agentrl gateway", docs_url=None, redoc_url=None)

    async def gateway_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, GatewayError)
        return JSONResponse(exc.body(), status_code=exc.status)

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        code: ErrorCode = "not_found" if exc.status_code == 404 else "invalid_value"
        error = gateway.refuse(GatewayError(exc.status_code, code, str(exc.detail)))
        return JSONResponse(error.body(), status_code=exc.status_code)

    app.add_exception_handler(GatewayError, gateway_error)
    app.add_exception_handler(HTTPException, http_error)

    async def chat(session_id: str, request: Request) -> JSONResponse | StreamingResponse:
        body = await request.body()
        chat_request, result = await gateway.chat(session_id, body)
        renderer = gateway.renderers.get(tuple(chat_request.tools or ()))
        if not chat_request.stream:
            return JSONResponse(completion_body(chat_request, result, renderer))
        chunks = list(stream_chunks(chat_request, result, renderer))

        async def events() -> AsyncIterator[bytes]:
            sent = False
            try:
                for chunk in chunks:
                    yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode()
                yield b"data: [DONE]\n\n"
                sent = True
            finally:
                if not sent:
                    gateway.stats.disconnects += 1

        return StreamingResponse(events(), media_type="text/event-stream")

    async def session_chat(session_id: str, request: Request) -> JSONResponse | StreamingResponse:
        return await chat(session_id, request)

    async def keyed_chat(request: Request) -> JSONResponse | StreamingResponse:
        session_id = _session_from_header(gateway, request.headers.get("authorization"))
        return await chat(session_id, request)

    async def session_models(session_id: str) -> JsonObject:
        gateway.session(session_id)
        return gateway.models()

    async def models() -> JsonObject:
        return gateway.models()

    async def open_session(request: Request) -> JsonObject:
        session = gateway.open_session()
        base = str(request.base_url).rstrip("/")
        return {"id": session.session_id, "base_url": f"{base}/s/{session.session_id}/v1"}

    async def end_session(session_id: str, request: Request) -> JsonObject:
        raw = await request.body()
        try:
            outcome = json.loads(raw or b"{}")
            reward = float(outcome.get("reward", 0.0))
            won = bool(outcome.get("won", False))
        except (ValueError, AttributeError, TypeError) as exc:
            raise gateway.refuse(
                GatewayError(400, "invalid_value", f"body: want {{reward, won}} ({exc})")
            ) from None
        trajectory = gateway.end_session(session_id, won=won, reward=reward)
        if on_trajectory is not None:
            on_trajectory(trajectory)
        return {
            "id": session_id,
            "turns": len(trajectory.turns),
            "stop_reason": trajectory.stop_reason.value,
            "reward": trajectory.reward,
        }

    async def stats() -> JsonObject:
        return {
            "calls": gateway.stats.calls,
            "errors": dict(gateway.stats.errors),
            "disconnects": gateway.stats.disconnects,
            "open_sessions": len(gateway.sessions),
        }

    app.add_api_route(
        "/s/{session_id}/v1/chat/completions", session_chat, methods=["POST"], response_model=None
    )
    app.add_api_route("/v1/chat/completions", keyed_chat, methods=["POST"], response_model=None)
    app.add_api_route(
        "/s/{session_id}/v1/models", session_models, methods=["GET"], response_model=None
    )
    app.add_api_route("/v1/models", models, methods=["GET"], response_model=None)
    app.add_api_route("/sessions", open_session, methods=["POST"], response_model=None)
    app.add_api_route(
        "/sessions/{session_id}/end", end_session, methods=["POST"], response_model=None
    )
    app.add_api_route("/stats", stats, methods=["GET"], response_model=None)
    return app
