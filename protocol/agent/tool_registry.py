"""The Seed agent tool surface, described once as data: every tool's name, label, description,
input (and output) schema and rendering hints, as the reference's
`agents/protocol/src/tool-registry.ts` declares them (commit 7819d47), so the same prompts and
models behave the same way here.

Everything else is derived from these records: the provider tool definitions (`provider_tools`),
the input checks (`input_errors`), the contract a mis-call answers with (`contract_markdown`),
and the `~/tools` listing (`summary_line`). The verbs are offered to the model as provider
tools; the callable tools are reached through the `call` verb only.

Where this server differs from the reference, the record says so: `search` searches the agent's
own memory (full text), and `navigate` reads a page (https:// or hm://) and returns it as
Markdown, since a server has no app window to open. Pure: no I/O.
"""
from __future__ import annotations

import copy
import dataclasses
import json
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Tool:
    name: str
    label: str
    description: str
    input_schema: dict
    render: dict
    runtimes: tuple[str, ...]
    output_schema: dict | None = None
    hidden: bool = False
    user_configurable: bool = False
    _validator: object = field(default=None, compare=False, repr=False)

    def validator(self):  # noqa: ANN201
        """The input schema's validator, made at first use (jsonschema costs a tenth of a
        second to import, which every server start and CLI command would pay)."""
        if self._validator is None:
            from jsonschema import Draft202012Validator

            object.__setattr__(self, "_validator", Draft202012Validator(self.input_schema))
        return self._validator

    def to_wire(self) -> dict:
        """The record as the reference's SeedToolMetadata (camelCase), for listings."""
        out = {"name": self.name, "label": self.label, "description": self.description,
               "inputSchema": self.input_schema, "render": self.render, "runtimes": list(self.runtimes)}
        if self.output_schema is not None:
            out["outputSchema"] = self.output_schema
        if self.hidden:
            out["hidden"] = True
        if self.user_configurable:
            out["userConfigurable"] = True
        return out


# ---------------------------------------------------------------------------------------------
# The verbs
# ---------------------------------------------------------------------------------------------

_READ = Tool(
    name='read',
    label='Read',
    description="\n".join([
        ('Read anything you can address. One verb for your whole world; the address shape '
         'picks the source:'),
        ('- `~/memory/<path>` — a file in your persistent memory. A directory path (or '
         '`~/memory/`) lists entries with sizes.'),
        ('- `~/tools/<name>` — a tool contract: full description plus input/output '
         'schemas. `~/tools/` lists every tool you can call.'),
        ('- `~/triggers/<name>` — one of your triggers (its source, prompt, status, and '
         'recent firings). `~/triggers/` lists them all.'),
        ('- `~/self` — everything about you: your definition (model, system prompt, '
         'grants, signing keys), your triggers, and a memory summary.'),
        ('- `hm://…` (or a Seed gateway/site URL) — a hypermedia document or comment, as '
         'markdown by default. Append `/:directory` to list the child documents under an '
         'account or document; `/:attributes` for metadata only; `/:profile` on an account '
         'for its profile.'),
        ('- `ipfs://<cid>` — fetch content by CID into memory and return it (binary files '
         'return metadata only).'),
        '- `https://…` — read a public web page as markdown.',
        ('- `activity:` — the recent activity feed; filter with options {authors, '
         'eventTypes, resource, pageSize, pageToken}.'),
        ('- `attachment:<id>` — a file attached to this conversation (images are shown to '
         'you when the model supports it).'),
        ('- `thread:<id>` — another conversation transcript of yours. `thread:` alone '
         "lists your account's conversations, newest first; options {query} searches "
         'titles and message text, {agentId} filters to one agent, {limit} caps results. '
         '`run:<id>` — a run journal.'),
        ('Directory listings return {entries: [{path, type, size}]}; memory file reads '
         'return {content}. Prefer reading exactly what you need; directory listings are '
         'cheap, whole trees are not.'),
    ]),
    input_schema={
        'type': 'object',
        'additionalProperties': False,
        'properties': {
            'address': {
                'type': 'string',
                'minLength': 1,
                'description': ('What to read: ~/memory/…, ~/tools/…, ~/triggers/…, ~/self, hm://…, '
                 'ipfs://…, https://…, activity:, attachment:<id>, thread: or thread:<id>, '
                 'run:<id>.'),
            },
            'format': {
                'type': 'string',
                'enum': ['markdown', 'json'],
                'description': 'Output format where supported. Defaults to markdown.',
            },
            'options': {
                'type': 'object',
                'description': ('Source-specific options: activity filters {authors, eventTypes, '
                 'resource, pageSize, pageToken}; thread listing {query, agentId, limit}; '
                 'ipfs {path} to choose the memory destination.'),
            },
        },
        'required': ['address'],
    },
    render={
        'kind': 'read',
        'label': 'Read',
        'pendingLabel': 'Reading',
        'color': 'sky',
        'primaryArg': 'address',
        'summaryArg': 'address',
        'resourceArg': 'address',
        'summaryOutputPath': 'summary',
        'details': [{'label': 'Content', 'source': 'output'}],
    },
    runtimes=('assistant', 'agent-service'),
    user_configurable=True,
)

