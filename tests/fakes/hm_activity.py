"""A fake Seed hypermedia server's activity feed: `GET /api/ListEvents`, as the reference's
monitor reads it through `@seed-hypermedia/client` (query `pageSize`, `pageToken`,
`currentAccount`, `order`; the answer superjson-wrapped: `{"json": {"events": [...],
"nextPageToken": "..."}}`, newest first, an empty token on the last page). Anything else is 404.

A real HTTP server on 127.0.0.1 (tests/fakes/loopback.py's `LoopbackFake`); tests add events with `publish`
(newest first, as the feed orders by observation) and can make it fail with `fail_with`.
Event shapes are the resolved `LoadedEvent`s of the reference's tests (`comment`, `citation`,
`doc-update`), built by the helpers below.
"""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from .loopback import LoopbackFake, RecordedRequest, send, send_json


class FakeHMActivity(LoopbackFake):
    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host=host, port=port)
        self.requests: list[RecordedRequest] = []
        self.events: list[dict] = []          # newest first
        self.failure: int | None = None       # answer every ListEvents with this status

    def publish(self, *events: dict) -> None:
        """New events at the top of the feed (the last one given is the newest)."""
        for event in events:
            self.events.insert(0, event)

    def fail_with(self, status: int | None) -> None:
        self.failure = status

    def list_requests(self) -> list[dict[str, str]]:
        """The query of each ListEvents request (a server's start-up probe asks something else)."""
        return [{k: v[0] for k, v in parse_qs(urlsplit(r.path).query).items()} for r in self.requests
                if urlsplit(r.path).path == "/api/ListEvents"]

    async def _respond(self, request: RecordedRequest, reader, writer) -> bool:  # noqa: ANN001
        self.requests.append(request)
        url = urlsplit(request.path)
        if request.method != "GET" or url.path != "/api/ListEvents":
            return await send(writer, 404, "text/plain", b"not found")
        if self.failure is not None:
            return await send_json(writer, self.failure, {"error": "the feed is down"})
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        size = int(query.get("pageSize", "50"))
        start = int(query.get("pageToken") or 0)
        page = self.events[start:start + size]
        more = start + size < len(self.events)
        return await send_json(writer, 200, {"json": {"events": page,
                                                      "nextPageToken": str(start + size) if more else ""}})


def comment_event(cid: str, author: str, target_account: str, at_ms: int, *, text: str = "hello",
                  mention: str | None = None, reply_parent: str | None = None, target_path: str = "") -> dict:
    """A resolved `comment` event (feedEventId `blob-<cid>`); `mention` embeds an @mention."""
    annotations = []
    if mention is not None:
        annotations.append({"type": "Embed", "starts": [0], "ends": [1], "link": f"hm://{mention}/:profile?v=x&l"})
    comment = {"id": f"{author}/z6H{cid[-8:]}", "version": cid, "targetAccount": target_account,
               "targetPath": target_path,
               "content": [{"block": {"type": "Paragraph", "id": "b1", "text": text, "annotations": annotations},
                            "children": []}]}
    if reply_parent is not None:
        comment["replyParent"] = reply_parent
    return {"id": cid, "type": "comment", "feedEventId": f"blob-{cid}", "eventAtMs": at_ms,
            "author": {"id": {"uid": author, "id": f"hm://{author}", "path": []}}, "comment": comment}


def citation_event(cid: str, author: str, mentioned: str, at_ms: int) -> dict:
    """The comment-sourced `citation` twin of a comment mentioning `mentioned`."""
    return {"id": cid, "type": "citation", "citationType": "c",
            "feedEventId": f"mention-{cid}--hm://{mentioned}/:profile", "eventAtMs": at_ms,
            "source": {"id": {"uid": author, "id": f"hm://{author}", "path": []}},
            "target": {"id": {"uid": mentioned, "id": f"hm://{mentioned}/:profile", "path": [":profile"]}}}


def doc_update_event(cid: str, account: str, path: str, at_ms: int) -> dict:
    return {"id": cid, "type": "doc-update", "feedEventId": f"blob-{cid}", "eventAtMs": at_ms,
            "author": {"id": {"uid": account, "id": f"hm://{account}", "path": []}},
            "docId": {"id": f"hm://{account}/{path}", "uid": account, "path": path.split("/")}}
