"""`triggers ls|show|add|rm|fire`: an agent's triggers from the command line.

`add` builds the source from one of --every, --weekly, --at, --cron, --webhook or --after-run;
`fire` calls a webhook trigger the way any outside sender would (`POST /agents/hooks/<id>` with
its secret, read with GetAgentTrigger), and fires any other trigger by hand (FireAgentTrigger);
either needs edit rights on the agent.
"""
from __future__ import annotations

import re
import uuid
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit

from ..render import as_json, table
from .common import CliError, checked_url, open_client, say
from .resolve import agent_id

AGENT_HELP = "the agent's name, id, or the start of its id"
_DAYS = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def describe(source: dict) -> str:
    kind = source.get("type")
    if kind == "schedule":
        s = source["schedule"]
        if s["kind"] == "interval":
            unit = s["unit"][:-1] if s["every"] == 1 and s["unit"].endswith("s") else s["unit"]
            return f"every {s['every']} {unit}"
        if s["kind"] == "weekly":
            days = ",".join(k for k, v in _DAYS.items() if v in s["daysOfWeek"])
            return f"weekly {days} {s['timeOfDay']} {s['timezone']}"
        if s["kind"] == "once":
            return f"once at {_when(s['runAt'])}"
        return f"cron '{s['expression']}' {s.get('timezone', 'UTC')}"
    if kind == "run-completed":
        return f"after a run{' of ' + source['agentId'] if 'agentId' in source else ''} " \
               f"{source.get('status', 'ends')}"
    return kind or "?"


HEADERS = ["ID", "STATE", "NAME", "SOURCE", "NEXT FIRING", "LAST FIRED", "LAST ERROR"]


def trigger_row(t: dict) -> list[str]:
    return [str(t["id"]), "on" if t.get("enabled") else "off", str(t["name"]), describe(t["source"]),
            _when(t.get("nextFireAt")), _when(t.get("lastFiredAt")), str(t.get("lastError") or "")]


def how_to_call(url: str, secret: str) -> str:
    """How an outside sender calls a webhook trigger: the secret goes in a header, never the URL."""
    return (f"webhook: POST {url}\n"
            f"  with the header `Authorization: Bearer {secret}` (or `X-Seed-Webhook-Secret: {secret}`), e.g.\n"
            f"  curl -X POST -H 'Authorization: Bearer {secret}' -H 'Content-Type: application/json' "
            f"-d '{{}}' {url}")


async def ls(args) -> int:
    async with open_client(args) as client:
        response = await client.list_agent_triggers(await agent_id(client, args.agent_id))
    triggers = response.get("triggers", [])
    if args.json:
        print(as_json(triggers))
    elif not triggers:
        say("no triggers yet: `seed-agents triggers add AGENT NAME --prompt P --every 1h` adds one")
    else:
        print(table(HEADERS, [trigger_row(t) for t in triggers]))
    return 0


async def show(args) -> int:
    async with open_client(args) as client:
        response = await client.get_agent_trigger(args.trigger_id)
    if args.json:
        print(as_json({k: v for k, v in response.items() if k != "_"}))
        return 0
    print(table(HEADERS, [trigger_row(response["trigger"])]))
    if "webhook" in response:
        print(how_to_call(_http_base(args) + response["webhook"]["path"], response["webhook"]["secret"]))
    firings = response.get("firings", [])
    if firings:
        print()
        print(table(["FIRED", "STATUS", "KEY", "SESSION OR ERROR"],
                    [[_when(f["createdAt"]), str(f["status"]), str(f["activityKey"]),
                      str(f.get("sessionId") or f.get("error") or "")] for f in firings]))
    return 0