_WRITE = Tool(
    name='write',
    label='Write',
    description="\n".join([
        'Write anything you can address. The address shape picks the destination:',
        ('- `~/memory/<path>` — write `content` to a memory file (parent folders are '
         'created automatically; writing an existing file replaces its whole content — '
         'there is no append). Options: {delete: true} removes a file or directory; '
         '{fromUrl} downloads a URL to the path instead of writing content; '
         '{fromAttachment: "<id>"} saves a conversation attachment to the path.'),
        ('- `~/triggers/<name>` — create or edit one of your triggers: a standing rule '
         'that starts a session (or wakes a parked run) when something happens — a '
         'schedule, a comment, a mention, site activity, or a finished run. `content` is '
         'JSON {source, prompt, enabled?, continuation?} (read ~/triggers/ for the source '
         'shapes); enabled defaults to true, and writing with enabled false turns a '
         'trigger off. {delete: true} removes a trigger.'),
        ('- `ipfs://` — publish to IPFS and get a CID URL back. Provide {fromPath: '
         '"~/memory/<path>"} or {fromAttachment: "<id>"} in options.'),
        ('- `hm://<account>/<path>` — publish a hypermedia document with markdown '
         '`content`. The default creates a NEW document; pass {action: "update"} to revise '
         'an existing document in place (same address, new version); an update with '
         '`content` replaces the whole body, while omitting `content` changes only '
         'name/metadata and leaves the body untouched. Options: {name} sets the document '
         'name, REQUIRED when creating (it is stored as metadata.name; a # heading is body '
         'content, not the name); {metadata} sets further document metadata attributes as '
         'an object (e.g. {summary, icon, cover, or custom keys}) — metadata belongs here, '
         'never in the body text; {signer} picks the signing identity by profileName or '
         'publicKey; {action} also covers "comment" (with {target, replyTo}), "move" (with '
         '{toPath}), "redirect" (with {toUrl}), "delete", "fork" (with {fromUrl}). '
         'Unrecognized option keys are refused, not ignored. Parent documents must exist '
         'before nested paths.'),
        ('Writing to hm:// publishes signed content other people can see — be sure the '
         'content is ready. Pass top-level dryRun: true to validate an hm:// write without '
         'publishing anything.'),
        ('Every hm:// link inside document or comment content is checked before '
         'publishing: malformed links always fail the write, and links whose targets do '
         'not exist on the server fail it too — fix them (read each link to verify), or '
         'pass {skipLinkCheck: true} in options only when a linked target is about to be '
         'created.'),
    ]),
    input_schema={
        'type': 'object',
        'additionalProperties': False,
        'properties': {
            'address': {
                'type': 'string',
                'minLength': 1,
                'description': ('Where to write: ~/memory/<path>, ~/tools/<name>, ~/triggers/<name>, '
                 'ipfs://, or hm://<account>/<path>.'),
            },
            'content': {
                'type': 'string',
                'description': ('The content to write. Markdown for hm:// documents; raw text for memory '
                 'files.'),
            },
            'options': {
                'type': 'object',
                'description': ('Destination-specific options; read ~/tools/write for the full contract '
                 'per address form.'),
            },
            'dryRun': {
                'type': 'boolean',
                'description': ('For hm:// writes: validate and echo what would be published without '
                 'publishing anything.'),
            },
        },
        'required': ['address'],
    },
    render={
        'kind': 'write',
        'label': 'Write',
        'pendingLabel': 'Writing',
        'color': 'emerald',
        'primaryArg': 'address',
        'summaryArg': 'address',
        'resourceArg': 'address',
        'summaryOutputPath': 'summary',
        'details': [
            {'label': 'Content', 'source': 'input', 'path': 'content', 'format': 'markdown'},
            {'label': 'Options', 'source': 'input', 'path': 'options'},
            {'label': 'Result', 'source': 'output'},
        ],
        'customViews': [
            {'command': 'draft.create', 'kind': 'write-command'},
            {'command': 'draft.update', 'kind': 'write-command'},
            {'command': 'draft.get', 'kind': 'write-command'},
            {'command': 'draft.list', 'kind': 'write-command'},
            {'command': 'draft.delete', 'kind': 'write-command'},
            {'command': 'draft.publish', 'kind': 'write-command'},
            {'command': 'document.create', 'kind': 'write-command'},
            {'command': 'document.update', 'kind': 'write-command'},
            {'command': 'document.delete', 'kind': 'write-command'},
            {'command': 'document.fork', 'kind': 'write-command'},
            {'command': 'document.move', 'kind': 'write-command'},
            {'command': 'document.redirect', 'kind': 'write-command'},
            {'command': 'document.ref', 'kind': 'write-command'},
            {'command': 'comment.create', 'kind': 'write-command'},
            {'command': 'comment.update', 'kind': 'write-command'},
            {'command': 'comment.delete', 'kind': 'write-command'},
            {'command': 'capability.create', 'kind': 'write-command'},
            {'command': 'capability.grant', 'kind': 'write-command'},
            {'command': 'contact.create', 'kind': 'write-command'},
            {'command': 'contact.delete', 'kind': 'write-command'},
            {'command': 'profile.update', 'kind': 'write-command'},
            {'command': 'profile.alias', 'kind': 'write-command'},
        ],
    },
    runtimes=('assistant', 'agent-service'),
    user_configurable=True,
)

