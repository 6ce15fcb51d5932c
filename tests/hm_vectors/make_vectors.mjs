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
import {encode as dagEncode} from '@ipld/dag-cbor'
import {sha256} from 'multiformats/hashes/sha2'
import {
  blocksToMarkdown,
  commentRecordIdFromBlob,
  createComment,
  deleteComment,
  updateComment,
  createRedirectRef,
  createTombstoneRef,
  computeReplaceOps,
  createBlocksMap,
  emitFrontmatter,
  hmBlockNodeToBlockNode,
  markdownBlockNodesToHMBlockNodes,
  rebindTableIdentities,
  toAPIBlockNode,
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
    // More chunks than a node links (the importer's balanced layout: 174 a node): nodes nest.
    await unixfsVector(262144 * 175 + 1000, 17),
  ],
}
writeFileSync(new URL('./accounts.json', import.meta.url), JSON.stringify(accounts, null, 1) + '\n')
console.log('wrote accounts.json')

// ─── Documents ──────────────────────────────────────────────────────────────

// Markdown → blocks (parseMarkdown, flattenToOperations) and blocks → Markdown (blocksToMarkdown),
// case by case, each with its own Math.random seed.
const PARSE_CASES = [
  'Hello world',
  'Two\nlines joined\n\nNew paragraph',
  '# Title\n\nIntro\n\n## Section\n\nBody text\n\n### Deeper\n\nDeep text\n\n## Second section\n\nMore',
  '**bold** _italic_ *also italic* `code` ~~strike~~ <u>under</u> <mark>hi</mark>',
  'A [link](https://example.com/a?b=c) and [**bold link**](https://x.y) and <https://auto.link/x>',
  'Mention <hm://z6MkihWCQTrdYSzB7D7VVPKWSAvRBFA6n9eL35fGHJqN2RuD> inline',
  'Escapes \\*not bold\\* and \\[not a link\\] and a\\_b',
  'Emoji 🤖 then **bold** after — and ünïcödé [𝒳 link](https://x.y)',
  '- one\n- two\n- three',
  '1. first\n2. second\n3. third',
  'Intro to a list:\n\n- a\n- b\n  - nested b1\n  - nested b2\n- c',
  '- a\n  1. one\n  2. two\n- b',
  '> quoted text\n> more quote',
  '```\nplain code\n```',
  '```python\ndef hello():\n    return "hi"\n```',
  '````md\n```\ninner fence\n```\n````',
  '![A diagram](https://example.com/diagram.png)',
  '![](ipfs://bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku)',
  '![local file](images/pic.png)',
  'Text with inline ![img](https://x.y/i.png) image',
  '$$\ne = mc^2\n$$',
  '| Name | Age |\n| --- | --- |\n| Alice | 30 |\n| Bob | 4 |',
  '| a | b |\n| c | d |',
  '---\nname: My doc\nsummary: About things\n---\n# My doc\n\nBody',
  '---\ntitle: Old title key\nshowOutline: yes\n---\nBody',
  'Para with id <!-- id:abcd1234 -->\n\n# Heading <!-- id:head5678 -->\n\nChild <!-- id:child001 -->',
  '<!-- id:list0001 -->\n- x <!-- id:item0001 -->\n- y <!-- id:item0002 -->',
  '# H1\n\n- a\n- b\n\nafter list',
  '#nospace\n####### seven',
  '  indented paragraph\n\n    more indented',
  'line one  \nline two<br>three',
  'Tab\tseparated',
  'crlf line\r\n# heading\r\n',
  '* star list\n+ plus list',
  '1) paren list\n2) second',
  '`` code with ` tick ``',
  'nested **bold _italic_ bold** end',
  '---\nb: 1\n0: x\nname: N\n1: y\n---\nNumeric keys',
  '---\nname: ~\ntitle: T\nsummary:\nshowOutline: ~\nshowActivity: []\nfoo: ~\nbar: null\n---\nNulls',
  '---\ntitle: Only a title\n---\nBody',
  '---\nname: 2024-01-01\ndate: 2024-01-01\ncount: 1_000\noctal: 0o17\nhex: 0x1f\nratio: 1.5\nflag: yes\nshowActivity: 0\nlist: [1, two]\ntheme: {headerLayout: Center}\n---\nBody',
  '[unclosed link(https://x)',
  '',
]