def source_of(args) -> dict:
    chosen = [name for name in ("every", "weekly", "at", "cron", "webhook", "after_run")
              if getattr(args, name) not in (None, False)]
    if len(chosen) != 1:
        raise CliError("give exactly one of --every, --weekly, --at, --cron, --webhook, --after-run", code=2)
    if args.tz and chosen[0] not in ("weekly", "cron"):
        raise CliError(f"--tz goes with --weekly or --cron, not --{chosen[0].replace('_', '-')} "
                       "(an interval or an --at time does not depend on a time zone)", code=2)
    if args.status and chosen[0] != "after_run":
        raise CliError(f"--status goes with --after-run, not --{chosen[0].replace('_', '-')}", code=2)
    if args.every is not None:
        m = re.fullmatch(r"(\d+)\s*(m|min|minutes?|h|hours?)", args.every.strip())
        if not m:
            raise CliError(f"--every {args.every!r}: say e.g. 15m or 2h", code=2)
        unit = "hours" if m.group(2).startswith("h") else "minutes"
        return {"type": "schedule", "schedule": {"kind": "interval", "every": int(m.group(1)), "unit": unit}}
    if args.weekly is not None:
        m = re.fullmatch(r"([a-z,]+)\s+(\d\d:\d\d)", args.weekly.strip().lower())
        days = [_DAYS.get(d) for d in m.group(1).split(",")] if m else [None]
        if m is None or None in days:
            raise CliError(f"--weekly {args.weekly!r}: say e.g. 'mon,wed,fri 09:30'", code=2)
        return {"type": "schedule", "schedule": {"kind": "weekly", "daysOfWeek": days, "timeOfDay": m.group(2),
                                                 "timezone": args.tz or "UTC"}}
    if args.at is not None:
        try:
            when = datetime.fromisoformat(args.at)
        except ValueError:
            raise CliError(f"--at {args.at!r}: an ISO time, e.g. 2026-06-01T09:00+02:00", code=2) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        return {"type": "schedule", "schedule": {"kind": "once", "runAt": int(when.timestamp() * 1000)}}
    if args.cron is not None:
        schedule = {"kind": "cron", "expression": args.cron}
        if args.tz:
            schedule["timezone"] = args.tz
        return {"type": "schedule", "schedule": schedule}
    if args.webhook:
        return {"type": "webhook"}
    source: dict = {"type": "run-completed"}
    if args.after_run != "any":
        source["agentId"] = args.after_run   # an agent name or prefix: resolved in `add`
    if args.status:
        source["status"] = args.status
    return source


async def add(args) -> int:
    trigger = {"name": args.name, "source": source_of(args), "prompt": args.prompt}
    if args.disabled:
        trigger["enabled"] = False
    async with open_client(args) as client:
        agent = await agent_id(client, args.agent_id)
        if "agentId" in trigger["source"]:
            trigger["source"]["agentId"] = await agent_id(client, trigger["source"]["agentId"])
        created = (await client.create_agent_trigger(agent, trigger))["trigger"]
        print(created["id"])
        if created["source"]["type"] == "webhook":
            hook = (await client.get_agent_trigger(created["id"]))["webhook"]
            say(how_to_call(_http_base(args) + hook["path"], hook["secret"]))
        elif created.get("nextFireAt"):
            say(f"{describe(created['source'])}; next firing {_when(created['nextFireAt'])}")
    return 0


async def rm(args) -> int:
    async with open_client(args) as client:
        await client.delete_agent_trigger(args.trigger_id)
    print(f"deleted trigger {args.trigger_id}")
    return 0


def _http_base(args) -> str:
    parts = urlsplit(checked_url(args))
    scheme = "https" if parts.scheme == "wss" else "http"
    path = parts.path.rstrip("/")
    path = path[: -len("/agents/ws")] if path.endswith("/agents/ws") else path
    return f"{scheme}://{parts.netloc}{path}"


