/**
 * Makes tests/reference_data/fixture/: a reference server's data directory written by the
 * reference's own code (seed-hypermedia/seed 7819d47, agents/src/api-service.ts and sqlite.ts,
 * unchanged), driven the way its e2e harness drives it (agents/e2e/run.ts: the real Service on a
 * real SQLite file, every action a signed envelope), with a scripted OpenAI-compatible model on
 * 127.0.0.1 so the turns are real turns: tool calls, a plan, a delegated child, memory writes.
 * Beside the data it writes answers.json: what the reference answered to the desktop's reads,
 * which the import test compares our imported server against.
 *
 * Run by make.sh (Bun, the reference checkout, a scratch directory); never by the test suite.
 */
import {Database} from 'bun:sqlite'
import * as fs from 'node:fs'
import * as path from 'node:path'
import * as apisvc from '../src/api-service'
import * as sqlite from '../src/sqlite'
import * as blobs from '@shm/shared/blobs'

const OUT = process.env.OUT!
const PORT = Number(process.env.MODEL_PORT || '45931')
fs.rmSync(OUT, {recursive: true, force: true})
fs.mkdirSync(OUT, {recursive: true})

// ─── The scripted model: answers by what the last user message asks ─────────────────────
const usage = () => ({prompt_tokens: 11, completion_tokens: 7, total_tokens: 18})
const sse = (chunks: unknown[]) =>
  new Response(chunks.map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`).join('') + 'data: [DONE]\n\n', {
    headers: {'content-type': 'text/event-stream'},
  })
const say = (id: string, content: string) =>
  sse([
    {id, choices: [{delta: {content}}]},
    {id, choices: [{delta: {}, finish_reason: 'stop'}], usage: usage()},
  ])
const call = (id: string, name: string, args: unknown) =>
  sse([
    {id, choices: [{delta: {tool_calls: [{index: 0, id: `call-${id}`, type: 'function',
      function: {name, arguments: JSON.stringify(args)}}]}}]},
    {id, choices: [{delta: {}, finish_reason: 'tool_calls'}], usage: usage()},
  ])
let n = 0
let identityAccount = ''
Bun.serve({
  port: PORT,
  hostname: '127.0.0.1',
  async fetch(req) {
    const url = new URL(req.url)
    if (!url.pathname.endsWith('/chat/completions')) return Response.json({data: [{id: 'scripted-1'}]})
    const body = (await req.json()) as {messages: Array<{role: string; content: unknown}>}
    n += 1
    const text = (m: {content: unknown}) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content))
    const lastUser = [...body.messages].reverse().find((m) => m.role === 'user')
    const ask = lastUser ? text(lastUser) : ''
    const afterTool = body.messages.at(-1)?.role === 'tool'
    if (ask.includes('title for this conversation') || ask.includes('Title')) {
      return say(`t${n}`, JSON.stringify({title: 'A scripted title', description: 'Made by the fixture.'}))
    }
    if (afterTool) return say(`a${n}`, `Done (step ${n}).`)
    if (ask.includes('remember')) {
      return call(`m${n}`, 'write', {address: '~/memory/notes/remembered.md', content: `# Remembered\n\n${ask}\n`})
    }
    if (ask.includes('checklist')) {
      return call(`p${n}`, 'plan', {title: 'Colors', steps: [
        {id: 's1', label: 'Name three colors', status: 'done'},
        {id: 's2', label: 'Write the sentence', status: 'done'},
      ]})
    }
    if (ask.includes('script')) {
      return call(`w${n}`, 'delegate', {title: 'Tally', input: {items: ['a', 'b']}, script:
        "export default async function (input, ctx) {\n" +
        "  const seen = await ctx.step('read notes', () => ctx.call('read', {address: '~/memory/profile.md'}, {description: 'read the profile'}))\n" +
        "  ctx.log('items', input.items.length)\n" +
        "  return {count: input.items.length, read: typeof seen}\n}\n"})
    }
    if (ask.includes('draft')) {
      return call(`r${n}`, 'write', {address: `hm://${identityAccount}/fixture-draft`,
        content: '---\ntitle: Fixture draft\n---\n# Fixture draft\n\nHello draft.', options: {action: 'draft.create'}})
    }
    if (ask.includes('delegate')) {
      return call(`d${n}`, 'delegate', {title: 'Researcher', brief: 'Name three colors', prompt: 'You are the researcher.'})
    }
    return say(`s${n}`, `You said: ${ask.slice(0, 200)}`)
  },
})

