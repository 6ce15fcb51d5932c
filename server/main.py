"""`seed-agents serve`: the schema gate, then the server until SIGTERM/SIGINT."""
from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from server.app import App
from server.config import Config, add_arguments, load_config
from server.store.gate import SchemaGateError
from server.transport import WS_PATH, start_transport

log = logging.getLogger("seed_agents")


class RunningServer:
    """A started server: the app, the listening socket, and a clean stop."""

    def __init__(self, app: App, ws_server) -> None:
        self.app = app
        self.ws_server = ws_server
        sock = next(iter(ws_server.sockets))
        self.host, self.port = sock.getsockname()[:2]
        self.url = f"ws://{self.host}:{self.port}{WS_PATH}"

    async def stop(self) -> None:
        app, server = self.app, self.ws_server
        server.close(close_connections=False)   # stop accepting
        # Let in-flight actions finish and commit, within the shutdown timeout.
        pending = [c.drain_inflight() for c in list(app.connections)]
        if pending:
            await asyncio.wait([asyncio.ensure_future(p) for p in pending], timeout=app.config.shutdown_timeout)
        for conn in list(app.connections):
            conn.outbound.closed = True
            asyncio.ensure_future(conn.ws.close(1001, "server shutting down"))
        try:
            await asyncio.wait_for(server.wait_closed(), app.config.shutdown_timeout)
        except asyncio.TimeoutError:
            pass
        await app.stop()


async def start_server(config: Config) -> RunningServer:
    app = App(config)
    await app.start()
    try:
        ws_server = await start_transport(app)
    except BaseException:
        await app.stop()
        raise
    return RunningServer(app, ws_server)


async def serve_until_signalled(config: Config) -> None:
    running = await start_server(config)
    log.info("seed-agents listening on %s (database %s)", running.url, config.db_path)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("seed-agents stopping")
    await running.stop()
    log.info("seed-agents stopped")


def run(config: Config) -> int:
    logging.basicConfig(level=getattr(logging, config.log_level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        asyncio.run(serve_until_signalled(config))
    except SchemaGateError as exc:
        print(f"seed-agents: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"seed-agents: cannot listen on {config.host}:{config.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="seed-agents serve", description="Run the Seed Agents server")
    add_arguments(parser)
    return run(load_config(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