_CALL = Tool(
    name='call',
    label='Call',
    description="\n".join([
        ('Invoke a tool by name with a JSON input. Your available tools are listed in your '
         'context with one-line summaries; read `~/tools/<name>` for a full contract.'),
        ('Calling a tool with missing or invalid input does not fail: the result is the '
         'tool contract itself — read it and call again correctly. Do not guess elaborate '
         'inputs for a tool you have not expanded.'),
    ]),
    input_schema={
        'type': 'object',
        'additionalProperties': False,
        'properties': {
            'tool': {
                'type': 'string',
                'minLength': 1,
                'description': 'The tool name, as listed under ~/tools/.',
            },
            'input': {'type': 'object', 'description': "The tool's input, matching its contract."},
        },
        'required': ['tool'],
    },
    render={
        'kind': 'generic',
        'label': 'Call',
        'pendingLabel': 'Calling',
        'color': 'amber',
        'primaryArg': 'tool',
        'summaryArg': 'tool',
        'summaryOutputPath': 'summary',
        'details': [
            {'label': 'Input', 'source': 'input', 'path': 'input'},
            {'label': 'Result', 'source': 'output'},
        ],
    },
    runtimes=('assistant', 'agent-service'),
    user_configurable=True,
)

_DELEGATE = Tool(
    name='delegate',
    label='Delegate',
    description="\n".join([
        'Spawn a child run to do work for you. Two kinds of child, one verb:',
        ('- A **model child** (default): pass `brief` — human-readable markdown that '
         "becomes the child conversation's first message VERBATIM. The user reviews it as "
         "the child's full context, so write a real briefing: goal, all needed background, "
         'expectations, data in fenced blocks. The child is a fresh context and never sees '
         'this conversation; it does share your persistent memory when it runs as you. '
         'Pass `prompt` for an anonymous worker persona or `agentId` to run one of your '
         'other agents; pass `tools` only to narrow its toolset. Declare `output` (a JSON '
         'schema, root type "object") to get a validated structured result; otherwise you '
         'get its final text.'),
        ('- A **script child**: pass `script` — a JavaScript module `export default async '
         'function (input, ctx) {…}` that orchestrates tools with real control flow '
         '(loops, parallel fan-out, durable sleeps). No imports, Date, Math.random, '
         'setTimeout, or fetch (standard built-ins plus UTF-8 TextEncoder/TextDecoder are '
         'available); everything external goes through ctx: `ctx.call(tool, input, '
         '{description})` — where tool is the read or write verb or any callable tool, and '
         'description is a short human-readable label for what this call is doing (shown '
         'live to the user; always provide one) — `ctx.delegate({...})` for nested model '
         'children (resolves DIRECTLY to the validated output object, or {text} when no '
         'output schema was declared; throws a coded error on failure), '
         '`ctx.parallel([...thunks])` (array of zero-arg functions, resolves to results in '
         'the same order), `ctx.sleep(ms)`, `ctx.waitForEvent(match, {timeoutMs, label})` '
         '— parks until something happens and resolves with the payload, or null on '
         'timeout; match `{signal: "approved"}` for a person or system answering this run, '
         'or `{eventType, resource, author}` for the activity feed — '
         '`ctx.continueAsNew(state)` — ends this run and starts a successor carrying only '
         '`state`, for loops that would otherwise run forever; nothing after it executes — '
         '`ctx.step(label, fn)`, `ctx.plan({steps})`, `ctx.now()`, `ctx.log(...)`, '
         '`ctx.progress(...)`, `ctx.input`, `ctx.runId`. Scripts run durably: they survive '
         'restarts and completed steps never re-execute; a parked wait costs nothing while '
         'it waits. Pass `input` for the JSON value handed to the module.'),
        ('Independent children must be spawned TOGETHER: emit every delegate call for a '
         'batch in ONE reply, before you have any of their results. Two delegate calls in '
         'one reply run at the same time; the same two calls spawned in consecutive '
         'replies run one after the other and take twice as long. Asked to research two '
         'topics, reply with two delegate calls at once — do NOT delegate one, wait for '
         'its result, then delegate the other. Sequence children only when a later child '
         "genuinely needs an earlier one's output. Your turn then pauses (cheaply — "
         'parked, restart-proof) until every child spawned this turn resolves, and each '
         'delegate call receives its own result, so parallel children never mix up. Beyond '
         'about two parallel items, prefer a script child with `ctx.parallel`: it fans out '
         'deterministically and keeps the whole fan-out in one reviewable place. Pass '
         '`await: false` only for fire-and-forget work whose outcome you do not need.'),
        ('Keep a plan. Before a parallel batch, mark ONE step running that names the whole '
         'batch (e.g. "Research both competitors"); every child spawned in that reply '
         'attaches to it. Never re-delegate work a completed child already did — check the '
         'children you already have before spawning. Do NOT delegate work you can simply '
         'do yourself, and never delegate just to make one tool call.'),
    ]),
    input_schema={
        'type': 'object',
        'additionalProperties': False,
        'properties': {
            'title': {
                'type': 'string',
                'description': 'Short label for the child, shown in the thread list and progress card.',
            },
            'brief': {
                'type': 'string',
                'description': ('Model child: the task brief as human-readable markdown; becomes the '
                 "child's first message verbatim. Provide exactly one of brief or script."),
            },
            'script': {
                'type': 'string',
                'description': ('Script child: a self-contained module `export default async function '
                 '(input, ctx) {…}`. Provide exactly one of brief or script.'),
            },
            'input': {
                'description': 'Script child only: JSON value passed to the module as its first argument.',
            },
            'prompt': {
                'type': 'string',
                'description': ('Model child: optional system prompt for an anonymous worker using your '
                 'model. Omit to run the child as yourself; provide at most one of prompt '
                 'or agentId.'),
            },
            'agentId': {
                'type': 'string',
                'description': 'Model child: run under another of your agents by id.',
            },
            'tools': {
                'type': 'array',
                'items': {'type': 'string'},
                'description': ('Model child: restrict the child to these tools (intersected with what '
                 'its agent has).'),
            },
            'output': {
                'type': 'object',
                'description': ('Model child: JSON schema for the required result (root type "object"). '
                 'The child delivers it via return_result; validation errors bounce back '
                 'for self-correction.'),
            },
            'await': {
                'type': 'boolean',
                'description': ('Default true: your turn parks until the child resolves and you receive '
                 'its result. false: detached — the child runs in the background and you '
                 'never receive its outcome.'),
            },
        },
        'required': [],
    },
    output_schema={
        'type': 'object',
        'properties': {
            'status': {'type': 'string', 'enum': ['succeeded', 'failed', 'canceled', 'detached']},
            'sessionId': {'type': 'string'},
            'runId': {'type': 'string'},
            'output': {
                'description': ('The validated result payload, {text} when no output schema was declared, '
                 "or the script's return value."),
            },
            'error': {
                'type': 'object',
                'properties': {'code': {'type': 'string'}, 'message': {'type': 'string'}},
            },
        },
    },
    render={
        'kind': 'write',
        'label': 'Delegate',
        'pendingLabel': 'Delegating',
        'color': 'violet',
        'primaryArg': 'title',
        'summaryArg': 'title',
        'details': [
            {'label': 'Brief', 'source': 'input', 'path': 'brief', 'format': 'markdown'},
            {'label': 'Script', 'source': 'input', 'path': 'script'},
            {'label': 'Input', 'source': 'input', 'path': 'input'},
            {'label': 'Result', 'source': 'output'},
        ],
    },
    runtimes=('agent-service',),
)