// ─── The reference's own service on a file database ──────────────────────────────────────
const dbPath = path.join(OUT, 'agents.sqlite')
const db = new Database(dbPath, {create: true, strict: true})
const opened = sqlite.openWithDatabase(db)
if (!opened.ok) throw new Error('schema mismatch')
const svc = new apisvc.Service(db, OUT, {titleGeneration: true})
// Fixed keys, so the import test can act as these accounts on the imported server.
const owner = blobs.nobleKeyPairFromSeed(new Uint8Array(32).fill(7))
const guest = blobs.nobleKeyPairFromSeed(new Uint8Array(32).fill(9))
const as = (who: blobs.Signer) => async (action: Record<string, unknown>): Promise<any> => {
  const answer: any = await svc.message(await apisvc.createSignedEnvelope(who, {action} as never))
  if (answer._ === 'Error') throw new Error(`${action._}: ${answer.message}`)
  return answer
}
const send = as(owner)
const guestSend = as(guest)
const enc = new TextEncoder()

await send({_: 'SetSecret', name: 'provider-scripted-api-key', value: enc.encode('sk-fixture-not-a-real-key')})
await send({_: 'SetModelProvider', name: 'scripted', provider: {type: 'custom', baseUrl: `http://127.0.0.1:${PORT}/v1`,
  secretRefs: {apiKey: 'provider-scripted-api-key'}, modelDefaults: {model: 'scripted-1'}}})
// A signing identity imported from a fixed seed (CreateSigningIdentity would publish to the network).
const seed = new Uint8Array(32).map((_, i) => i + 1)
const identity = await send({_: 'ImportSigningIdentity', seed, label: 'Fixture writer'})
const signingKey = identity.identity?.name ?? identity.name
identityAccount = identity.identity?.accountId ?? ''
const main = (await send({_: 'CreateAgent', definition: {name: 'Helper', systemPrompt: 'You help. Be brief.',
  modelProvider: 'scripted', model: 'scripted-1', tools: ['publish'], ...(signingKey ? {signingKey} : {})}})).agentId
const second = (await send({_: 'CreateAgent', definition: {name: 'Notes', systemPrompt: 'You keep notes.',
  modelProvider: 'scripted', model: 'scripted-1', tools: []}})).agentId

await send({_: 'InviteAgentCollaborator', agentId: main, accountId: blobs.principalToString(guest.principal), role: 'writer'})
await guestSend({_: 'AcceptAgentInvite', agentId: main})
await send({_: 'InviteAgentCollaborator', agentId: second,
  accountId: blobs.principalToString(blobs.generateNobleKeyPair().principal), role: 'reader'})

await send({_: 'WriteAgentMemoryFile', agentId: main, path: 'profile.md', content: '# Profile\n\nLikes short answers.\n'})
await send({_: 'WriteAgentMemoryFile', agentId: main, path: 'data/colors.json', content: '["red","blue","green"]\n'})
await send({_: 'WriteAgentMemoryFile', agentId: second, path: 'logo.bin', content: new Uint8Array([0, 1, 2, 255, 254])})

await send({_: 'CreateAgentTrigger', agentId: main, trigger: {name: 'morning', source: {type: 'schedule',
  schedule: {kind: 'weekly', daysOfWeek: [1, 3, 5], timeOfDay: '09:00', timezone: 'Europe/Madrid'}},
  prompt: 'Good morning: what is on the list?'}})