function caseRecord(markdown, randomSeed) {
  seedRandom(randomSeed)
  const {tree, metadata} = parseMarkdown(markdown)
  const ops = flattenToOperations(tree)
  const content = markdownBlockNodesToHMBlockNodes(tree)
  const rendered = blocksToMarkdown({metadata, content})
  seedRandom(randomSeed + 1000)
  const reparsed = parseMarkdown(rendered)
  return {
    markdown,
    randomSeed,
    tree,
    metadata,
    ops,
    content,
    rendered,
    reparsedContent: markdownBlockNodesToHMBlockNodes(reparsed.tree),
    reparsedMetadata: reparsed.metadata,
  }
}

const FRONTMATTER_CASES = [
  {},
  {name: 'Plain name'},
  {name: 'Colon: inside', summary: '# not a comment'},
  {name: 'true'},
  {name: '123'},
  {name: "it's quoted"},
  {name: '"double"'},
  {name: '- dash first'},
  {name: 'Ünïcödé 🤖'},
  {name: 'multi\nline'},
  {name: ''},
  {name: ' padded '},
  {showOutline: true, childrenType: 'Ordered', name: 'N', icon: 'ipfs://bafkrei', cover: 'https://x.y/c.png'},
  {zeta: 'z', alpha: 'a', name: 'sorted'},
  {name: 'null'},
  {name: '@at sign'},
  {name: 'a: b: c'},
  {name: 'key #hash'},
  {name: '2024-01-01'},
  {name: '1_000'},
  {name: 'yes'},
  {name: '0o17'},
  {name: '.inf'},
  {name: '~'},
  {name: '1.5e3'},
  {count: 3, ratio: 1.5, theme: {headerLayout: 'Center'}, tags: ['a', 'b']},
  {name: 'n', foo: null, gone: undefined},
]

const DOC_V1 = `---
name: Field notes
summary: What the agent saw today
---
# Field notes

Intro paragraph with **bold**, _italic_, \`code\`, ~~strike~~ and a [link](https://example.com/a?b=c).

## Lists

Things to check:

- first item
- second item with [a link](https://seed.hyper.media)
  - nested item
- third item

1. one
2. two

## Code

\`\`\`python
def hello():
    return "hi"
\`\`\`

![A diagram](https://example.com/diagram.png)

| Name | Age |
| --- | --- |
| Alice | 30 |
`

const DOC_V2_PLAIN = `---
name: Field notes
summary: Revised
---
# Field notes

A new intro with a [different link](https://example.org).

## Lists

- only item

## Code

\`\`\`js
console.log("hi")
\`\`\`
`