_PLAN = Tool(
    name='plan',
    label='Plan',
    description=('Maintain the visible plan for the current task. Call this when starting any task '
     'with 3 or more distinct steps (declare them all as pending, then mark the first '
     "running), and again whenever a step's status changes: running when you begin it, "
     'done when finished, failed if it cannot complete, skipped if no longer needed. Keep '
     'step labels short and outcome-oriented. Send the full current list each time; it '
     'replaces the previous plan. Each task gets its own checklist: a plan whose every '
     'step has finished is history — when the user asks for something new, publish a fresh '
     "plan with only the new task's steps (new ids), never re-list finished work. The user "
     'sees this as a live checklist and can act on it, so keeping it current is part of '
     'doing the task well. Plan BEFORE delegating: children spawned while a step is '
     'running attach under it — one step can own a whole parallel batch.'),
    input_schema={
        'type': 'object',
        'additionalProperties': False,
        'properties': {
            'title': {'type': 'string', 'description': 'Optional one-line name for the overall task.'},
            'steps': {
                'type': 'array',
                'items': {
                    'type': 'object',
                    'additionalProperties': False,
                    'properties': {
                        'id': {
                            'type': 'string',
                            'description': 'Stable id for the step (e.g. "s1"), kept across updates.',
                        },
                        'label': {
                            'type': 'string',
                            'minLength': 1,
                            'description': 'Short description of the step.',
                        },
                        'status': {
                            'type': 'string',
                            'enum': ['pending', 'running', 'done', 'failed', 'skipped'],
                        },
                    },
                    'required': ['id', 'label', 'status'],
                },
            },
        },
        'required': ['steps'],
    },
    render={'kind': 'hidden', 'label': 'Plan', 'color': 'hidden', 'summaryArg': 'title'},
    runtimes=('agent-service',),
)

