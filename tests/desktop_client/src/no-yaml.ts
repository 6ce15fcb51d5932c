// Stands in for the `yaml` package, which markdown-to-blocks.ts calls only for a prompt that opens
// with a `---` frontmatter block. The prompts the test sends have none; this keeps 260 KB of YAML
// parser out of the committed bundle.
export function parse(): never {
  throw new Error('YAML frontmatter is not supported by this bundle (tests/desktop_client/src/no-yaml.ts)')
}