async function documentVectors() {
  const seed = seedBytes('seed-agents hm vector doc')
  const keyPair = blobs.nobleKeyPairFromSeed(seed)
  const signer = signerOf(keyPair)
  const account = blobs.principalToString(keyPair.principal)
  const path = '/field-notes'

  // First version: as the reference server's writeDocumentCreate.
  const ts1 = 1767230000000
  seedRandom(4242)
  const parsed1 = parseMarkdown(DOC_V1)
  const blocks1 = markdownBlockNodesToHMBlockNodes(parsed1.tree)
  const ops1 = metadataOps(parsed1.metadata).concat(flattenToOperations(parsed1.tree))
  const genesis = await createGenesisChange(signer)
  const c1 = createChangeOps({ops: ops1, genesisCid: genesis.cid, deps: [genesis.cid], depth: 1, ts: BigInt(ts1)})
  const change1 = await createChange(c1.unsignedBytes, signer)
  const ref1 = await createVersionRef(
    {space: account, path, genesis: genesis.cid.toString(), version: change1.cid.toString(), generation: ts1, ts: ts1},
    signer,
  )
  const create = {
    markdown: DOC_V1,
    randomSeed: 4242,
    ts: ts1,
    path,
    blobs: [blobEntry(genesis.cid, genesis.bytes), blobEntry(change1.cid, change1.bytes), await refBlob(ref1)],
    version: change1.cid.toString(),
    content: blocks1,
    rendered: blocksToMarkdown({metadata: parsed1.metadata, content: blocks1}),
  }

  // Updates: as writeDocumentUpdate, against the first version's content.
  async function update(markdown, randomSeed, ts) {
    seedRandom(randomSeed)
    const parsed = parseMarkdown(markdown)
    const oldNodes = blocks1.map((node) => toAPIBlockNode(node))
    const oldMap = createBlocksMap(oldNodes)
    const newTree = rebindTableIdentities(
      oldNodes,
      markdownBlockNodesToHMBlockNodes(parsed.tree).map((node) => hmBlockNodeToBlockNode(node)),
    )
    const ops = metadataOps(parsed.metadata).concat(computeReplaceOps(oldMap, newTree))
    const c = createChangeOps({ops, genesisCid: genesis.cid, deps: [change1.cid], depth: 2, ts: BigInt(ts)})
    const change = await createChange(c.unsignedBytes, signer)
    const ref = await createVersionRef(
      {space: account, path, genesis: genesis.cid.toString(), version: change.cid.toString(), generation: ts, ts},
      signer,
    )
    return {
      markdown,
      randomSeed,
      ts,
      ops,
      blobs: [blobEntry(change.cid, change.bytes), await refBlob(ref)],
      version: change.cid.toString(),
    }
  }
  // An edit of the rendered first version keeps block ids: only what changed is replaced.
  const edited = create.rendered
    .replace('Intro paragraph with', 'Edited intro with')
    .replace(/- third item[^\n]*\n/, '')
    .concat('\nA closing paragraph.\n')
  // Metadata (options.metadata, options.name), as writeDocumentUpdate merges it
  // (mergeWriteMetadata: front matter, then options.metadata, then name): with no content at all
  // a metadata-only change (the body untouched), else over the new body's front matter.
  async function metadataUpdate(markdown, optionsMetadata, name, randomSeed, ts) {
    seedRandom(randomSeed)
    let ops = []
    let merged = {...optionsMetadata, ...(name === undefined ? {} : {name})}
    if (markdown !== undefined) {
      const parsed = parseMarkdown(markdown)
      merged = {...parsed.metadata, ...optionsMetadata, ...(name === undefined ? {} : {name})}
      const oldNodes = blocks1.map((node) => toAPIBlockNode(node))
      const newTree = rebindTableIdentities(
        oldNodes,
        markdownBlockNodesToHMBlockNodes(parsed.tree).map((node) => hmBlockNodeToBlockNode(node)),
      )
      ops = computeReplaceOps(createBlocksMap(oldNodes), newTree)
    }
    ops = metadataOps(merged).concat(ops)
    const c = createChangeOps({ops, genesisCid: genesis.cid, deps: [change1.cid], depth: 2, ts: BigInt(ts)})
    const change = await createChange(c.unsignedBytes, signer)
    const ref = await createVersionRef(
      {space: account, path, genesis: genesis.cid.toString(), version: change.cid.toString(), generation: ts, ts},
      signer,
    )
    return {
      ...(markdown === undefined ? {} : {markdown}),
      metadata: optionsMetadata,
      ...(name === undefined ? {} : {name}),
      randomSeed,
      ts,
      blobs: [blobEntry(change.cid, change.bytes), await refBlob(ref)],
      version: change.cid.toString(),
    }
  }
  return {
    seed: hex(seed),
    accountId: account,
    create,
    updates: [await update(DOC_V2_PLAIN, 77, 1767233600000), await update(edited, 78, 1767237200000)],
    metadataUpdates: [
      await metadataUpdate(undefined, {summary: 'Notes from the field', icon: 'ipfs://bafkqaaa', showOutline: false,
                                       contentWidth: 'M', custom: {n: 3, tags: ['a', 'b']}}, undefined, 80,
                           1767238000000),
      await metadataUpdate(undefined, {}, 'Renamed notes', 81, 1767238600000),
      await metadataUpdate(DOC_V2_PLAIN, {summary: 'Over the front matter', name: 'Ignored by name'}, 'Field notes v3',
                           82, 1767239200000),
    ],
  }
}