_STATUS = Tool(
    name='status',
    label='Status',
    description=("Update this session's title and description — the one-line label and "
     'one-or-two-sentence summary shown in session lists and read by any parent session or '
     'teammate checking on your work. Call it once early, as soon as you know what the '
     'conversation is about (a specific title beats a generic one: "Migrate billing cron '
     'to Postgres", not "Help with code"), and again whenever the focus shifts or a '
     'milestone is reached so the description reflects what is going on right now and what '
     'is left. Keep the description to what an outside reader needs: current objective, '
     'progress, blockers. When the task is finished, call it one final time so the '
     'description states the outcome rather than the intent — an idle session whose status '
     'still says what you were about to do misleads whoever checks on it. Omit a field to '
     'leave it unchanged. A title the user typed themselves is never overwritten.'),
    input_schema={
        'type': 'object',
        'additionalProperties': False,
        'properties': {
            'title': {
                'type': 'string',
                'minLength': 1,
                'description': 'Short session title, at most eight words.',
            },
            'description': {
                'type': 'string',
                'description': ('One or two sentences: what the session is doing right now and how far '
                 'along it is.'),
            },
        },
    },
    render={'kind': 'hidden', 'label': 'Status', 'color': 'hidden', 'summaryArg': 'title'},
    runtimes=('agent-service',),
)

