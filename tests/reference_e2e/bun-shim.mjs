// Bun.serve / Bun.write / Bun.file on Node's http and fs, so scripted-provider.ts runs unchanged.
import http from 'node:http'
import fs from 'node:fs'
globalThis.Bun = {
  serve({port, hostname, fetch}) {
    const server = http.createServer(async (req, res) => {
      const chunks = []
      for await (const c of req) chunks.push(c)
      const body = Buffer.concat(chunks)
      const request = new Request(`http://${hostname}:${port}${req.url}`, {method: req.method, headers: req.headers,
        body: ['GET', 'HEAD'].includes(req.method) ? undefined : body})
      const response = await fetch(request)
      res.writeHead(response.status, Object.fromEntries(response.headers))
      res.end(Buffer.from(await response.arrayBuffer()))
    })
    server.listen(port, hostname)
    return server
  },
  write(path, text) { fs.writeFileSync(path, text); return Promise.resolve(text.length) },
  file(path) { return {json: async () => JSON.parse(fs.readFileSync(path, 'utf8'))} },
}