// Random documents from a palette of every construct, compared by digest: the DAG-CBOR of their
// operations and the Markdown they render to (the Python side hashes its own the same way).
const WORDS = ['alpha', 'beta', 'γάμμα', 'delta', '🤖', 'x', 'long-word', 'a_b', '1.', '#', '-', '|', '>', '$$']
const INLINE = [
  (r) => `**${word(r)}**`, (r) => `_${word(r)}_`, (r) => `*${word(r)}*`, (r) => `\`${word(r)}\``,
  (r) => `~~${word(r)}~~`, (r) => `[${word(r)}](https://ex.com/${word(r)})`, (r) => `<u>${word(r)}</u>`,
  (r) => `<mark>${word(r)}</mark>`, (r) => '<br>', (r) => `![${word(r)}](https://ex.com/i.png)`,
  (r) => '<https://auto.link/x>', (r) => '<hm://z6MkihWCQTrdYSzB7D7VVPKWSAvRBFA6n9eL35fGHJqN2RuD>',
  (r) => `\\${pick(r, ['*', '[', '_', '`'])}`, (r) => '**', (r) => '[', (r) => '`',
  (r) => `<span style="color:#f00">${word(r)}</span>`, (r) => `***${word(r)}***`, (r) => `__${word(r)}__`,
]
function pick(r, list) {
  return list[Math.floor(r() * list.length)]
}
function word(r) {
  return pick(r, WORDS)
}
function inline(r) {
  const parts = []
  const n = 1 + Math.floor(r() * 6)
  for (let i = 0; i < n; i++) parts.push(r() < 0.5 ? word(r) : pick(r, INLINE)(r))
  return parts.join(' ')
}
function randomDocument(r) {
  const lines = []
  if (r() < 0.2) lines.push('---', `name: ${word(r)}`, '---')
  const n = 2 + Math.floor(r() * 12)
  for (let i = 0; i < n; i++) {
    const ind = pick(r, ['', '', '', '  ', '    '])
    const kind = Math.floor(r() * 12)
    if (kind === 0) lines.push(ind + '#'.repeat(1 + Math.floor(r() * 6)) + ' ' + inline(r))
    else if (kind <= 2) lines.push(ind + inline(r))
    else if (kind === 3) lines.push(ind + pick(r, ['- ', '* ', '+ ', '1. ', '2) ', '> ']) + inline(r))
    else if (kind === 4) lines.push(ind + '- ' + inline(r), ind + '  - ' + inline(r), ind + '- ' + inline(r))
    else if (kind === 5) lines.push(ind + '```' + pick(r, ['', 'js', 'py']), ind + inline(r), ind + '```')
    else if (kind === 6) lines.push(ind + '$$', ind + 'x^2', ind + '$$')
    else if (kind === 7) lines.push(ind + '| a | b |', ind + '| --- | --- |', ind + '| ' + word(r) + ' | ' + word(r) + ' |')
    else if (kind === 8) lines.push(ind + `![${word(r)}](${pick(r, ['https://ex.com/p.png', 'local.png', 'ipfs://bafy'])})`)
    else if (kind === 9) lines.push(ind + inline(r) + ` <!-- id:${word(r).replace(/[^A-Za-z0-9_-]/g, '') || 'z'}0000 -->`)
    else if (kind === 10) lines.push(pick(r, ['', '\t- tabbed', 'crlf line\r', '  ']))
    else if (kind === 11)
      lines.push(
        pick(r, [
          ind + `<!-- id:c${i}c${i}c${i} -->`,
          ind + `<!-- id:e${i}e${i} type:Embed -->`,
          ind + `<hm://z6MkihWCQTrdYSzB7D7VVPKWSAvRBFA6n9eL35fGHJqN2RuD> <!-- id:m${i} type:Embed -->`,
          ind + `[${word(r)}](https://ex.com/b) <!-- id:b${i} type:Button attrs:{"alignment":"center"} -->`,
          ind + `${inline(r)} <!-- id:p${i} attrs:{"childrenType":"Grid","columnCount":2} -->`,
          ind + `<!-- end:c${Math.max(0, i - 1)}c${Math.max(0, i - 1)}c${Math.max(0, i - 1)} -->`,
          ind + `| x <!-- col:k${i} attrs:{"width":120} --> | y |`,
          ind + `> ${inline(r)}\n${ind}> > nested ${word(r)}`,
        ]),
      )
    if (r() < 0.5) lines.push('')
  }
  return lines.join('\n')
}
// The reference server's metadataToWriteSetAttributes.
function metadataOps(metadata) {
  const attrs = Object.entries(metadata)
    .filter((e) => e[1] !== undefined)
    .map(([key, value]) => ({key: [key], value}))
  return attrs.length ? [{type: 'SetAttributes', attrs}] : []
}
function undefinedPaths(v, path) {
  if (v === undefined) return [path]
  if (v && typeof v === 'object') return Object.entries(v).flatMap(([k, x]) => undefinedPaths(x, path + '.' + k))
  return []
}
function digest(bytes) {
  return createHash('sha256').update(bytes).digest('hex')
}
function randomCase(index) {
  const markdown = randomDocument(mulberry32(9000 + index))
  seedRandom(5000 + index)
  const {tree, metadata} = parseMarkdown(markdown)
  const ops = flattenToOperations(tree)
  const rendered = blocksToMarkdown({metadata, content: markdownBlockNodesToHMBlockNodes(tree)})
  const holes = undefinedPaths(ops, '')
  if (holes.length) console.log('undefined in ops', JSON.stringify(markdown), holes)
  return {
    markdown,
    randomSeed: 5000 + index,
    ops: holes.length ? null : digest(dagEncode(ops)),
    metadata: digest(dagEncode(metadataOps(metadata))),
    rendered: digest(Buffer.from(rendered, 'utf8')),
  }
}