# Not among the reference's records (its storage design names the verb, session_continuations and
# the manifest; protocol/agent/continuations.py): this server's, in the same shape.
_CONTINUE_SESSION = Tool(
    name='continue_session',
    label='Continue Session',
    description=('Continue this conversation in a fresh session, when this one has grown long or its '
     'thread has run its course while the work goes on. Write a real handoff: the goal, what is '
     'done, what is left, decisions made, open questions, anything the next session must not '
     'redo. The successor starts from your handoff and the list of sources you cite, and nothing '
     'else: this conversation and its checklist stay readable to it as thread:<id>, but are not '
     'loaded. The successor is linked from this session and starts working at once, as you. '
     'Call it once, near the end of your turn (close or write off your plan first); then tell '
     'the user the conversation continues there. Calling it again answers the same successor.'),
    input_schema={
        'type': 'object',
        'additionalProperties': False,
        'properties': {
            'handoff': {
                'type': 'string',
                'minLength': 1,
                'maxLength': 20000,
                'description': 'Markdown: everything the successor needs to carry on.',
            },
            'title': {'type': 'string', 'maxLength': 120, 'description': "The successor's title."},
            'reason': {'type': 'string', 'maxLength': 500,
                       'description': 'Why the conversation continues elsewhere, in one line.'},
            'sources': {
                'type': 'array',
                'maxItems': 50,
                'items': {'type': 'string', 'minLength': 1, 'maxLength': 2000},
                'description': ('Addresses the successor may need (hm://…, https://…, ~/memory/…, '
                 'thread:…): listed for it, not loaded.'),
            },
        },
        'required': ['handoff'],
    },
    output_schema={
        'type': 'object',
        'properties': {
            'status': {'type': 'string', 'enum': ['continued']},
            'sessionId': {'type': 'string'},
            'runId': {'type': 'string'},
            'title': {'type': 'string'},
        },
    },
    render={
        'kind': 'write',
        'label': 'Continue Session',
        'pendingLabel': 'Continuing',
        'color': 'sky',
        'primaryArg': 'title',
        'summaryArg': 'reason',
        'details': [
            {'label': 'Handoff', 'source': 'input', 'path': 'handoff', 'format': 'markdown'},
            {'label': 'Sources', 'source': 'input', 'path': 'sources'},
            {'label': 'Successor', 'source': 'output'},
        ],
    },
    runtimes=('agent-service',),
)

_RETURN_RESULT = Tool(
    name='return_result',
    label='Return Result',
    description=('Deliver the final structured result of this delegated task. Call this exactly once '
     'when the task is complete; the payload must match the required schema. This ends '
     'your task.'),
    input_schema={'type': 'object'},
    render={
        'kind': 'generic',
        'label': 'Return Result',
        'color': 'emerald',
        'details': [{'label': 'Result', 'source': 'input'}],
    },
    runtimes=('agent-service',),
)

# ---------------------------------------------------------------------------------------------
# Callable tools: reached through `call`, never offered to the model directly
# ---------------------------------------------------------------------------------------------

def _search_render(label: str) -> dict:
    """How the desktop draws a search call (Seed search and web search alike): results as links."""
    return {
        'kind': 'search',
        'label': label,
        'color': 'sky',
        'primaryArg': 'query',
        'summaryOutputPath': 'summary',
        'links': [{'source': 'output', 'path': 'results[].url', 'labelPath': 'results[].title'}],
        'details': [
            {'label': 'Results', 'source': 'output', 'path': 'markdown', 'format': 'markdown'},
            {'label': 'Input', 'source': 'input'},
        ],
    }


_SEARCH = Tool(
    name='search',
    label='Search',
    description=('Search Seed hypermedia content: document titles, contacts, and optionally document '
                 'bodies and comments. Returns ranked results with hm:// URLs you can read.'),
    input_schema={
        'type': 'object',
        'additionalProperties': False,
        'properties': {
            'query': {
                'type': 'string',
                'minLength': 1,
                'description': 'The search query. Supports phrases and wildcards.',
            },
            'accountUid': {
                'type': 'string',
                'description': 'Optional account UID to scope search to a single account.',
            },
            'includeBody': {
                'type': 'boolean',
                'description': ('Set true to search document bodies and comments in addition to titles '
                 'and contacts.'),
            },
            'contextSize': {
                'type': 'integer',
                'minimum': 0,
                'maximum': 512,
                'description': 'Optional match context size in runes. Defaults to 48.',
            },
            'searchType': {
                'type': 'string',
                'enum': ['keyword', 'semantic', 'hybrid'],
                'description': 'Search ranking mode. Defaults to hybrid.',
            },
            'pageSize': {
                'type': 'integer',
                'minimum': 1,
                'description': 'Maximum number of results to return.',
            },
        },
        'required': ['query'],
    },
    render=_search_render('Search'),
    runtimes=('assistant', 'agent-service'),
    user_configurable=True,
)

