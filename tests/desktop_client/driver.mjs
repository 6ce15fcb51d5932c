// Walks the Seed desktop's Agents screens against a server with the desktop's own client code
// (desktop-client.bundle.mjs): the actions are built as frontend/packages/ui/src/agents/models.ts
// and the dialogs build them, signed and sent by client.ts's signAgentAction/sendAgentAction, and
// each answer is read the way the screen reads it. Any mismatch throws, naming the step.
//
//   node driver.mjs <server base url> <account seed hex> <device seed hex> <fake model base url>
//
// The fake model (tests/fakes/openai_server.py) answers "echo: <message>"; a flow that needs a
// slow or failing reply queues one for the next request with POST <fake>/_fake/script.
//
// Prints one JSON line: {steps: [...], seen: {...}} (what the screens would show), for pytest.
import assert from 'node:assert/strict'
import {createHash, randomUUID} from 'node:crypto'
import {
  blobs,
  buildAgentSessionChatRows,
  getAgentServerHealth,
  installDesktopPlatform,
  installWebPlatform,
  isOptimisticUserEcho,
  isSafeAgentServerSecretTarget,
  markdownBlockNodesToHMBlockNodes,
  normalizeAgentServerUrl,
  parseMarkdown,
  sendAgentAction,
  sessionEventActor,
  signAgentAction,
} from './desktop-client.bundle.mjs'

const [baseArg, accountSeedHex, deviceSeedHex, fakeModelUrl] = process.argv.slice(2)
const fromHex = (hex) => Uint8Array.from(Buffer.from(hex, 'hex'))
const steps = []
const seen = {}
let current = 'start'

// agent-tools.ts DEFAULT_AGENT_TOOLS (callableToolRegistry names, plus the publish grant).
const DEFAULT_AGENT_TOOLS = ['search', 'web_search', 'execute', 'publish']
// The create-agent dialog's prompt, typed into its editor: the editor's blocks are what the
// dialog sends (promptBlocksForRequest only trims trailing empty blocks; these have none).
const PROMPT = 'You are a helpful agent.\n\n## Style\n\n- Answer briefly.\n- Cite **sources**.'
const promptBlocks = (markdown) => markdownBlockNodesToHMBlockNodes(parseMarkdown(markdown).tree)

async function step(name, fn) {
  current = name
  await fn()
  steps.push(name)
}