// Random updates: a random document, then its rendering edited at random (lines changed,
// dropped, added, swapped), diffed as writeDocumentUpdate does; compared by the operations' digest.
function editLines(r, text) {
  const lines = text.split('\n')
  const edits = 1 + Math.floor(r() * 4)
  for (let e = 0; e < edits && lines.length > 1; e++) {
    const at = 1 + Math.floor(r() * (lines.length - 1))
    const kind = Math.floor(r() * 4)
    if (kind === 0) lines[at] = lines[at].replace(/[A-Za-zα-ω]+/, word(r))
    else if (kind === 1) lines.splice(at, 1)
    else if (kind === 2) lines.splice(at, 0, pick(r, ['', '- ' + inline(r), inline(r), '## ' + inline(r)]))
    else if (at + 1 < lines.length) [lines[at], lines[at + 1]] = [lines[at + 1], lines[at]]
  }
  return lines.join('\n')
}
function randomUpdate(index) {
  const r = mulberry32(7000 + index)
  const oldMarkdown = randomDocument(r)
  seedRandom(6000 + index)
  const old = parseMarkdown(oldMarkdown)
  const oldContent = markdownBlockNodesToHMBlockNodes(old.tree)
  const markdown = editLines(r, blocksToMarkdown({metadata: old.metadata, content: oldContent}))
  seedRandom(6500 + index)
  const parsed = parseMarkdown(markdown)
  const oldNodes = oldContent.map((node) => toAPIBlockNode(node))
  const newTree = rebindTableIdentities(
    oldNodes,
    markdownBlockNodesToHMBlockNodes(parsed.tree).map((node) => hmBlockNodeToBlockNode(node)),
  )
  const ops = metadataOps(parsed.metadata).concat(computeReplaceOps(createBlocksMap(oldNodes), newTree))
  // The old blocks are the old Markdown's (its parse is held to the library by the cases above).
  return {
    oldMarkdown,
    oldSeed: 6000 + index,
    oldContent: digest(dagEncode(JSON.parse(JSON.stringify(oldContent)))),
    markdown,
    randomSeed: 6500 + index,
    ops: digest(dagEncode(ops)),
    count: ops.length,
  }
}

