"""Run the gateway's app with uvicorn: in the caller's event loop (`GatewayServer`, what the
trainer uses) or in a thread of its own (`GatewayThread`, for synchronous clients).

Only loopback is bound unless a host is given; port 0 picks a free port (read `base_url`).
The server never takes over SIGINT / SIGTERM: the trainer's handling of them stays in force.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from agentrl._optional import require
from agentrl.gateway.app import TrajectoryHook, create_app
from agentrl.gateway.service import Gateway

__all__ = ["LOOPBACK", "GatewayServer", "GatewayThread"]

LOOPBACK = "127.0.0.1"
STARTUP_TIMEOUT = 30.0
"""Seconds the server may take to start listening."""


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and
    # without it Nagle's algorithm and delayed ACKs add ~40 ms to every call
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def _server(app: Any, log_level: str) -> Any:
    uvicorn = require("uvicorn", "gateway")

    class _Quiet(uvicorn.Server):  # type: ignore[misc,name-defined]
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:  # the caller owns the signals
            yield

    config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="off")
    return _Quiet(config)


class GatewayServer:
    """`async with GatewayServer(gateway) as server:` serves `gateway` at `server.base_url`
    from the running event loop until the block ends."""

    def __init__(
        self,
        gateway: Gateway,
        *,
        host: str = LOOPBACK,
        port: int = 0,
        on_trajectory: TrajectoryHook | None = None,
        log_level: str = "warning",
    ) -> None:
        self.gateway = gateway
        self.host = host
        self._port = port
        self._app = create_app(gateway, on_trajectory=on_trajectory)
        self._log_level = log_level
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None
        self._socket: socket.socket | None = None

    @property
    def port(self) -> int:
        """The port listened on."""
        if self._socket is None:
            raise RuntimeError("the gateway server is not started")
        return int(self._socket.getsockname()[1])

    @property
    def base_url(self) -> str:
        """`http://host:port` (append `/v1`, or `/s/{session}/v1` for one session)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def session_url(self, session_id: str) -> str:
        """The OpenAI base URL of one session: `.../s/{session_id}/v1`."""
        return f"{self.base_url}/s/{session_id}/v1"

    async def start(self) -> None:
        """Bind and start serving; returns once the server listens."""
        self._socket = _bind(self.host, self._port)
        self._server = _server(self._app, self._log_level)
        self._task = asyncio.create_task(self._server.serve(sockets=[self._socket]))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STARTUP_TIMEOUT
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises the startup error
                raise RuntimeError("the gateway server stopped during startup")
            if loop.time() > deadline:
                raise TimeoutError(f"the gateway server did not start in {STARTUP_TIMEOUT} s")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        """Stop serving (open connections are closed) and release the port."""
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._socket is not None:
            self._socket.close()

    async def __aenter__(self) -> GatewayServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()


class GatewayThread:
    """`with GatewayThread(gateway) as server:` serves `gateway` from an event loop in a
    background thread (synchronous clients; the gateway's sampler must not be tied to another
    loop)."""

    def __init__(self, gateway: Gateway, **kwargs: Any) -> None:
        self._server = GatewayServer(gateway, **kwargs)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """`http://host:port`."""
        return self._server.base_url

    def session_url(self, session_id: str) -> str:
        """The OpenAI base URL of one session."""
        return self._server.session_url(session_id)

    def call(self, coroutine: Any) -> Any:
        """Run `coroutine` on the server's loop and wait for its result (e.g. to open a session
        or end one from the test's thread)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def __enter__(self) -> GatewayThread:
        self._thread.start()
        self.call(self._server.start())
        return self

    def __exit__(self, *exc: object) -> None:
        self.call(self._server.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