/** Polls like the screens' react-query refetch, but waits on the condition, within a deadline. */
async function until(what, fn, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await fn()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

const serverUrl = normalizeAgentServerUrl(baseArg + '/agents/')
// A second account on another desktop, for sharing: its seed follows from the first.
const friendSeed = Uint8Array.from(createHash('sha256').update('friend of ' + accountSeedHex).digest())
const desktopKeys = [fromHex(accountSeedHex), friendSeed]
const [accountUid, friendUid] = installDesktopPlatform(desktopKeys)
const send = (action) => sendAgentAction({serverUrl, accountUid, action})

/** The next reply of the fake model, as Script fields ({first_delay}, {status}). */
async function nextModelReply(script) {
  const res = await fetch(fakeModelUrl.replace(/\/v1$/, '') + '/_fake/script', {
    method: 'POST',
    headers: {'content-type': 'application/json'},
    body: JSON.stringify(script),
  })
  assert.equal(res.status, 200)
}
const sendAsFriend = (action) => sendAgentAction({serverUrl, accountUid: friendUid, action})

async function main() {
  await step('health', async () => {
    // server.tsx / useAgentServerHealths: getAgentServerHealth on the normalized URL.
    assert.equal(serverUrl, baseArg.replace(/\/+$/, ''))
    const health = await getAgentServerHealth(serverUrl)
    assert.equal(health.status, 'ok')
    assert.equal(typeof health.uptime, 'number')
    // The flags the tool toggles read: stated, and codeExec false with a reason when off.
    assert.equal(typeof health.webTools?.search, 'boolean')
    assert.equal(typeof health.subscriptionAuth, 'boolean')
    assert.equal(typeof health.codeExec, 'boolean')
    if (!health.codeExec) assert.ok(health.codeExecReason && health.codeExecReasonCode)
    seen.health = {codeExec: health.codeExec, webTools: health.webTools}
  })

  await step('signed envelope', async () => {
    // The envelope as the desktop signs it: the daemon's key is the account, so signer == account.
    const env = await signAgentAction({accountUid, action: {_: 'ListAgents', unused: undefined}})
    assert.equal(env.type, 'AgentsAction')
    assert.deepEqual(env.signer, env.account)
    assert.ok(!('unused' in env.action), 'omitUndefined drops undefined fields')
    assert.ok(blobs.verify(env))
  })

  await step('ListAgents (empty)', async () => {
    const res = await send({_: 'ListAgents'})
    assert.equal(res._, 'ListAgentsResponse')
    assert.deepEqual(res.agents, [])
    const invites = await send({_: 'ListAgentInvites'})
    assert.equal(invites._, 'ListAgentInvitesResponse')
    assert.deepEqual(invites.invites, [])
  })

  // The create-agent dialog: providers, then the first provider's models, then a signing account
  // named after the agent, then CreateAgent, then prefetchAgentDetail.
  let providerName, model
  await step('ListModelProviders/ListProviderModels', async () => {
    const res = await send({_: 'ListModelProviders'})
    assert.equal(res._, 'ListModelProvidersResponse')
    const echo = res.providers.find((p) => p.name === 'echo')
    assert.ok(echo, 'the built-in echo provider is listed')
    assert.equal(echo.hasSecrets, false)
    providerName = echo.name
    const models = await send({_: 'ListProviderModels', provider: providerName})
    assert.equal(models._, 'ListProviderModelsResponse')
    assert.ok(models.models.length > 0 && models.models.every((m) => m.id && m.name))
    model = models.models[0].id
    seen.provider = {name: providerName, type: echo.type, model}
  })

  await step('add and remove model providers (providers screen)', async () => {
    // useSaveModelProvider: the key as a secret named after the provider, then the provider that
    // references it; a local Ollama with a base URL and no key; then useDeleteModelProvider.
    assert.ok(isSafeAgentServerSecretTarget(serverUrl), 'a loopback server may receive keys')
    const secret = await send({
      _: 'SetSecret',
      name: 'my-openai-api-key',
      value: new TextEncoder().encode('sk-test-not-a-real-key'),
      metadata: {provider: 'openai'},
    })
    assert.equal(secret._, 'SetSecretResponse')
    assert.equal(secret.secret.name, 'my-openai-api-key')
    assert.ok(!('value' in secret.secret))
    const openai = await send({
      _: 'SetModelProvider',
      name: 'my-openai',
      provider: {type: 'openai', secretRefs: {apiKey: 'my-openai-api-key'}},
    })
    assert.equal(openai._, 'SetModelProviderResponse')
    assert.deepEqual([openai.provider.name, openai.provider.type, openai.provider.hasSecrets], ['my-openai', 'openai', true])
    const ollama = await send({
      _: 'SetModelProvider',
      name: 'local-ollama',
      provider: {type: 'ollama', baseUrl: 'http://localhost:11434/v1'},
    })
    assert.equal(ollama._, 'SetModelProviderResponse')
    assert.equal(ollama.provider.hasSecrets, false)
    const listed = await send({_: 'ListModelProviders'})
    const names = listed.providers.map((p) => p.name)
    assert.ok(['echo', 'my-openai', 'local-ollama'].every((n) => names.includes(n)), names.join(','))
    assert.ok(!JSON.stringify(listed).includes('sk-test'), 'no key in any answer')
    for (const name of ['my-openai', 'local-ollama']) {
      const del = await send({_: 'DeleteModelProvider', name})
      assert.equal(del._, 'DeleteModelProviderResponse')
      assert.equal(del.name, name)
    }
    const after = await send({_: 'ListModelProviders'})
    assert.deepEqual(after.providers.map((p) => p.name), ['echo'])
  })

  let identity
  const agentName = 'Desktop research agent'
  await step('List/CreateSigningIdentity', async () => {
    const before = await send({_: 'ListSigningIdentities'})
    assert.equal(before._, 'ListSigningIdentitiesResponse')
    assert.deepEqual(before.identities, [])
    const res = await send({_: 'CreateSigningIdentity', label: agentName, clientRequestId: randomUUID()})
    assert.equal(res._, 'CreateSigningIdentityResponse')
    identity = res.identity
    assert.ok(identity.id && identity.name)
    assert.match(identity.accountId, /^z6Mk/)
    assert.equal(identity.label, agentName)
    const after = await send({_: 'ListSigningIdentities'})
    assert.deepEqual(after.identities.map((i) => i.name), [identity.name])
    // useImportSigningIdentity: a decrypted .hmkey.json seed, the account it names.
    const seed = Uint8Array.from(createHash('sha256').update('imported key of ' + accountSeedHex).digest())
    const imported = await send({_: 'ImportSigningIdentity', seed, label: 'Imported', clientRequestId: randomUUID()})
    assert.equal(imported._, 'ImportSigningIdentityResponse')
    assert.equal(imported.identity.accountId, blobs.principalToString(blobs.nobleKeyPairFromSeed(seed).principal))
    const removed = await send({_: 'DeleteSigningIdentity', name: imported.identity.name})
    assert.equal(removed._, 'DeleteSigningIdentityResponse')
    seen.identity = {name: identity.name, label: identity.label, hasServerUrl: 'serverUrl' in identity}
  })

  let agentId, agent
  await step('CreateAgent (block-tree prompt, identity)', async () => {
    const definition = {
      name: agentName,
      systemPrompt: promptBlocks(PROMPT),
      modelProvider: providerName,
      model,
      reasoningLevel: undefined, // coerceReasoningLevel: none for this model, dropped by omitUndefined
      tools: DEFAULT_AGENT_TOOLS,
      signingKey: identity.name,
      signingKeys: [identity.name],
      metadata: {createdFrom: 'desktop-agents-page'},
    }
    const res = await send({_: 'CreateAgent', definition, clientRequestId: randomUUID()})
    assert.equal(res._, 'CreateAgentResponse')
    agentId = res.agentId
    const detail = await send({_: 'GetAgent', agentId})
    assert.equal(detail._, 'GetAgentResponse')
    agent = detail.agent
    assert.equal(agent.id, agentId)
    assert.equal(agent.account, accountUid)
    assert.equal(agent.accessRole, 'owner')
    assert.equal(agent.definition.name, agentName)
    assert.deepEqual(agent.definition.systemPrompt, JSON.parse(JSON.stringify(definition.systemPrompt)))
    assert.deepEqual(agent.definition.signingKeys, [identity.name])
    assert.deepEqual(detail.sessions, [])
  })

  await step('UpdateAgent (rename, as the agent page does)', async () => {
    // handleRenameAgent: the definition as the server returned it, with a new name; then the
    // dedicated account's label follows.
    const renamed = 'Desktop research agent II'
    const res = await send({_: 'UpdateAgent', agentId, definition: {...agent.definition, name: renamed}})
    assert.equal(res._, 'GetAgentResponse', 'useUpdateAgent writes a GetAgentResponse into its cache')
    assert.equal(res.agent.id, agentId)
    assert.equal(res.agent.definition.name, renamed)
    assert.ok(Array.isArray(res.sessions))
    const id = await send({_: 'UpdateSigningIdentity', name: identity.name, label: renamed, icon: undefined})
    assert.equal(id._, 'UpdateSigningIdentityResponse')
    assert.equal(id.identity.label, renamed)
    agent = res.agent
    // The settings form: a new prompt and model, also from the returned definition.
    const prompt2 = PROMPT + '\n\n1. First step\n2. Second step'
    const res2 = await send({
      _: 'UpdateAgent',
      agentId,
      definition: {...agent.definition, systemPrompt: promptBlocks(prompt2)},
    })
    assert.equal(res2._, 'GetAgentResponse')
    agent = res2.agent
  })

  await step('ListAgents/GetAgent', async () => {
    const res = await send({_: 'ListAgents'})
    assert.equal(res._, 'ListAgentsResponse')
    assert.deepEqual(res.agents.map((a) => [a.id, a.definition.name, a.accessRole]), [
      [agentId, 'Desktop research agent II', 'owner'],
    ])
    const row = res.agents[0]
    assert.equal(typeof row.busy, 'boolean')
    assert.equal(typeof row.publicRead, 'boolean')
    const detail = await send({_: 'GetAgent', agentId})
    assert.equal(detail.agent.definition.name, 'Desktop research agent II')
  })

  let sessionId
  await step('CreateSession', async () => {
    const res = await send({_: 'CreateSession', agentId, clientRequestId: randomUUID()})
    assert.equal(res._, 'CreateSessionResponse')
    sessionId = res.sessionId
    const got = await send({_: 'GetSession', sessionId})
    assert.equal(got._, 'GetSessionResponse')
    assert.equal(got.session.agentId, agentId)
    assert.ok(!got.session.title, 'no title until the first reply')
    assert.deepEqual(got.events, [])
    // The prompt the session shows: the block tree as Markdown.
    seen.systemPromptMarkdown = got.systemPromptMarkdown
    for (const line of ['You are a helpful agent.', '# Style', '- Answer briefly.', 'Cite **sources**.', '1. First step']) {
      assert.ok(got.systemPromptMarkdown.includes(line), `systemPromptMarkdown has ${line}`)
    }
  })

  let attachment
  await step('UploadSessionAttachment', async () => {
    // uploadFileToAgentServer, small file: one UploadSessionAttachment with the bytes.
    const content = new TextEncoder().encode('quarterly numbers: 1, 2, 3\n')
    const res = await send({_: 'UploadSessionAttachment', sessionId, name: 'numbers.txt', mimeType: 'text/plain', content})
    assert.equal(res._, 'UploadSessionAttachmentResponse')
    attachment = res.attachment
    assert.equal(attachment.id, createHash('sha256').update(content).digest('hex'))
    assert.equal(attachment.sessionId, sessionId)
    assert.equal(attachment.name, 'numbers.txt')
    assert.equal(attachment.size, content.length)
    // useSessionAttachmentDataUrls reads it back for display.
    const read = await send({_: 'ReadSessionAttachment', sessionId, attachmentId: attachment.id})
    assert.equal(read._, 'ReadSessionAttachmentResponse')
    assert.deepEqual(read.data, content)
    assert.equal(read.attachment.mimeType, 'text/plain')
  })

  await step('chunked upload (a file over 2 MiB)', async () => {
    // uploadFileToAgentServer above SINGLE_SHOT_UPLOAD_BYTES: BeginFileUpload, chunks of at most
    // min(maxChunkBytes, 3 MiB), CommitFileUpload.
    const data = new Uint8Array(2 * 1024 * 1024 + 4096).map((_, i) => (i * 7) & 0xff)
    const target = {kind: 'session-attachment', sessionId, name: 'big.bin', mimeType: 'application/octet-stream'}
    const begin = await send({_: 'BeginFileUpload', target, size: data.byteLength})
    assert.equal(begin._, 'BeginFileUploadResponse')
    assert.ok(begin.maxChunkBytes > 0)
    const chunkSize = Math.min(begin.maxChunkBytes, 3 * 1024 * 1024)
    let sent = 0
    while (sent < data.byteLength) {
      const chunk = data.subarray(sent, Math.min(sent + chunkSize, data.byteLength))
      const appended = await send({_: 'AppendFileUploadChunk', uploadId: begin.uploadId, offset: sent, content: chunk})
      assert.equal(appended._, 'AppendFileUploadChunkResponse')
      sent += chunk.byteLength
      assert.equal(appended.received, sent)
    }
    const commit = await send({_: 'CommitFileUpload', uploadId: begin.uploadId})
    assert.equal(commit._, 'CommitFileUploadResponse')
    assert.equal(commit.attachment?.size, data.byteLength)
    assert.equal(commit.attachment?.id, createHash('sha256').update(data).digest('hex'))
    assert.equal(commit.entry, undefined)
  })

  await step('MessageSession to echo, GetSession until the reply', async () => {
    // useMessageAgentSession: context, attachments, then the text part with its blocks and the
    // optimistic row's clientMessageId, which is also the action's idempotency key.
    const clientMessageId = randomUUID()
    const text = 'Summarize the attached numbers'
    const blocks = promptBlocks(text)
    const res = await send({
      _: 'MessageSession',
      sessionId,
      content: [
        {type: 'context', lines: ['Current window: the agents page']},
        {type: 'attachment', id: attachment.id},
        {type: 'text', text, blocks, clientMessageId},
      ],
      clientMessageId,
    })
    assert.equal(res._, 'MessageSessionResponse')
    assert.equal(res.sessionId, sessionId)
    const done = await until('the assistant reply', async () => {
      const got = await send({_: 'GetSession', sessionId})
      const reply = got.events.find((e) => e.event.type === 'message' && e.event.role === 'assistant')
      return reply && got.session.status !== 'streaming' ? got : null
    })
    const [user, reply] = done.events.filter((e) => e.event.type === 'message')
    assert.equal(user.event.role, 'user')
    assert.equal(user.event.content, text)
    assert.equal(user.event.clientMessageId, clientMessageId, 'the optimistic row is replaced by identity')
    assert.deepEqual(user.event.blocks, JSON.parse(JSON.stringify(blocks)))
    assert.equal(user.event.meta?.accountId, accountUid)
    assert.equal(reply.event.content, 'echo: ' + text)
    assert.deepEqual(done.events.map((e) => e.seq), done.events.map((_, i) => i + 1))
    assert.equal(done.session.status, 'idle')
    assert.equal(done.session.title, text, 'the title falls back to the first message')
    seen.transcript = done.events.map((e) => [e.event.role ?? e.event.type, e.event.content ?? null])
    // The run card: the session's runs, and the one this message started.
    const runs = await send({_: 'ListRuns', sessionId})
    assert.equal(runs._, 'ListRunsResponse')
    assert.equal(runs.runs.length, 1)
    const run = await send({_: 'GetRun', runId: runs.runs[0].id})
    assert.equal(run._, 'GetRunResponse')
    assert.deepEqual([run.run.sessionId, run.run.agentId, run.run.status, run.run.origin],
      [sessionId, agentId, 'succeeded', 'user'])
    // The same send again (a retry after a lost answer) is the same message, not a second one.
    const again = await send({
      _: 'MessageSession',
      sessionId,
      content: [
        {type: 'context', lines: ['Current window: the agents page']},
        {type: 'attachment', id: attachment.id},
        {type: 'text', text, blocks, clientMessageId},
      ],
      clientMessageId,
    })
    assert.equal(again.userEventId ?? again.sessionId, res.userEventId ?? res.sessionId)
    const after = await send({_: 'GetSession', sessionId})
    assert.equal(after.events.length, done.events.length)
  })

  await step('UpdateSession (rename)', async () => {
    const res = await send({_: 'UpdateSession', sessionId, title: 'Numbers'})
    assert.equal(res._, 'UpdateSessionResponse')
    assert.equal(res.session.title, 'Numbers')
  })

  await step('ListSessions (sidebar)', async () => {
    const res = await send({_: 'ListSessions', includeChildren: false})
    assert.equal(res._, 'ListSessionsResponse')
    assert.deepEqual(res.sessions.map((s) => [s.id, s.title]), [[sessionId, 'Numbers']])
    assert.deepEqual(res.agents.map((a) => a.id), [agentId])
  })

  await step('memory write/read/list', async () => {
    const text = '# Notes\n\n- remember the numbers\n'
    const w = await send({_: 'WriteAgentMemoryFile', agentId, path: 'notes/todo.md', content: text})
    assert.equal(w._, 'WriteAgentMemoryFileResponse')
    assert.equal(w.entry.path, 'notes/todo.md')
    assert.equal(w.entry.type, 'file')
    assert.equal(w.entry.size, Buffer.byteLength(text))
    // uploadFileToAgentServer to memory: the file's bytes as one WriteAgentMemoryFile.
    const bytes = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 1, 2, 255])
    const b = await send({_: 'WriteAgentMemoryFile', agentId, path: 'files/pixel.png', content: bytes})
    assert.equal(b._, 'WriteAgentMemoryFileResponse')
    const list = await send({_: 'ListAgentMemory', agentId})
    assert.equal(list._, 'ListAgentMemoryResponse')
    const byPath = Object.fromEntries(list.entries.map((e) => [e.path, e]))
    assert.equal(byPath['notes']?.type, 'dir')
    assert.equal(byPath['notes/todo.md']?.size, Buffer.byteLength(text))
    assert.equal(byPath['files/pixel.png']?.size, bytes.length)
    assert.equal(list.totalBytes, Buffer.byteLength(text) + bytes.length)
    const readText = await send({_: 'ReadAgentMemoryFile', agentId, path: 'notes/todo.md'})
    assert.equal(readText._, 'ReadAgentMemoryFileResponse')
    assert.equal(readText.file.encoding, 'utf8')
    assert.equal(readText.file.content, text)
    const readBin = await send({_: 'ReadAgentMemoryFile', agentId, path: 'files/pixel.png'})
    assert.equal(readBin.file.encoding, 'binary')
    assert.deepEqual(readBin.file.data, bytes)
    assert.equal(readBin.file.mimeType, 'image/png')
    const del = await send({_: 'DeleteAgentMemoryFile', agentId, path: 'files/pixel.png'})
    assert.equal(del._, 'DeleteAgentMemoryFileResponse')
    assert.equal(del.deleted, true)
    seen.memory = list.entries.map((e) => [e.path, e.type])
  })

  await step('ListAgentTools', async () => {
    const res = await send({_: 'ListAgentTools', agentId})
    assert.equal(res._, 'ListAgentToolsResponse')
    assert.equal(res.agentId, agentId)
    assert.ok(res.tools.length > 0)
    for (const tool of res.tools) {
      assert.ok(tool.name && (tool.kind === 'builtin' || tool.kind === 'lambda'), JSON.stringify(tool.name))
      assert.equal(typeof tool.summary, 'string')
      assert.equal(typeof tool.description, 'string')
      assert.equal(typeof tool.input, 'object')
      assert.match(tool.cid, /^bafy/)
      assert.equal(typeof tool.enabled, 'boolean')
      assert.equal(typeof tool.granted, 'boolean')
    }
    const search = res.tools.find((t) => t.name === 'search')
    assert.ok(search?.granted, 'the search grant the agent was created with is on')
    // Granted on the agent, but the server has no sandbox (health codeExec false): not offered.
    const execute = res.tools.find((t) => t.name === 'execute')
    assert.equal(execute?.granted, seen.health.codeExec, 'execute is granted only where code can run')
    seen.tools = res.tools.map((t) => [t.name, t.kind, t.granted])
  })

  await step('tools tab: a builtin off and on (UpdateAgent tools)', async () => {
    // AgentToolsTab.saveTools: the checkbox saves the definition with the next `tools` list.
    const off = await send({_: 'UpdateAgent', agentId, definition: {
      ...agent.definition, tools: agent.definition.tools.filter((t) => t !== 'search'),
      signingKeys: agent.definition.signingKeys, signingKey: agent.definition.signingKeys[0]}})
    assert.equal(off._, 'GetAgentResponse')
    assert.ok(!off.agent.definition.tools.includes('search'))
    let tools = await send({_: 'ListAgentTools', agentId})
    assert.equal(tools.tools.find((t) => t.name === 'search')?.granted, false, 'search unchecked')
    const on = await send({_: 'UpdateAgent', agentId, definition: {
      ...off.agent.definition, tools: [...off.agent.definition.tools, 'search']}})
    assert.ok(on.agent.definition.tools.includes('search'))
    tools = await send({_: 'ListAgentTools', agentId})
    assert.equal(tools.tools.find((t) => t.name === 'search')?.granted, true, 'search checked again')
    agent = on.agent
  })

  await step('SaveAgentTool (authored tool dialog)/DeleteAgentTool', async () => {
    // AuthoredToolDialog's defaults, a name and a description typed in; then the edit that renames.
    const tool = {
      name: 'weather_lookup',
      summary: 'Looks up the weather.',
      description: 'Looks up the weather for a city. Call it with the city name.',
      input: {type: 'object', properties: {city: {type: 'string'}}},
      source: 'export default async function (input) {\n  return {}\n}\n',
      runtime: 'typescript',
    }
    const saved = await send({_: 'SaveAgentTool', agentId, tool})
    assert.equal(saved._, 'SaveAgentToolResponse')
    assert.equal(saved.agentId, agentId)
    assert.deepEqual([saved.tool.name, saved.tool.kind, saved.tool.runtime, saved.tool.source, saved.tool.summary],
      [tool.name, 'lambda', 'typescript', tool.source, tool.summary])
    assert.match(saved.tool.cid, /^bafy/)
    let list = await send({_: 'ListAgentTools', agentId})
    // The tab lists `kind === 'lambda'` rows; `enabled` false would show a Disabled badge.
    const authored = () => list.tools.filter((t) => t.kind === 'lambda').map((t) => [t.name, t.enabled])
    assert.deepEqual(authored(), [['weather_lookup', true]])
    // Add tool again with the same name: no previousName, so the server refuses to replace it.
    await assert.rejects(send({_: 'SaveAgentTool', agentId, tool: {...tool, source: 'other'}}), /already exists/)
    const renamed = await send({_: 'SaveAgentTool', agentId, tool: {...tool, name: 'weather'}, previousName: tool.name})
    assert.equal(renamed._, 'SaveAgentToolResponse')
    assert.equal(renamed.tool.name, 'weather')
    list = await send({_: 'ListAgentTools', agentId})
    assert.deepEqual(authored(), [['weather', true]])
    const del = await send({_: 'DeleteAgentTool', agentId, name: 'weather'})
    assert.equal(del._, 'DeleteAgentToolResponse')
    assert.deepEqual([del.agentId, del.name, del.deleted], [agentId, 'weather', true])
    const again = await send({_: 'DeleteAgentTool', agentId, name: 'weather'})
    assert.equal(again.deleted, false, 'already absent')
    list = await send({_: 'ListAgentTools', agentId})
    assert.deepEqual(authored(), [])
    // The dialog toasts a refusal as the server words it.
    await assert.rejects(send({_: 'SaveAgentTool', agentId, tool: {...tool, name: 'Bad Name'}}), /name/i)
    seen.authoredTool = {saved: saved.tool.name, enabled: true, codeExec: seen.health.codeExec}
  })

  await step('InvokeSessionTool (user tool palette)', async () => {
    // UserToolPalette.run: Read with an address; the answer closes the popover unless it carries
    // `error` (a toast) or a contract miss (`validationErrors`/`contract`: the form stays open).
    const read = await send({_: 'InvokeSessionTool', sessionId, verb: 'read', input: {address: '~/memory/notes/todo.md'}})
    assert.equal(read._, 'InvokeSessionToolResponse')
    assert.equal(read.sessionId, sessionId)
    assert.ok(read.resultEventId)
    assert.equal(read.error, undefined, JSON.stringify(read.error))
    assert.ok(JSON.stringify(read.output).includes('remember the numbers'), JSON.stringify(read.output))
    const self = await send({_: 'InvokeSessionTool', sessionId, verb: 'read', input: {address: '~/self'}})
    assert.equal(self.error, undefined, JSON.stringify(self.error))
    // A callable the palette offers (search is granted), with its form left empty: a contract miss.
    const miss = await send({_: 'InvokeSessionTool', sessionId, verb: 'call', input: {tool: 'search', input: {}}})
    assert.equal(miss._, 'InvokeSessionToolResponse')
    const contractMiss = typeof miss.output === 'object' && miss.output !== null &&
      (miss.output.validationErrors !== undefined || miss.output.contract !== undefined)
    assert.ok(contractMiss || miss.error, JSON.stringify(miss))
    // The thread shows the user's own calls as actor-'user' rows.
    const got = await send({_: 'GetSession', sessionId})
    const results = got.events.filter((e) => e.event.type === 'tool_result' && e.event.actor === 'user')
    assert.ok(results.some((e) => e.id === read.resultEventId), 'the result is on the log')
    assert.equal(got.events.filter((e) => e.event.type === 'tool_call' && e.event.actor === 'user').length, 3)
    seen.palette = {read: typeof read.output, contractMiss, missError: miss.error ?? null}
  })

  await step('Execute switch and a custom tool that runs (codeExec)', async () => {
    // agent-tools.ts: the Execute switch is offered where health says codeExec; the tools tab
    // saves it as the definition's `tools` list, and ListAgentTools' `granted` follows.
    assert.equal(seen.health.codeExec, true, 'this server runs code')
    const withoutExecute = agent.definition.tools.filter((t) => t !== 'execute')
    const off = await send({_: 'UpdateAgent', agentId, definition: {...agent.definition, tools: withoutExecute}})
    let tools = await send({_: 'ListAgentTools', agentId})
    assert.equal(tools.tools.find((t) => t.name === 'execute')?.granted, false, 'Execute switched off')
    const tool = {name: 'add_numbers', summary: 'Adds two numbers.', description: 'Adds a and b.',
      input: {type: 'object', properties: {a: {type: 'number'}, b: {type: 'number'}}, required: ['a', 'b']},
      output: {type: 'object', properties: {sum: {type: 'number'}}, required: ['sum']},
      source: 'def main(input):\n    print("adding")\n    return {"sum": input["a"] + input["b"]}\n', runtime: 'python'}
    assert.equal((await send({_: 'SaveAgentTool', agentId, tool}))._, 'SaveAgentToolResponse')
    const refused = await send({_: 'InvokeSessionTool', sessionId, verb: 'call',
      input: {tool: 'add_numbers', input: {a: 2, b: 3}}})
    assert.match(refused.error ?? '', /not enabled for this agent/, JSON.stringify(refused))
    const on = await send({_: 'UpdateAgent', agentId, definition: {...off.agent.definition, tools: [...withoutExecute, 'execute']}})
    agent = on.agent
    tools = await send({_: 'ListAgentTools', agentId})
    assert.equal(tools.tools.find((t) => t.name === 'execute')?.granted, true, 'Execute switched on')
    // The palette runs the custom tool (as the Tools tab's "Try it" would), then a TypeScript one
    // in the dialog's default shape (its body plain JavaScript, which every Node runs).
    const ran = await send({_: 'InvokeSessionTool', sessionId, verb: 'call', input: {tool: 'add_numbers', input: {a: 2, b: 3}}})
    assert.equal(ran.error, undefined, JSON.stringify(ran))
    assert.deepEqual([ran.output.result, ran.output.logs], [{sum: 5}, 'adding'])
    const ts = {...tool, name: 'add_ts', runtime: 'typescript',
      source: 'export default async function (input) {\n  return {sum: input.a + input.b}\n}\n'}
    await send({_: 'SaveAgentTool', agentId, tool: ts})
    const ranTs = await send({_: 'InvokeSessionTool', sessionId, verb: 'call', input: {tool: 'add_ts', input: {a: 4, b: 5}}})
    assert.deepEqual(ranTs.output?.result, {sum: 9}, JSON.stringify(ranTs))
    const code = await send({_: 'InvokeSessionTool', sessionId, verb: 'call', input: {tool: 'execute',
      input: {runtime: 'shell', code: 'echo from the palette > palette.txt; cat palette.txt'}}})
    assert.equal(code.output?.stdout, 'from the palette\n', JSON.stringify(code))
    const file = await send({_: 'ReadAgentMemoryFile', agentId, path: 'palette.txt'})
    assert.equal(file.file.content, 'from the palette\n')
    for (const name of ['add_numbers', 'add_ts']) await send({_: 'DeleteAgentTool', agentId, name})
    seen.codeExec = {sum: ran.output.result.sum, tsSum: ranTs.output.result.sum, memory: file.file.content}
  })

  let modelSessionId, retriedRunId
  await step('StopSession on a running reply, RetrySession after a failed one', async () => {
    // A local OpenAI-compatible model, added on the providers screen, picked for this session.
    await send({_: 'SetSecret', name: 'local-model-api-key', value: new TextEncoder().encode('sk-local'),
      metadata: {provider: 'custom'}})
    const prov = await send({_: 'SetModelProvider', name: 'local-model',
      provider: {type: 'custom', baseUrl: fakeModelUrl, secretRefs: {apiKey: 'local-model-api-key'}}})
    assert.equal(prov._, 'SetModelProviderResponse')
    modelSessionId = (await send({_: 'CreateSession', agentId, clientRequestId: randomUUID()})).sessionId
    const override = await send({_: 'UpdateSession', sessionId: modelSessionId,
      modelOverride: {provider: 'local-model', model: 'fake-model'}})
    assert.deepEqual(override.session.modelOverride, {provider: 'local-model', model: 'fake-model'})
    const message = (text) => {
      const clientMessageId = randomUUID()
      return send({_: 'MessageSession', sessionId: modelSessionId, clientMessageId,
        content: [{type: 'text', text, blocks: promptBlocks(text), clientMessageId}]})
    }
    // A reply that takes its time: the stop button shows while the session streams.
    await nextModelReply({first_delay: 30})
    const slow = await message('Take your time')
    assert.equal(slow._, 'MessageSessionResponse')
    await until('the run to start', async () => {
      const run = (await send({_: 'GetRun', runId: slow.runId})).run
      const session = (await send({_: 'GetSession', sessionId: modelSessionId})).session
      return run.status === 'running' && session.status === 'streaming'
    })
    // While it runs, the palette and a retry are refused with the server's words (a toast each).
    await assert.rejects(send({_: 'InvokeSessionTool', sessionId: modelSessionId, verb: 'read',
      input: {address: '~/self'}}), /live run/)
    await assert.rejects(send({_: 'RetrySession', sessionId: modelSessionId}), /live run/)
    const stop = await send({_: 'StopSession', sessionId: modelSessionId})
    assert.equal(stop._, 'StopSessionResponse')
    assert.deepEqual([stop.sessionId, stop.stopped], [modelSessionId, true])
    // The thread then ends with the assistant's "Stopped." (nothing had streamed), as the
    // reference's server writes it.
    const stopped = await until('the session idle, the reply stopped', async () => {
      const got = await send({_: 'GetSession', sessionId: modelSessionId})
      const last = got.events.at(-1).event
      return got.session.status === 'idle' && last.role === 'assistant' ? got : null
    })
    assert.equal((await send({_: 'GetRun', runId: slow.runId})).run.status, 'canceled')
    // handleStopSession: nothing left to stop is `stopped: false` ("No active agent response").
    const again = await send({_: 'StopSession', sessionId: modelSessionId})
    assert.equal(again.stopped, false)
    const lastAfterStop = stopped.events.at(-1).event
    seen.afterStop = {lastRow: lastAfterStop.type, role: lastAfterStop.role ?? null, content: lastAfterStop.content}
    // No error row ends the thread, so the desktop offers no retry; the server agrees.
    await assert.rejects(send({_: 'RetrySession', sessionId: modelSessionId}), (error) => {
      seen.afterStop.retry = error.message
      return /fail/i.test(error.message)
    })
    // A reply that fails: the thread ends in an error row, which offers Retry.
    await nextModelReply({status: 500})
    const failing = await message('Try again later')
    const failed = await until('the error row', async () => {
      const got = await send({_: 'GetSession', sessionId: modelSessionId})
      return got.session.status !== 'streaming' && got.events.at(-1).event.type === 'error' ? got : null
    })
    assert.equal((await send({_: 'GetRun', runId: failing.runId})).run.status, 'failed')
    seen.failedRow = failed.events.at(-1).event.type
    const retry = await send({_: 'RetrySession', sessionId: modelSessionId})
    assert.equal(retry._, 'RetrySessionResponse')
    assert.equal(retry.sessionId, modelSessionId)
    assert.equal(typeof retry.assistantEventId, 'string')
    retriedRunId = retry.runId
    assert.ok(retriedRunId && retriedRunId !== failing.runId, 'a new run')
    const replied = await until('the retried reply', async () => {
      const got = await send({_: 'GetSession', sessionId: modelSessionId})
      const last = got.events.at(-1).event
      return got.session.status === 'idle' && last.type === 'message' && last.role === 'assistant' ? got : null
    })
    assert.equal(replied.events.at(-1).event.content, 'echo: Try again later')
    assert.equal(replied.events.filter((e) => e.event.role === 'user').length, 2, 'no new user message')
  })

  await step('injected turns: the transcript shows them as the server\'s (agent-session-rows.ts)', async () => {
    // A plan left open: the server hands the model its reminder (three times), then leaves the
    // notice of what was left; the desktop's own row builder decides who wrote each message.
    const planSession = (await send({_: 'CreateSession', agentId, clientRequestId: randomUUID()})).sessionId
    await send({_: 'UpdateSession', sessionId: planSession, modelOverride: {provider: 'local-model', model: 'fake-model'}})
    await nextModelReply({tool_calls: [{id: 'plan-1', name: 'plan', arguments: {
      steps: [{id: 's1', label: 'check the numbers', status: 'running'}]}}]})
    const clientMessageId = randomUUID()
    const text = 'Plan the numbers'
    const sent = await send({_: 'MessageSession', sessionId: planSession, clientMessageId,
      content: [{type: 'text', text, blocks: promptBlocks(text), clientMessageId}]})
    const got = await until('the run to end with its notice', async () => {
      const run = (await send({_: 'GetRun', runId: sent.runId})).run
      if (!['succeeded', 'failed'].includes(run.status)) return null
      const session = await send({_: 'GetSession', sessionId: planSession})
      return session.session.status === 'idle' ? session : null
    }, 20000)
    const rows = buildAgentSessionChatRows(got.events, {serverUrl, agentId, sessionId: planSession})
    const messages = rows.filter((row) => row.kind === 'message' && row.message.role === 'user')
    seen.injected = messages.map((row) => [row.message.actor, row.message.content.split('\n')[0].slice(0, 60)])
    // The person's own message is theirs, and is the echo of what the composer sent.
    const own = got.events.find((e) => e.event.type === 'message' && e.event.clientMessageId === clientMessageId)
    assert.ok(own, 'the person\'s message is in the log')
    assert.equal(sessionEventActor(own.event), 'user')
    const optimistic = {type: 'message', role: 'user', content: text, rawMarkdown: text, clientMessageId}
    assert.equal(isOptimisticUserEcho(own.event, optimistic), true)
    // The server's turns: never mistaken for the person's pending words, even with the same text.
    for (const e of got.events.filter((e) => e.event.type === 'message' && e.event.actor === 'system')) {
      assert.equal(isOptimisticUserEcho(e.event, {type: 'message', role: 'user', content: e.event.content}), false)
    }
    await send({_: 'DeleteSession', sessionId: planSession})
  })

  await step('a workflow\'s run card: its source, plan, journal and parked wait, answered', async () => {
    // A script child the model delegates (the fake model's next two replies), followed as the run
    // card follows it: useSessionRuns -> the latest root, useRunTree -> the tree (the workflow row,
    // sourceText for the source drawer, plan for the steps, wait for ParkedRunActions), the
    // activity drawer from GetRunJournal, and the answer button's SignalRun with wait.answerWith.
    const sessionId = (await send({_: 'CreateSession', agentId, clientRequestId: randomUUID()})).sessionId
    await send({_: 'UpdateSession', sessionId, modelOverride: {provider: 'local-model', model: 'fake-model'}})
    const script = [
      'export default async function (input, ctx) {',
      "  await ctx.plan({steps: ['gather', 'approve']});",
      "  await ctx.step('gather', () => ctx.call('read', {address: '~/self'}, {description: 'read my settings'}));",
      "  ctx.progress({fraction: 0.5, label: 'waiting for approval'});",
      "  const ok = await ctx.step('approve', () => ctx.waitForEvent({signal: 'approve'}, {label: 'Approve?'}));",
      '  return {approved: ok.payload};',
      '}',
    ].join('\n')
    await nextModelReply({chunks: [], tool_calls: [{id: 'wf1', name: 'delegate',
      arguments: JSON.stringify({title: 'approval flow', script})}]})
    await nextModelReply({chunks: ['The flow is done.']})
    const clientMessageId = randomUUID()
    const sent = await send({_: 'MessageSession', sessionId, clientMessageId,
      content: [{type: 'text', text: 'run the flow', blocks: promptBlocks('run the flow'), clientMessageId}]})
    const roots = await send({_: 'ListRuns', sessionId})
    assert.equal(roots.runs[0].id, sent.runId)
    const child = await until('the script child parked on its wait', async () => {
      const tree = (await send({_: 'ListRuns', rootRunId: sent.runId})).runs
      const flow = tree.find((r) => r.kind === 'workflow')
      return flow && flow.status === 'waiting' ? flow : null
    }, 30000)
    assert.deepEqual([child.parentRunId, child.title, child.sourceText], [sent.runId, 'approval flow', script])
    assert.deepEqual(child.plan.steps.map((s) => [s.label, s.status]), [['gather', 'done'], ['approve', 'running']])
    assert.deepEqual([child.wait.reason, child.wait.answerWith, child.wait.label], ['event', 'approve', 'Approve?'])
    const journal = (await send({_: 'GetRunJournal', runId: child.id})).entries
    const call = journal.find((e) => e.entry.kind === 'call')
    assert.deepEqual([call.entry.tool, call.entry.description], ['read', 'read my settings'])
    const signal = await send({_: 'SignalRun', runId: child.id, signal: child.wait.answerWith, payload: 'yes'})
    assert.deepEqual([signal.runId, signal.delivered], [child.id, true])
    const done = await until('the flow done', async () => {
      const run = (await send({_: 'GetRun', runId: child.id})).run
      return run.status === 'succeeded' ? run : null
    }, 30000)
    assert.deepEqual(done.plan.steps.map((s) => s.status), ['done', 'done'])
    const parent = await until('the parent answered', async () => {
      const got = await send({_: 'GetSession', sessionId})
      return got.session.status === 'idle' ? got : null
    }, 30000)
    const answer = parent.events.find((e) => e.event.type === 'tool_result' && e.event.toolCallId === 'wf1').event
    assert.deepEqual(answer.output.output, {approved: 'yes'})
    seen.workflow = {kind: child.kind, steps: done.plan.steps.map((s) => s.status),
      journal: [...new Set((await send({_: 'GetRunJournal', runId: child.id})).entries.map((e) => e.entry.kind))]}
    for (const id of [child.sessionId, sessionId]) await send({_: 'DeleteSession', sessionId: id})
  })

  await step('run tree: GetRun, ListRuns (rootRunId), GetRunJournal, SignalRun not delivered', async () => {
    // useRun, useSessionRuns (roots, newest first), useRunTree (oldest first), the activity drawer.
    const run = (await send({_: 'GetRun', runId: retriedRunId})).run
    assert.deepEqual([run.id, run.rootRunId, run.depth, run.status, run.sessionId, run.agentId],
      [retriedRunId, retriedRunId, 0, 'succeeded', modelSessionId, agentId])
    assert.equal(run.parentRunId, undefined)
    const roots = await send({_: 'ListRuns', sessionId: modelSessionId})
    assert.deepEqual(roots.runs.map((r) => r.status), ['succeeded', 'failed', 'canceled'])
    assert.equal(roots.runs[0].id, retriedRunId)
    const tree = await send({_: 'ListRuns', rootRunId: retriedRunId})
    assert.equal(tree._, 'ListRunsResponse')
    assert.deepEqual(tree.runs.map((r) => r.id), [retriedRunId])
    const journal = await send({_: 'GetRunJournal', runId: retriedRunId})
    assert.equal(journal._, 'GetRunJournalResponse')
    assert.equal(journal.runId, retriedRunId)
    assert.ok(Array.isArray(journal.entries))
    for (const entry of journal.entries) assert.ok(typeof entry.seq === 'number' && entry.kind, JSON.stringify(entry))
    // ParkedRunActions offers no answer for a run that is not waiting; a stale card that sends one
    // anyway gets `delivered: false` and toasts "This run is no longer waiting for that".
    assert.notEqual(run.status, 'waiting')
    const signal = await send({_: 'SignalRun', runId: retriedRunId, signal: 'resume'})
    assert.equal(signal._, 'SignalRunResponse')
    assert.deepEqual([signal.runId, signal.delivered], [retriedRunId, false])
    seen.runTree = {roots: roots.runs.map((r) => r.status), journal: journal.entries.map((e) => e.kind)}
    const del = await send({_: 'DeleteSession', sessionId: modelSessionId})
    assert.equal(del._, 'DeleteSessionResponse')
    await send({_: 'DeleteModelProvider', name: 'local-model'})
  })

  let triggerId
  await step('CreateAgentTrigger/ListAgentTriggers', async () => {
    // The new-trigger dialog with the schedule source's defaults (every 1 hour).
    const trigger = {
      name: 'New activity trigger',
      enabled: true,
      source: {type: 'schedule', schedule: {kind: 'interval', every: 1, unit: 'hours'}},
      prompt: promptBlocks('Respond to the mention, performing the action requested.'),
    }
    const res = await send({_: 'CreateAgentTrigger', agentId, trigger, clientRequestId: randomUUID()})
    assert.equal(res._, 'CreateAgentTriggerResponse')
    triggerId = res.trigger.id
    assert.equal(res.trigger.agentId, agentId)
    assert.equal(res.trigger.account, accountUid)
    assert.deepEqual(res.trigger.source, trigger.source)
    assert.equal(res.trigger.enabled, true)
    const list = await send({_: 'ListAgentTriggers', agentId})
    assert.equal(list._, 'ListAgentTriggersResponse')
    assert.deepEqual(list.triggers.map((t) => [t.id, t.name]), [[triggerId, 'New activity trigger']])
    const one = await send({_: 'GetAgentTrigger', triggerId})
    assert.equal(one._, 'GetAgentTriggerResponse')
    assert.deepEqual(one.sessions, [])
    const off = await send({_: 'UpdateAgentTrigger', triggerId, patch: {enabled: false}})
    assert.equal(off._, 'UpdateAgentTriggerResponse')
    assert.equal(off.trigger.enabled, false)
    seen.trigger = {name: one.trigger.name, source: one.trigger.source}
  })

  await step('sharing: invite, accept, the collaborator sees the agent', async () => {
    // The share dialog (owner), then the invite row and the shared agent (the friend's desktop).
    const inv = await send({_: 'InviteAgentCollaborator', agentId, accountId: friendUid, role: 'writer'})
    assert.equal(inv._, 'InviteAgentCollaboratorResponse')
    assert.deepEqual([inv.collaborator.accountId, inv.collaborator.role, inv.collaborator.status],
      [friendUid, 'writer', 'pending'])
    const invites = await sendAsFriend({_: 'ListAgentInvites'})
    assert.deepEqual(invites.invites.map((i) => [i.agentId, i.agentName, i.ownerAccountId, i.role]),
      [[agentId, 'Desktop research agent II', accountUid, 'writer']])
    await assert.rejects(sendAsFriend({_: 'GetAgent', agentId}), /not found/i)
    const accepted = await sendAsFriend({_: 'AcceptAgentInvite', agentId})
    assert.equal(accepted._, 'AcceptAgentInviteResponse')
    assert.equal(accepted.agent.accessRole, 'writer')
    const theirs = await sendAsFriend({_: 'ListAgents'})
    assert.deepEqual(theirs.agents.map((a) => [a.id, a.account, a.accessRole]), [[agentId, accountUid, 'writer']])
    // useAgentAccountsSync: a shared agent's granted signing accounts, scoped by agentId.
    const ids = await sendAsFriend({_: 'ListSigningIdentities', agentId})
    assert.deepEqual(ids.identities.map((i) => i.accountId), [identity.accountId])
    const collabs = await send({_: 'ListAgentCollaborators', agentId})
    assert.equal(collabs._, 'ListAgentCollaboratorsResponse')
    assert.deepEqual(collabs.collaborators.map((c) => [c.accountId, c.role, c.status]),
      [[accountUid, 'owner', 'accepted'], [friendUid, 'writer', 'accepted']])
    const removed = await send({_: 'RemoveAgentCollaborator', agentId, accountId: friendUid})
    assert.equal(removed._, 'RemoveAgentCollaboratorResponse')
    await assert.rejects(sendAsFriend({_: 'GetAgent', agentId}), /not found/i)
  })

  await step('sharing: decline, then a reader sees the agent read-only', async () => {
    // The invite row's Decline (useDeclineAgentInvite), then an invite as reader, accepted.
    await send({_: 'InviteAgentCollaborator', agentId, accountId: friendUid, role: 'reader'})
    const pending = await sendAsFriend({_: 'ListAgentInvites'})
    assert.deepEqual(pending.invites.map((i) => [i.agentId, i.role]), [[agentId, 'reader']])
    const declined = await sendAsFriend({_: 'DeclineAgentInvite', agentId})
    assert.equal(declined._, 'DeclineAgentInviteResponse')
    assert.equal(declined.agentId, agentId)
    assert.deepEqual((await sendAsFriend({_: 'ListAgentInvites'})).invites, [])
    await assert.rejects(sendAsFriend({_: 'GetAgent', agentId}), /not found/i)
    await send({_: 'InviteAgentCollaborator', agentId, accountId: friendUid, role: 'reader'})
    const accepted = await sendAsFriend({_: 'AcceptAgentInvite', agentId})
    assert.equal(accepted.agent.accessRole, 'reader')
    // The agent page as a reader: accessRole drives canWrite, so every control is read-only.
    const detail = await sendAsFriend({_: 'GetAgent', agentId})
    assert.equal(detail._, 'GetAgentResponse')
    assert.equal(detail.agent.accessRole, 'reader')
    assert.equal(detail.agent.definition.name, agent.definition.name)
    assert.deepEqual(detail.sessions.map((s) => s.id), [sessionId])
    const tools = await sendAsFriend({_: 'ListAgentTools', agentId})
    assert.ok(tools.tools.length > 0, 'a reader sees the tools tab')
    const session = await sendAsFriend({_: 'GetSession', sessionId})
    assert.equal(session.session.id, sessionId)
    // What a reader cannot do is refused, with the server's words for the toast.
    for (const action of [
      {_: 'UpdateAgent', agentId, definition: {...detail.agent.definition, name: 'Mine now'}},
      {_: 'SaveAgentTool', agentId, tool: {name: 'sneaky', description: 'd', input: {type: 'object'},
        source: 'x', runtime: 'typescript'}},
      {_: 'MessageSession', sessionId, content: [{type: 'text', text: 'hi'}]},
      {_: 'InvokeSessionTool', sessionId, verb: 'write', input: {address: '~/memory/x.md', content: 'x'}},
    ]) {
      await assert.rejects(sendAsFriend(action), (error) => {
        assert.ok(error instanceof Error && error.message, action._)
        seen.readerRefusals = {...seen.readerRefusals, [action._]: error.message}
        return true
      })
    }
    await send({_: 'RemoveAgentCollaborator', agentId, accountId: friendUid})
  })

  await step('web: RegisterSigner on first refusal, then the same agents', async () => {
    // The web app's platform: a device key delegated by the account (the vault's Capability),
    // registered by client.ts itself when the server first answers `Signer is not authorized`.
    const accountKey = blobs.nobleKeyPairFromSeed(fromHex(accountSeedHex))
    const device = blobs.nobleKeyPairFromSeed(fromHex(deviceSeedHex))
    const cap = await blobs.createCapability(accountKey, device.principal, 'AGENT', Date.now(), {label: 'web'})
    const web = installWebPlatform({
      deviceSeed: fromHex(deviceSeedHex),
      delegatedAccountUid: accountUid,
      capability: cap.data,
      sendAgentAction,
    })
    try {
      const res = await sendAgentAction({serverUrl, accountUid, action: {_: 'ListAgents'}})
      assert.deepEqual(web.registered, [serverUrl], 'registered once, then retried')
      assert.deepEqual(res.agents.map((a) => a.id), [agentId])
      const again = await sendAgentAction({serverUrl, accountUid, action: {_: 'GetAgent', agentId}})
      assert.equal(again._, 'GetAgentResponse')
      assert.deepEqual(web.registered, [serverUrl], 'no second registration')
      const env = await signAgentAction({accountUid, action: {_: 'ListAgents'}})
      assert.notDeepEqual(env.signer, env.account)
      seen.web = {deviceUid: web.deviceUid, registered: web.registered.length}
    } finally {
      installDesktopPlatform(desktopKeys)
    }
  })

  await step('errors reach the screen as the server says them', async () => {
    // sendSignedAgentAction throws Error(message) for an Error answer; screens toast the message.
    await assert.rejects(send({_: 'GetAgent', agentId: randomUUID()}), (error) => {
      assert.ok(error instanceof Error)
      assert.match(error.message, /not found/i)
      return true
    })
  })

  await step('DeleteSession/DeleteAgent', async () => {
    const del = await send({_: 'DeleteSession', sessionId})
    assert.equal(del._, 'DeleteSessionResponse')
    assert.equal(del.sessionId, sessionId)
    assert.equal(del.agentId, agentId)
    const detail = await send({_: 'GetAgent', agentId})
    assert.deepEqual(detail.sessions, [])
    await assert.rejects(send({_: 'GetSession', sessionId}), /not found/i)
    const trig = await send({_: 'DeleteAgentTrigger', triggerId})
    assert.equal(trig._, 'DeleteAgentTriggerResponse')
    const gone = await send({_: 'DeleteAgent', agentId})
    assert.equal(gone._, 'DeleteAgentResponse')
    assert.equal(gone.agentId, agentId)
    const list = await send({_: 'ListAgents'})
    assert.deepEqual(list.agents, [])
    const idDel = await send({_: 'DeleteSigningIdentity', name: identity.name})
    assert.equal(idDel._, 'DeleteSigningIdentityResponse')
    const ids = await send({_: 'ListSigningIdentities'})
    assert.deepEqual(ids.identities, [])
  })
}

try {
  await main()
  console.log(JSON.stringify({ok: true, steps, seen}))
} catch (error) {
  console.log(JSON.stringify({ok: false, steps, seen, failed: current, error: String(error?.stack ?? error)}))
  process.exitCode = 1
}
