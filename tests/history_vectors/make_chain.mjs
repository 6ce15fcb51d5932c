// Regenerates tests/history_vectors/chain.json: the hash chain and a signed head of one fixed
// session, computed with the reference IPLD libraries (@ipld/dag-cbor, multiformats) and Node's
// Ed25519, so that protocol/history.py can be held to them byte for byte
// (tests/test_history_vectors.py).
//
//   cd tests/history_vectors && npm ci && node make_chain.mjs
//
// The rules are docs/protocol.md's "Verifiable history": each event's block is
// {sessionId, seq, prev (absent at seq 1), event, createdAt}, its link the CIDv1 (dag-cbor,
// sha2-256) of the block's DAG-CBOR; a head is signed over
// {type: "SeedAgentsSessionHead", sessionId, seq, head, ts}.
import {writeFileSync} from 'node:fs'
import {createPrivateKey, sign} from 'node:crypto'
import {encode} from '@ipld/dag-cbor'
import {CID} from 'multiformats/cid'
import {sha256} from 'multiformats/hashes/sha2'

const sessionId = 'b2f1c3d4-0000-4000-8000-000000000001'
const t0 = 1764900000000
const payloads = [
  {type: 'message', role: 'user', content: 'hello there', meta: {accountId: 'z6MkExample', signerId: 'z6MkExample'},
   envelopeCid: 'bafyreigdmqpykrgxyaxtlafqpqhzrb7qy2rh75nzs6ubcngxa3f5ycpbvy'},
  {type: 'tool_call', id: 'call-1', name: 'read', input: {path: '~/memory/notes.md'}, actor: 'agent'},
  {type: 'tool_result', toolCallId: 'call-1', name: 'read', output: {text: 'ünïcödé ✓', bytes: 12}, meta: {durationMs: 3}},
  {type: 'message', role: 'assistant', content: 'done', meta: {usage: {inputTokens: 10, outputTokens: 2}, cost: 0.25}},
]

const dagCbor = 0x71
async function cidOf(bytes) {
  return CID.create(1, dagCbor, await sha256.digest(bytes))
}

const events = []
let prev = null
for (let i = 0; i < payloads.length; i++) {
  const seq = i + 1
  const createdAt = t0 + seq * 1000
  const event = {id: `event-${seq}`, sessionId, seq, event: payloads[i], createdAt}
  const body = encode(event)
  const block = {sessionId, seq, event, createdAt}
  if (prev) block.prev = prev
  const blockBytes = encode(block)
  const link = await cidOf(blockBytes)
  events.push({seq, body: Buffer.from(body).toString('hex'), block: Buffer.from(blockBytes).toString('hex'),
               link: link.toString()})
  prev = link
}

// The server key from a fixed seed (RFC 8032 seed in a PKCS#8 wrapper, as Node imports it).
const seed = Buffer.alloc(32, 7)
const pkcs8 = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed])
const key = createPrivateKey({key: pkcs8, format: 'der', type: 'pkcs8'})
const ts = t0 + 10_000
const headPayload = encode({type: 'SeedAgentsSessionHead', sessionId, seq: payloads.length, head: prev, ts})
const sig = sign(null, headPayload, key)

writeFileSync(new URL('./chain.json', import.meta.url), JSON.stringify({
  sessionId, serverSeed: seed.toString('hex'), events,
  head: {seq: payloads.length, head: prev.toString(), ts, payload: Buffer.from(headPayload).toString('hex'),
         sig: Buffer.from(sig).toString('hex')},
}, null, 2) + '\n')
console.log(`wrote chain.json: ${events.length} events, head ${prev}`)