async def fire(args) -> int:
    if args.data is None:
        body = b"{}"
    elif args.data.startswith("@"):
        try:
            body = Path(args.data[1:]).read_bytes()
        except OSError as exc:
            raise CliError(f"cannot read {args.data[1:]}: {exc.strerror or exc}", code=2) from None
    else:
        body = args.data.encode()
    async with open_client(args) as client:
        response = await client.get_agent_trigger(args.trigger_id)
        if response["trigger"]["source"]["type"] != "webhook":
            if args.data is not None or args.idem_key is not None:
                raise CliError("--data and --idempotency-key are for webhook triggers; this one fires with "
                               "no data", code=2)
            fired = await client.fire_agent_trigger(args.trigger_id, str(uuid.uuid4()))   # by hand
            print(f"{fired['firingId']} {fired['firingStatus']}"
                  + (f" session {fired['sessionId']}" if "sessionId" in fired else "")
                  + (f" error {fired['error']}" if fired.get("error") else ""))
            return 0
    if "webhook" not in response:
        raise CliError(f"you may not fire trigger {args.trigger_id}: its webhook secret is shown to editors only")
    headers = {"Authorization": f"Bearer {response['webhook']['secret']}", "Content-Type": args.content_type}
    if args.idem_key:
        headers["Idempotency-Key"] = args.idem_key
    url = _http_base(args) + response["webhook"]["path"]
    import httpx  # only this command speaks plain HTTP itself: not loaded by the others

    try:
        async with httpx.AsyncClient(timeout=30.0) as http:
            answer = await http.post(url, content=body, headers=headers)
    except httpx.HTTPError as exc:
        raise CliError(f"cannot reach {url}: {type(exc).__name__}") from None
    if answer.status_code != 202:
        try:
            message = answer.json().get("message", answer.text)
        except ValueError:
            message = answer.text
        raise CliError(f"the webhook answered {answer.status_code}: {message}")
    value = answer.json()
    print(f"{value['firingId']} {value['firingStatus']}" + (f" session {value['sessionId']}" if "sessionId" in value else ""))
    return 0


def register(sub, common) -> None:
    triggers = sub.add_parser("triggers", help="schedules, webhooks and run-completed triggers of an agent",
                              description="List, add, remove and fire an agent's triggers.")
    tsub = triggers.add_subparsers(dest="triggers_command", metavar="{ls,show,add,rm,fire}", required=True)
    p = tsub.add_parser("ls", parents=[common], help="list an agent's triggers",
                        description="List an agent's triggers: id, state, name, source, next and last firing.")
    p.add_argument("agent_id", metavar="AGENT", help=AGENT_HELP)
    p.add_argument("--json", action="store_true", help="print the triggers as JSON, as the server gave them")
    p.set_defaults(run=ls)
    p = tsub.add_parser("show", parents=[common], help="a trigger, how to call its webhook (editors) and its firings")
    p.add_argument("trigger_id", metavar="TRIGGER_ID")
    p.add_argument("--json", action="store_true", help="print the answer as JSON, as the server gave it")
    p.set_defaults(run=show)
    p = tsub.add_parser("add", parents=[common], help="add a trigger and print its id",
                        description="Add a trigger to an agent; exactly one source option.")
    p.add_argument("agent_id", metavar="AGENT", help=AGENT_HELP)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--prompt", required=True, help="what each session the trigger starts begins with")
    p.add_argument("--every", metavar="N{m,h}", help="an interval, e.g. 15m or 2h")
    p.add_argument("--weekly", metavar="'DAYS HH:MM'", help="e.g. 'mon,wed,fri 09:30' (with --tz)")
    p.add_argument("--at", metavar="ISO", help="once, at this time (e.g. 2026-06-01T09:00+02:00)")
    p.add_argument("--cron", metavar="EXPR", help="a five-field cron expression (with --tz)")
    p.add_argument("--tz", metavar="ZONE", help="IANA time zone of --weekly / --cron (default UTC)")
    p.add_argument("--webhook", action="store_true", help="fired by POST /agents/hooks/<id> with its secret")
    p.add_argument("--after-run", metavar="AGENT|any", help="fired when a run (of that agent) ends")
    p.add_argument("--status", choices=("succeeded", "failed", "canceled"), help="with --after-run")
    p.add_argument("--disabled", action="store_true", help="create it switched off")
    p.set_defaults(run=add)
    p = tsub.add_parser("rm", parents=[common], help="delete a trigger")
    p.add_argument("trigger_id", metavar="TRIGGER_ID")
    p.set_defaults(run=rm)
    p = tsub.add_parser("fire", parents=[common], help="fire a trigger now (a webhook: as a sender would)",
                        description="Fire a trigger now, to try it: a webhook trigger is POSTed to with its "
                                    "secret, as an outside sender would; any other (a schedule, after-run) "
                                    "fires by hand (FireAgentTrigger), with its prompt and continuation.")
    p.add_argument("trigger_id", metavar="TRIGGER_ID")
    p.add_argument("--data", metavar="JSON|@FILE", help="the body (default {})")
    p.add_argument("--content-type", default="application/json")
    p.add_argument("--idempotency-key", dest="idem_key", metavar="KEY", help="the Idempotency-Key header")
    p.set_defaults(run=fire)