// A longer soak (not committed): HM_RANDOM=5000 HM_DOCUMENTS_OUT=/tmp/documents.json node make_vectors.mjs
const RANDOM_DOCUMENTS = Number(process.env.HM_RANDOM || 300)
const RANDOM_UPDATES = Math.round(RANDOM_DOCUMENTS * 0.4)
const DOCUMENTS_OUT = process.env.HM_DOCUMENTS_OUT || new URL('./documents.json', import.meta.url)

const documents = {
  library: '@seed-hypermedia/client@0.0.83',
  updates: Array.from({length: RANDOM_UPDATES}, (_, i) => randomUpdate(i)),
  parse: PARSE_CASES.map((md, i) => caseRecord(md, 100 + i)),
  random: Array.from({length: RANDOM_DOCUMENTS}, (_, i) => randomCase(i)),
  frontmatter: FRONTMATTER_CASES.map((metadata) => ({metadata, rendered: emitFrontmatter(metadata)})),
  document: await documentVectors(),
}
writeFileSync(DOCUMENTS_OUT, JSON.stringify(documents, null, 1) + '\n')
console.log('wrote documents.json')

// ─── Comments ───────────────────────────────────────────────────────────────

// As the reference server's writeCommentCreate: the Markdown as blocks (commentMarkdownToBlocks),
// createComment on the document's version, a reply naming its parent's version and its thread's
// root; the record id by commentRecordIdFromBlob. Date.now is fixed for each comment.
const COMMENT_CASES = [
  {markdown: 'Nice notes! I agree with **the intro**.', randomSeed: 300},
  {markdown: 'A reply with a [link](https://example.com/x) and `code`.', randomSeed: 301, replyTo: 0},
  {markdown: 'A reply to the reply.\n\n- one\n- two\n  - nested', randomSeed: 302, replyTo: 1},
  {markdown: '# Heading in a comment\n\n```js\nlet x = 1\n```\n\n![pic](https://example.com/p.png)\n\n$$\nx^2\n$$', randomSeed: 303},
  {markdown: 'Private aside <hm://z6MkihWCQTrdYSzB7D7VVPKWSAvRBFA6n9eL35fGHJqN2RuD>\n\n\n', randomSeed: 304, visibility: 'Private'},
  {markdown: '1. first\n2. second\n\n> quoted\n\nÜnïcödé 🤖 ~~strike~~ <u>under</u>', randomSeed: 305, replyTo: 0},
]

