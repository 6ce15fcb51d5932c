"""`seed-agents serve`: the schema gate, then the server until SIGTERM/SIGINT."""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING

from . import allocator
from .config import Config, ConfigError, add_arguments, load_config, metrics_address
from .operations import logs
from .providers.network import is_loopback_host
from .database.errors import SchemaGateError, StorageError
from .database.filemodes import make_private_dir
from .database.port import ProcessLock
from .store.key_check import SecretsKeyMismatch
from .store.secrets import SecretsKeyError

if TYPE_CHECKING:
    from .app import App

log = logging.getLogger("seed_agents")


def url_host(host: str) -> str:
    """A host as it goes in a URL: an IPv6 address in brackets (`[::1]`)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


class RunningServer:
    """A started server: the app, the listening socket, and a clean stop."""

    def __init__(self, app: App, ws_server) -> None:
        from .transport.listener import WS_PATH  # loaded by start_server already

        self.app = app
        self.ws_server = ws_server
        sock = next(iter(ws_server.sockets))
        self.host, self.port = sock.getsockname()[:2]
        self.url = f"ws://{url_host(self.host)}:{self.port}{WS_PATH}"
        # What the Seed desktop's agent server setting takes (HTTP POST /api/message).
        local = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        self.http_url = f"http://{url_host(local)}:{self.port}"
        self.lock: ProcessLock | None = None
        self.new_database = False   # the SQLite file was made by this start
        self.metrics_server = None
        self.hm_probe: asyncio.Task | None = None

    async def stop(self) -> None:
        app, server = self.app, self.ws_server
        if self.hm_probe is not None:
            self.hm_probe.cancel()
        server.close(close_connections=False)   # stop accepting
        # Let in-flight actions finish and commit, within the shutdown timeout.
        pending = [c.drain_inflight() for c in list(app.connections)]
        if pending:
            await asyncio.wait([asyncio.ensure_future(p) for p in pending], timeout=app.config.shutdown_timeout)
        # Kept until the listener is closed: the loop holds tasks only weakly.
        closing = []
        for conn in list(app.connections):
            conn.outbound.closed = True
            closing.append(asyncio.ensure_future(conn.ws.close(1001, "server shutting down")))
        try:
            await asyncio.wait_for(server.wait_closed(), app.config.shutdown_timeout)
        except asyncio.TimeoutError:
            pass
        await app.stop()
        if self.metrics_server is not None:
            await asyncio.to_thread(stop_metrics_listener, self.metrics_server)
        if self.lock is not None:
            self.lock.release()


async def start_server(config: Config) -> RunningServer:
    """Bind the port, then make the folders, lock the database (a StorageError when another
    server has it), open it through the schema gate, and accept connections. Nothing is
    written before the port is bound: a server that cannot listen leaves no files behind. The
    lock is held until `stop()`, or until the process ends."""
    # The app and its transport are most of the server's imports: loaded here, so that `--help`
    # and a configuration mistake answer without them.
    from .app import App
    from .http_routes import HttpRoutes
    from .transport.listener import start_transport
    from .triggers import webhook

    app = App(config)   # writes nothing until start()
    # The HTTP routes that are not actions, registered once (server/http_routes.py): the
    # transport's own now, the webhooks once the triggers are built (below, before serving).
    routes = HttpRoutes()
    ws_server = await start_transport(app, routes, start_serving=False)
    lock = metrics_server = None
    started = False
    try:
        metrics_server = start_metrics_listener(config, app)
        check_dirs(config, app.db.local_path)
        # One process per SQLite file; PostgreSQL is shared by design (several servers as one).
        lock = app.db.process_lock()
        if lock is not None:
            lock.acquire()
        new = app.db.local_path is not None and not os.path.exists(app.db.local_path)
        await app.start()
        started = True
        routes.add(webhook.endpoint(app.triggers))
        new = new or bool(getattr(app.db, "created", False))   # PostgreSQL: an empty schema
        await ws_server.start_serving()
    except BaseException:
        ws_server.close()
        await ws_server.wait_closed()
        if metrics_server is not None:
            await asyncio.to_thread(stop_metrics_listener, metrics_server)
        if started:
            await app.stop()
        if lock is not None:
            lock.release()
        raise
    running = RunningServer(app, ws_server)
    if app.runtime.hm is not None:   # said once, without holding up the start (health says it too)
        running.hm_probe = asyncio.create_task(_probe_hm(app.runtime.hm))
    running.lock = lock
    running.new_database = new
    running.metrics_server = metrics_server
    return running


async def _probe_hm(hm) -> None:  # noqa: ANN001
    """The one line saying whether the Seed hypermedia server answers at start."""
    if await hm.probe():
        log.info("the Seed hypermedia server at %s answers", hm.display)
    else:
        log.warning("the Seed hypermedia server at %s %s: working offline until it answers (identities "
                    "and documents are kept here and their publication queued; hm:// and ipfs:// reads, other "
                    "writes and Seed search fail meanwhile)",
                    hm.display, hm.unreachable_reason)


def start_metrics_listener(config: Config, app: App):
    """`--metrics-listen HOST:PORT`: /metrics on a port of its own (prometheus_client's server,
    on a thread), or None when it is served on the main port or not at all."""
    if config.metrics_listen in ("same", "off"):
        return None
    from prometheus_client import start_http_server

    host, port = metrics_address(config.metrics_listen)
    try:
        return start_http_server(port, host, registry=app.metrics.registry)[0]
    except OSError as exc:
        raise OSError(exc.errno, f"{exc.strerror or exc} (--metrics-listen {config.metrics_listen})") from None


def stop_metrics_listener(httpd) -> None:
    httpd.shutdown()
    httpd.server_close()


def start_line(running: RunningServer) -> str:
    """What the server says once it listens: where, what the desktop takes, which database."""
    app = running.app
    where = app.db.path if app.db.local_path is None else os.path.abspath(app.db.local_path)
    new = ", new database" if running.new_database else ""
    return (f"seed-agents listening on {running.url} (Seed desktop: {running.http_url}; "
            f"database {where}{new})")


async def serve_until_signalled(config: Config) -> None:
    # Handlers first: a SIGTERM that comes as soon as the start line is out still stops cleanly.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    running = await start_server(config)
    log.info("%s", start_line(running))
    for warning in exposure_warnings(config):
        log.warning("%s", warning)
    await stop.wait()
    log.info("seed-agents stopping")
    await running.stop()
    log.info("seed-agents stopped")


def exposure_warnings(config: Config) -> list[str]:
    """What is reachable beyond this machine that the operator may not mean to publish."""
    if config.metrics_listen == "off":
        return []
    if config.metrics_listen == "same":
        host, where = config.host, f"the server's port ({url_host(config.host)}:{config.port})"
    else:
        host, where = metrics_address(config.metrics_listen)[0], config.metrics_listen
    if is_loopback_host(host):
        return []
    return [f"/metrics is served on {where}, reachable beyond this machine: set --metrics-listen off, "
            f"or --metrics-listen 127.0.0.1:9464 to serve it on loopback only"]


class StartError(Exception):
    """A reason not to start, worded for the person; exit status 2."""


def check_dirs(config: Config, database_file: str | None) -> None:
    """The data dir and the database's folder (a file on this machine: the storage's
    `local_path`) exist, made if need be, and are usable."""
    folders = [("data dir", config.data_dir)]
    if database_file is not None:
        folders.append(("database folder", os.path.dirname(os.path.abspath(database_file))))
    for what, folder in folders:
        if os.path.exists(folder) and not os.path.isdir(folder):
            raise StartError(f"the {what} {folder} is not a directory")
        try:
            make_private_dir(folder)   # 0700 whatever the umask (store/filemodes.py)
        except OSError as exc:
            raise StartError(f"cannot create the {what} {folder}: {exc.strerror or exc}") from None
        if not os.access(folder, os.R_OK | os.W_OK | os.X_OK):
            raise StartError(f"the {what} {folder} is not readable and writable by this user "
                             f"(uid {os.getuid()}); fix its permissions or choose another one")


def run(config: Config) -> int:
    logs.setup(config.log_level, config.log_format)
    allocator.fix_thresholds()   # (before the threads' arenas fill: server/allocator.py says why)
    try:
        asyncio.run(serve_until_signalled(config))
    except (StartError, SchemaGateError, StorageError, SecretsKeyMismatch) as exc:
        print(f"seed-agents: {exc}", file=sys.stderr)
        return 2
    except SecretsKeyError as exc:
        print(f"seed-agents: {exc}; set it to base64 of 32 random bytes "
              "(`head -c 32 /dev/urandom | base64`) or unset it to use the key file", file=sys.stderr)
        return 2
    except OSError as exc:
        where = exc.filename or f"{config.host}:{config.port}"
        if exc.filename is None:
            print(f"seed-agents: cannot listen on {where}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        print(f"seed-agents: cannot use {where}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="seed-agents serve", description="Run the Seed Agents server.",
        epilog="Flags win over the SEED_AGENTS_* variables, which win "
               "over the defaults. Exit status: 0 after a clean stop (SIGTERM, SIGINT), 1 when the "
               "address cannot be bound, 2 for a configuration mistake or a database this build "
               "cannot use.")
    add_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args)
    except ConfigError as exc:
        print(f"seed-agents serve: {exc}", file=sys.stderr)
        return 2
    return run(config)


if __name__ == "__main__":
    sys.exit(main())