await send({_: 'CreateAgentTrigger', agentId: second, trigger: {name: 'after-helper', enabled: true,
  source: {type: 'run-completed', agentId: main, status: 'succeeded'}, prompt: 'Summarise what Helper did.'}})

await send({_: 'SaveAgentTool', agentId: main, tool: {name: 'add_numbers', summary: 'Adds two numbers',
  description: 'Adds a and b.', input: {type: 'object', properties: {a: {type: 'number'}, b: {type: 'number'}},
    required: ['a', 'b']}, source: 'export default function run(input) { return input.a + input.b }',
  runtime: 'typescript'}})

const chat = (await send({_: 'CreateSession', agentId: main, clientRequestId: 'fixture-chat'})).sessionId
const turn = async (sessionId: string, text: string, who = send) => {
  await who({_: 'MessageSession', sessionId, content: [{type: 'text', text}]})
  await svc.awaitQueueIdle()
}
await turn(chat, 'Hello there, who are you?')
await turn(chat, 'Please remember that the meeting is on Tuesday.')
await turn(chat, 'Make a checklist for the colors task.')
await turn(chat, 'Please delegate the research to a child.')
await turn(chat, 'I am the collaborator: hello from me.', guestSend)
await turn(chat, 'Run a script child to tally the items.')
await turn(chat, 'Write a draft document for later.')
const attached = await send({_: 'UploadSessionAttachment', sessionId: chat, name: 'notes.txt',
  content: enc.encode('attached notes\n')})
await send({_: 'MessageSession', sessionId: chat, content: [{type: 'text', text: 'See the attached file.'},
  {type: 'attachment', attachmentId: attached.attachment?.id ?? attached.attachmentId}]}).catch(() => undefined)
await svc.awaitQueueIdle()
const renamed = (await send({_: 'CreateSession', agentId: second})).sessionId
await turn(renamed, 'A note about the weekend.')
await send({_: 'UpdateSession', sessionId: renamed, title: 'Weekend notes'})
for (let i = 0; i < 6; i++) await turn(renamed, `Short note number ${i}.`)

// ─── What the reference answers to the desktop's reads ───────────────────────────────────
const answers: Record<string, unknown> = {
  owner: blobs.principalToString(owner.principal),
  guest: blobs.principalToString(guest.principal),
  agents: (await send({_: 'ListAgents'})).agents,
  sessions: {} as Record<string, unknown>,
  sessionLists: {} as Record<string, unknown>,
  memory: {} as Record<string, unknown>,
  triggers: {} as Record<string, unknown>,
  tools: {} as Record<string, unknown>,
}
for (const agentId of [main, second]) {
  ;(answers.sessionLists as any)[agentId] = (await send({_: 'ListSessions', agentId})).sessions
  ;(answers.memory as any)[agentId] = (await send({_: 'ListAgentMemory', agentId})).entries
  ;(answers.triggers as any)[agentId] = (await send({_: 'ListAgentTriggers', agentId})).triggers
  ;(answers.tools as any)[agentId] = (await send({_: 'ListAgentTools', agentId})).tools
}
for (const sessionId of [chat, renamed]) {
  const got = await send({_: 'GetSession', sessionId})
  ;(answers.sessions as any)[sessionId] = {session: got.session, events: got.events}
}
const plain = (value: unknown): unknown =>
  value instanceof Uint8Array ? {$bytes: Buffer.from(value).toString('base64')}
    : Array.isArray(value) ? value.map(plain)
    : value && typeof value === 'object' ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]))
    : value
fs.writeFileSync(path.join(OUT, 'answers.json'), JSON.stringify(plain(answers), null, 1) + '\n')
svc.stopRunQueue()
db.run('PRAGMA wal_checkpoint(TRUNCATE)')
db.close()
process.exit(0)