async function commentVectors(documentVector) {
  const seed = seedBytes('seed-agents hm vector commenter')
  const keyPair = blobs.nobleKeyPairFromSeed(seed)
  const signer = signerOf(keyPair)
  const docId = {uid: documentVector.accountId, path: ['field-notes'], version: null, blockRef: null}
  const docVersion = documentVector.create.version
  const made = []
  const realNow = Date.now
  for (const [i, c] of COMMENT_CASES.entries()) {
    const ts = 1767240000000 + i * 61000
    seedRandom(c.randomSeed)
    const content = markdownBlockNodesToHMBlockNodes(parseMarkdown(c.markdown).tree)
    const parent = c.replyTo === undefined ? undefined : made[c.replyTo]
    Date.now = () => ts
    const input = await createComment(
      {
        content,
        docId,
        docVersion,
        blobs: [],
        replyCommentVersion: parent?.cid,
        rootReplyCommentVersion: parent ? parent.threadRoot || parent.cid : undefined,
        visibility: c.visibility || '',
      },
      signer,
    )
    Date.now = realNow
    const data = input.blobs[0].data
    const digest = await sha256.digest(data)
    const cid = CID.createV1(0x71, digest).toString()
    made.push({
      ...c,
      ts,
      cid,
      recordId: await commentRecordIdFromBlob(data),
      threadRoot: parent ? parent.threadRoot || parent.cid : undefined,
      replyParent: parent?.cid,
      publishKeys: Object.keys(input.blobs[0]),
      data: b64(data),
    })
  }
  // As the reference server's writeCommentUpdate / writeCommentDelete: updateComment and
  // deleteComment on the comment as the server answers it (target, version, thread), Date.now fixed.
  const edits = []
  for (const [i, e] of COMMENT_EDITS.entries()) {
    const ts = 1767250000000 + i * 61000
    const original = made[e.of]
    const base = {
      commentId: original.recordId,
      targetAccount: documentVector.accountId,
      targetPath: '/field-notes',
      targetVersion: docVersion,
      visibility: original.visibility || '',
    }
    Date.now = () => ts
    let input
    if (e.markdown === undefined) {
      input = await deleteComment(base, signer)
    } else {
      seedRandom(e.randomSeed)
      const content = markdownBlockNodesToHMBlockNodes(parseMarkdown(e.markdown).tree)
      input = await updateComment(
        {...base, content, replyParentVersion: original.replyParent || null,
         rootReplyCommentVersion: original.threadRoot || null},
        signer,
      )
    }
    Date.now = realNow
    const data = input.blobs[0].data
    const digest = await sha256.digest(data)
    edits.push({...e, ts, commentId: original.recordId, cid: CID.createV1(0x71, digest).toString(),
                publishKeys: Object.keys(input.blobs[0]), data: b64(data)})
  }
  return {
    seed: hex(seed),
    accountId: blobs.principalToString(keyPair.principal),
    target: {account: documentVector.accountId, path: '/field-notes', version: docVersion},
    comments: made,
    edits,
  }
}

// Updates (markdown) and deletes (none) of the comments above, by index.
const COMMENT_EDITS = [
  {of: 0, markdown: 'Nice notes! I agree with **the intro**, and the end.', randomSeed: 310},
  {of: 1, markdown: 'An edited reply.\n\n- still a list', randomSeed: 311},
  {of: 4, markdown: 'Edited private aside.', randomSeed: 312},
  {of: 2},
  {of: 4},
]

// ─── Drafts ─────────────────────────────────────────────────────────────────

// As the reference server's draft.create then draft.publish of a new document: the draft keeps the
// Markdown's blocks (markdownBlockNodesToHMBlockNodes) and metadata; publishing runs
// writeDocumentCreate on those blocks as JSON, whose operations are the server's
// hmBlockNodesToOperations (copied here: it is the reference server's, not the library's).
function hmBlockNodesToOperations(nodes, parentId = '') {
  const ops = []
  const blockIds = []
  for (const node of nodes) {
    ops.push({type: 'ReplaceBlock', block: node.block})
    blockIds.push(node.block.id)
    if (node.children?.length) ops.push(...hmBlockNodesToOperations(node.children, node.block.id))
  }
  if (blockIds.length > 0) ops.push({type: 'MoveBlocks', blocks: blockIds, parent: parentId})
  return ops
}

const DRAFT_MD = `---
summary: A draft, kept on the server until published
---
# Drafted

Some **bold** and a [link](https://example.com/d).

- one
  - nested
- two

\`\`\`py
print("draft")
\`\`\`
`

