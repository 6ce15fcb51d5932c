"""How the server logs: one line per record on stderr, as text or as one JSON object per line.

Libraries' per-connection chatter (websockets' "connection open/closed", httpx's "HTTP Request")
is demoted to DEBUG, and websockets' frame dumps (`< BINARY ...`, `> TEXT ...`, which carry
message text) are dropped at every level: secrets, keys and message text never reach a log.
"""
from __future__ import annotations

import json
import logging
import sys
import time

_NOISY = ("websockets", "httpx", "httpcore")
# Fields of an access record (server/operations/accesslog.py) that the JSON format lifts to the top level.
ACCESS_FIELDS = ("transport", "action", "account", "status", "ms")


class _Quieter(logging.Filter):
    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(_NOISY):
            return True
        if record.name.startswith("websockets") and str(record.msg).startswith(("< ", "> ")):
            return False   # a frame dump
        if record.levelno < logging.WARNING:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return record.levelno >= self.level


def _iso(created: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int(created % 1 * 1000):03d}Z"


class TextFormatter(logging.Formatter):
    def formatTime(self, record, datefmt=None) -> str:  # noqa: N802 - logging's name
        return _iso(record.created)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {"time": _iso(record.created), "level": record.levelname, "logger": record.name,
                "message": record.getMessage()}
        for name in ACCESS_FIELDS:
            if hasattr(record, name):
                line[name] = getattr(record, name)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def setup(level: str, fmt: str) -> None:
    numeric = getattr(logging, level)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else
                         TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_Quieter(numeric))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