_WEB_SEARCH = Tool(
    name='web_search',
    label='Web Search',
    description=('Search the public web. Returns ranked results with titles, URLs, and snippets; read '
     'a result with `read` on its URL. Use the news category for recent events.'),
    input_schema={
        'type': 'object',
        'additionalProperties': False,
        'properties': {
            'query': {'type': 'string', 'minLength': 1, 'description': 'The web search query.'},
            'count': {
                'type': 'integer',
                'minimum': 1,
                'description': 'Maximum number of results to return. Default 10, max 25.',
            },
            'category': {
                'type': 'string',
                'enum': ['general', 'news'],
                'description': ('Result category. Use news for recent events, general otherwise. Defaults '
                 'to general.'),
            },
            'timeRange': {
                'type': 'string',
                'enum': ['day', 'week', 'month', 'year'],
                'description': 'Optional recency filter for time-sensitive queries.',
            },
            'language': {
                'type': 'string',
                'description': 'Optional language code such as en. Defaults to en.',
            },
        },
        'required': ['query'],
    },
    output_schema={
        'type': 'object',
        'properties': {
            'summary': {'type': 'string', 'description': 'One-line summary of the search outcome.'},
            'results': {
                'type': 'array',
                'items': {
                    'type': 'object',
                    'properties': {
                        'title': {'type': 'string'},
                        'url': {'type': 'string'},
                        'snippet': {'type': 'string'},
                        'engine': {
                            'type': 'string',
                            'description': 'Upstream engine that produced the result.',
                        },
                    },
                },
            },
            'partial': {
                'type': 'boolean',
                'description': 'True when some engines were unavailable and coverage may be partial.',
            },
            'markdown': {'type': 'string', 'description': 'Human-readable rendering of the results.'},
        },
    },
    render=_search_render('Web Search'),
    runtimes=('assistant', 'agent-service'),
    user_configurable=True,
)

_NAVIGATE = Tool(
    name='navigate',
    label='Navigate',
    # This server has no app window: navigate reads the page, as `read` does for its address.
    description=('Open a URL (an https:// web page or an hm:// document) and return its readable '
                 'content as markdown.'),
    input_schema={
        'type': 'object',
        'additionalProperties': False,
        'properties': {
            'url': {'type': 'string', 'minLength': 1, 'description': 'The https:// or hm:// URL to open'},
            'newWindow': {
                'type': 'boolean',
                'description': 'True to open in a new window instead of the current window.',
            },
        },
        'required': ['url'],
    },
    render={
        'kind': 'navigate',
        'label': 'Navigate',
        'color': 'muted',
        'primaryArg': 'url',
        'resourceArg': 'url',
    },
    runtimes=('assistant', 'agent-service'),
    user_configurable=True,
)

_EXECUTE = Tool(
    name='execute',
    label='Execute Code',
    description=('Run TypeScript, Python, or shell code in an isolated sandbox (a hardware-isolated '
     'microVM) with your persistent memory mounted at /workspace, which is also the '
     'working directory. Files your code reads and writes under /workspace are the same '
     'files as your ~/memory addresses, so use this to process, transform, analyze, or '
     'generate memory files — parse data, resize or convert media, run computations, and '
     'save results. Each call runs in a fresh sandbox: no state (variables, installed '
     'packages, processes) survives between calls, so persist anything important as files '
     '(for example install Python packages with `pip install --target /workspace/pylibs '
     '<pkg>` and add that dir to sys.path in later calls). The sandbox has internet access '
     'for fetching data and installing packages, but cannot reach private or local network '
     'addresses. Output returns stdout, stderr, the exit code, and which memory files '
     'changed.'),
    input_schema={
        'type': 'object',
        'additionalProperties': False,
        'properties': {
            'runtime': {
                'type': 'string',
                'enum': ['ts', 'python', 'shell'],
                'description': ('How to run the code: "ts" runs TypeScript with bun, "python" runs it '
                 'with the python interpreter, "shell" runs it with sh. Read '
                 '~/tools/execute for the runtimes this server actually offers — the list '
                 'there is authoritative.'),
            },
            'code': {'type': 'string', 'minLength': 1, 'description': 'The code to execute.'},
            'timeout_secs': {
                'type': 'integer',
                'minimum': 1,
                'description': ('Optional timeout override in seconds. Defaults to the server limit '
                 '(typically 60).'),
            },
        },
        'required': ['runtime', 'code'],
    },
    output_schema={
        'type': 'object',
        'properties': {
            'summary': {'type': 'string'},
            'exitCode': {'type': 'integer'},
            'success': {'type': 'boolean'},
            'stdout': {'type': 'string'},
            'stderr': {'type': 'string'},
            'truncated': {
                'type': 'boolean',
                'description': 'True when stdout/stderr was cut to the size limit.',
            },
            'durationMs': {'type': 'integer'},
            'changedFiles': {
                'type': 'array',
                'description': 'Memory files added, modified, or removed by the execution.',
                'items': {
                    'type': 'object',
                    'properties': {
                        'path': {'type': 'string'},
                        'change': {'type': 'string', 'enum': ['added', 'modified', 'removed']},
                    },
                },
            },
        },
    },
    render={
        'kind': 'write',
        'label': 'Execute Code',
        'color': 'amber',
        'primaryArg': 'runtime',
        'summaryArg': 'runtime',
        'summaryOutputPath': 'summary',
        'details': [
            {'label': 'Code', 'source': 'input', 'path': 'code'},
            {'label': 'Output', 'source': 'output', 'path': 'stdout'},
            {'label': 'Errors', 'source': 'output', 'path': 'stderr'},
        ],
    },
    runtimes=('agent-service',),
    user_configurable=True,
)