async function draftVectors() {
  const seed = seedBytes('seed-agents hm vector doc')
  const keyPair = blobs.nobleKeyPairFromSeed(seed)
  const signer = signerOf(keyPair)
  const account = blobs.principalToString(keyPair.principal)
  seedRandom(909)
  const parsed = parseMarkdown(DRAFT_MD)
  const blocks = markdownBlockNodesToHMBlockNodes(parsed.tree)
  const name = 'Draft notes'
  const metadata = {...parsed.metadata, name}
  const path = '/drafted'
  const ts = 1767241000000
  const ops = metadataOps(metadata).concat(hmBlockNodesToOperations(blocks))
  const genesis = await createGenesisChange(signer)
  const c = createChangeOps({ops, genesisCid: genesis.cid, deps: [genesis.cid], depth: 1, ts: BigInt(ts)})
  const change = await createChange(c.unsignedBytes, signer)
  const ref = await createVersionRef(
    {space: account, path, genesis: genesis.cid.toString(), version: change.cid.toString(), generation: ts, ts},
    signer,
  )
  return {
    seed: hex(seed),
    accountId: account,
    markdown: DRAFT_MD,
    randomSeed: 909,
    name,
    path,
    ts,
    blocks,
    metadata,
    blobs: [blobEntry(genesis.cid, genesis.bytes), blobEntry(change.cid, change.bytes), await refBlob(ref)],
    version: change.cid.toString(),
  }
}

writeFileSync(new URL('./drafts.json', import.meta.url),
              JSON.stringify({library: '@seed-hypermedia/client@0.0.83', draft: await draftVectors()}, null, 1) + '\n')
console.log('wrote drafts.json')

const comments = {
  library: '@seed-hypermedia/client@0.0.83',
  comments: await commentVectors(documents.document),
}
writeFileSync(new URL('./comments.json', import.meta.url), JSON.stringify(comments, null, 1) + '\n')
console.log('wrote comments.json')

// ─── Refs: delete, redirect, fork ───────────────────────────────────────────

// As the reference server's writeDocumentDelete, writeDocumentRedirect and writeDocumentRef (a
// fork): createTombstoneRef, createRedirectRef and createVersionRef, Date.now fixed for each.
async function refVectors(documentVector) {
  const seed = seedBytes('seed-agents hm vector doc')
  const keyPair = blobs.nobleKeyPairFromSeed(seed)
  const signer = signerOf(keyPair)
  const otherSeed = seedBytes('seed-agents hm vector commenter')
  const other = blobs.principalToString(blobs.nobleKeyPairFromSeed(otherSeed).principal)
  const account = documentVector.accountId
  const genesis = documentVector.create.blobs[0].cid
  const version = documentVector.create.version
  const generation = documentVector.create.ts
  const realNow = Date.now
  const at = async (ts, make) => {
    Date.now = () => ts
    try {
      const input = await make()
      const data = input.blobs[0].data
      return {ts, cid: CID.createV1(0x71, await sha256.digest(data)).toString(), data: b64(data)}
    } finally {
      Date.now = realNow
    }
  }
  return {
    seed: hex(seed),
    accountId: account,
    other,
    genesis,
    version,
    generation,
    tombstone: await at(1767250000000, () =>
      createTombstoneRef({space: account, path: '/field-notes', genesis, generation}, signer),
    ),
    redirect: await at(1767250001000, () =>
      createRedirectRef(
        {space: account, path: '/field-notes', genesis, generation, targetSpace: account, targetPath: '/moved-notes'},
        signer,
      ),
    ),
    redirectAway: await at(1767250002000, () =>
      createRedirectRef(
        {space: account, path: '/field-notes', genesis, generation, targetSpace: other, targetPath: '', republish: true},
        signer,
      ),
    ),
    fork: await at(1767250003000, () =>
      createVersionRef({space: account, path: '/moved-notes', genesis, version, generation}, signer),
    ),
  }
}

const refs = {library: '@seed-hypermedia/client@0.0.83', refs: await refVectors(documents.document)}
writeFileSync(new URL('./refs.json', import.meta.url), JSON.stringify(refs, null, 1) + '\n')
console.log('wrote refs.json')
