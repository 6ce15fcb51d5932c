// Regenerates the Seed hypermedia vectors (tests/hm_vectors/*.json) with the published
// @seed-hypermedia/client, the library whose bytes our protocol/hm_*.py must equal.
//
//   cd tests/hm_vectors && npm ci && node make_vectors.mjs
//
// Everything is fixed: seeds, names, times, and Math.random (the library draws block ids from
// it), replaced by mulberry32 so the Python tests can draw the same ids (tests/hm_vectors.py).
import {writeFileSync} from 'node:fs'
import {createHash} from 'node:crypto'
import * as blobs from '@seed-hypermedia/client/blobs'
import {CID} from 'multiformats/cid'
import {sha256} from 'multiformats/hashes/sha2'
import {
  createChange,
  createChangeOps,
  createGenesisChange,
  createVersionRef,
  fileToIpfsBlobs,
  flattenToOperations,
  parseMarkdown,
} from '@seed-hypermedia/client'

const hex = (b) => Buffer.from(b).toString('hex')
const b64 = (b) => Buffer.from(b).toString('base64')

// mulberry32: a tiny seedable PRNG; tests/hm_vectors.py has the same one.
function mulberry32(seed) {
  let a = seed >>> 0
  return function () {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
function seedRandom(seed) {
  Math.random = mulberry32(seed)
}

function seedBytes(label) {
  return new Uint8Array(createHash('sha256').update(label).digest())
}

function blobEntry(cid, data) {
  return {cid: cid.toString(), data: b64(data)}
}


// createVersionRef answers the Ref's bytes without its CID: computed here as for any DAG-CBOR blob.
async function refBlob(refInput) {
  const data = refInput.blobs[0].data
  const digest = await sha256.digest(data)
  return {cid: CID.createV1(0x71, digest).toString(), data: b64(data)}
}

function signerOf(keyPair) {
  return {getPublicKey: async () => keyPair.principal, sign: (data) => keyPair.sign(data)}
}

// As the reference agents server's publishSigningIdentityProfileAndHome (agents/src/api-service.ts).
async function accountCreation(label, name, now, randomSeed) {
  seedRandom(randomSeed)
  const seed = seedBytes(label)
  const keyPair = blobs.nobleKeyPairFromSeed(seed)
  const accountId = blobs.principalToString(keyPair.principal)
  const signer = signerOf(keyPair)
  const profile = await blobs.createProfile(keyPair, {name}, now)
  const {tree} = parseMarkdown('This is an agentic account.')
  const ops = [{type: 'SetAttributes', attrs: [{key: ['name'], value: name}]}].concat(flattenToOperations(tree))
  const genesisBlock = await createGenesisChange(signer)
  const {unsignedBytes, ts} = createChangeOps({
    ops,
    genesisCid: genesisBlock.cid,
    deps: [genesisBlock.cid],
    depth: 1,
    ts: BigInt(now),
  })
  const changeBlock = await createChange(unsignedBytes, signer)
  const refInput = await createVersionRef(
    {
      space: accountId,
      path: '',
      genesis: genesisBlock.cid.toString(),
      version: changeBlock.cid.toString(),
      generation: Number(ts),
      ts: Number(ts),
    },
    signer,
  )
  return {
    seed: hex(seed),
    accountId,
    name,
    ts: now,
    randomSeed,
    blobs: [
      blobEntry(profile.cid, profile.data),
      blobEntry(genesisBlock.cid, genesisBlock.bytes),
      blobEntry(changeBlock.cid, changeBlock.bytes),
      await refBlob(refInput),
    ],
  }
}

// As publishSigningIdentityProfile: a rename (no avatar) or a new icon (avatar ipfs://<cid>).
async function profileUpdate(label, name, now, iconBytes) {
  const seed = seedBytes(label)
  const keyPair = blobs.nobleKeyPairFromSeed(seed)
  let avatar
  let icon
  if (iconBytes) {
    const chunked = await fileToIpfsBlobs(iconBytes)
    avatar = `ipfs://${chunked.cid}`
    icon = {data: b64(iconBytes), cid: chunked.cid, blobs: chunked.blobs.map((b) => blobEntry(b.cid, b.data))}
  }
  const profile = await blobs.createProfile(keyPair, {name, avatar}, now)
  return {
    seed: hex(seed),
    accountId: blobs.principalToString(keyPair.principal),
    name,
    ts: now,
    ...(icon ? {icon} : {}),
    blobs: [blobEntry(profile.cid, profile.data)],
  }
}

// Deterministic file bytes for the UnixFS vectors (tests rebuild them from the rule).
function patternBytes(size, mul) {
  const out = new Uint8Array(size)
  for (let i = 0; i < size; i++) out[i] = (i * mul + (i >>> 8)) & 0xff
  return out
}

async function unixfsVector(size, mul) {
  const data = patternBytes(size, mul)
  const chunked = await fileToIpfsBlobs(data)
  return {
    size,
    mul,
    cid: chunked.cid,
    blobs: chunked.blobs.map((b) => ({
      cid: b.cid,
      size: b.data.length,
      sha256: createHash('sha256').update(b.data).digest('hex'),
      // Leaves are slices of the input; only the small inner nodes are kept whole.
      ...(b.data.length <= 4096 ? {data: b64(b.data)} : {}),
    })),
  }
}

const PNG_1x1 = Buffer.from(
  '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c63f8cfc0f01f0005000201a5d4b7a60000000049454e44ae426082',
  'hex',
)

const accounts = {
  library: '@seed-hypermedia/client@0.0.83',
  creation: [
    await accountCreation('seed-agents hm vector 1', 'Research agent', 1767225600000, 1),
    await accountCreation('seed-agents hm vector 2', 'Agent account z6MkhaXgBZ', 1767225600123, 7),
    await accountCreation('seed-agents hm vector 3', 'Ünïcödé — 代理 🤖', 1767225699999, 99),
  ],
  rename: [await profileUpdate('seed-agents hm vector 1', 'Renamed agent', 1767229200000)],
  icon: [await profileUpdate('seed-agents hm vector 1', 'Research agent', 1767232800000, PNG_1x1)],
  unixfs: [
    await unixfsVector(0, 1),
    await unixfsVector(1, 3),
    await unixfsVector(262144, 7),
    await unixfsVector(262145, 11),
    await unixfsVector(700001, 13),
  ],
}
writeFileSync(new URL('./accounts.json', import.meta.url), JSON.stringify(accounts, null, 1) + '\n')
console.log('wrote accounts.json')
