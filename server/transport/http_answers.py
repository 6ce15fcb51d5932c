"""The transport's own HTTP answers, registered by route kind into the route table at start
(server/http_routes.py): the front page, health, version and metrics. What each says comes from
server/operations/; the bytes from protocol/wire/framing_http.py."""
from __future__ import annotations

from seed_agents.protocol.wire.framing_http import HttpFraming

from ..http_routes import HttpRequest, HttpRoutes
from ..operations.front_page import page_html, page_value
from ..operations.health import health
from ..operations.version import VERSION, build_commit


def register(routes: HttpRoutes, app) -> None:
    async def index(req: HttpRequest) -> bytes:
        """The front page (`GET /`): what this is, its version and health, how to connect the
        Seed desktop, where the docs are. JSON for a JSON client, else a small HTML page."""
        value = page_value(req.route.host, {"version": VERSION, "schemaVersion": app.db.schema_version,
                                            "uptime": round(app.uptime(), 3), "commit": build_commit()})
        if req.route.json:
            return req.framing.json(200, value, keep_alive=req.keep_alive)
        return HttpFraming.http_message(200, page_html(value).encode(), "text/html; charset=utf-8",
                                        keep_alive=req.keep_alive)

    async def health_answer(req: HttpRequest) -> bytes:
        return req.framing.json(200, health(app, VERSION), keep_alive=req.keep_alive)

    async def version(req: HttpRequest) -> bytes:
        value = {"version": VERSION, "schemaVersion": app.db.schema_version, "storage": app.db.backend}
        if app.heads is not None:
            value["serverKey"] = app.heads.public_id   # signs session heads
        if build_commit():
            value["commit"] = build_commit()
        return req.framing.json(200, value, keep_alive=req.keep_alive)

    async def metrics(req: HttpRequest) -> bytes:
        return HttpFraming.http_message(200, app.metrics.render(), app.metrics.content_type,
                                        keep_alive=req.keep_alive)

    routes.answer("index", index)
    routes.answer("health", health_answer)
    routes.answer("version", version)
    routes.answer("metrics", metrics)