VERBS = {t.name: t for t in (_READ, _WRITE, _CALL, _DELEGATE, _PLAN, _STATUS, _RETURN_RESULT,
                              _CONTINUE_SESSION)}
CALLABLES = {t.name: t for t in (_SEARCH, _WEB_SEARCH, _NAVIGATE, _EXECUTE)}
TOOLS = {**VERBS, **CALLABLES}

# Renamed callable tools still present in stored agent definitions.
_LEGACY_ALIASES = {"execute_code": "execute"}


def normalize_name(name: str) -> str:
    return _LEGACY_ALIASES.get(name, name)


def get_tool(name: str) -> Tool | None:
    return TOOLS.get(normalize_name(name))


def summary_line(tool: Tool) -> str:
    """One line for a tool: its name and the first sentence of its description (as the reference)."""
    first = tool.description
    for i, ch in enumerate(tool.description):
        if ch == "." and i + 1 < len(tool.description) and tool.description[i + 1].isspace():
            first = tool.description[:i + 1]
            break
    if len(first) > 140:
        first = first[:137] + "…"
    return f"{tool.name} — {first}"


def contract_markdown(tool: Tool) -> str:
    """The tool's full contract, answered to a read of ~/tools/<name> and to a mis-call."""
    parts = [f"# {tool.name}", "", tool.description, "", "## Input schema", "```json",
             json.dumps(tool.input_schema, indent=2, ensure_ascii=False), "```"]
    if tool.output_schema is not None:
        parts += ["", "## Output schema", "```json",
                  json.dumps(tool.output_schema, indent=2, ensure_ascii=False), "```"]
    return "\n".join(parts)


def input_errors(tool: Tool, value: object, limit: int = 10) -> list[str]:
    """What is wrong with `value` as the tool's input, one line per fault (empty: it fits)."""
    out = []
    for error in tool.validator().iter_errors(value):
        where = "/".join(str(p) for p in error.absolute_path) or "(input)"
        message = error.message
        if len(message) > 200:
            message = message[:199] + "…"
        out.append(f"{where}: {message}")
        if len(out) >= limit:
            break
    return out


def provider_tool(tool: Tool) -> tuple[str, str, dict]:
    """(name, description, parameters) of a verb as the model is offered it."""
    return tool.name, tool.description, tool.input_schema


def execute_for_server(runtimes: tuple[str, ...], description: str, runtime_help: str) -> Tool:
    """`execute` as a server can honour it (the reference's executeToolForRuntimes): the runtime
    enum narrowed to what it runs, and its own description of its sandbox."""
    base = CALLABLES["execute"]
    schema = copy.deepcopy(base.input_schema)
    runtime = schema["properties"]["runtime"]
    runtime["enum"] = [r for r in runtime["enum"] if r in runtimes]
    runtime["description"] = runtime_help
    return dataclasses.replace(base, description=description, input_schema=schema, _validator=None)
