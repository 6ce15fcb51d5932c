"""The authored (lambda) tool ABI of the reference (`tool-documents.ts`, `code-exec.ts`
buildLambdaProgram / parseLambdaResult), and the bounds of a sandbox run's output.

A lambda's program is its source with the call's input baked in as a JSON string literal
(`json.dumps` twice: valid in both languages, so no input can escape into code); its return value
comes back on one stdout line marked `__SEED_TOOL_RESULT__`, everything else it printed is its
logs. Python sources define `main(input)` (a coroutine is awaited); TypeScript ones
`export default` a function, imported from a sibling module `tool.<ext>` of the program, so the
source keeps its natural shape.
"""
from __future__ import annotations

import json

LAMBDA_RESULT_PREFIX = "__SEED_TOOL_RESULT__"
MAX_EXEC_OUTPUT_BYTES = 64 * 1024   # stdout and stderr, each (the reference's MAX_EXEC_OUTPUT_BYTES)
MAX_EXEC_TIMEOUT_SECS = 300
TRUNCATED_NOTE = "\n… [output truncated]"


def lambda_runtime(doc: dict) -> str:
    """The sandbox runtime of a lambda document (`typescript` is the default, as the reference)."""
    return "python" if doc.get("runtime") == "python" else "ts"


def lambda_program(runtime: str, source: str, value: object) -> tuple[str, str | None]:
    """(program, module): the program to run, and for TypeScript the source as its sibling module."""
    literal = json.dumps(json.dumps(value, ensure_ascii=False), ensure_ascii=False)
    if runtime == "python":
        return "\n".join([
            source,
            "",
            "import json as __seed_json",
            f"__seed_input = __seed_json.loads({literal})",
            'if not callable(globals().get("main")):',
            '    raise SystemExit("This python tool must define a top-level main(input) function")',
            "__seed_result = main(__seed_input)",
            "import inspect as __seed_inspect",
            "if __seed_inspect.iscoroutine(__seed_result):",
            "    import asyncio as __seed_asyncio",
            "    __seed_result = __seed_asyncio.run(__seed_result)",
            f'print("{LAMBDA_RESULT_PREFIX}" + __seed_json.dumps(__seed_result))',
            "",
        ]), None
    return "\n".join([
        f"const __seedInput = JSON.parse({literal})",
        "const __seedExt = import.meta.url.slice(import.meta.url.lastIndexOf('.') + 1)",
        "const __seedModule = await import(new URL('./tool.' + __seedExt, import.meta.url).href)",
        "const __seedEntry = __seedModule.default",
        'if (typeof __seedEntry !== "function") {',
        '  throw new Error("This TypeScript tool must `export default` a function taking its input")',
        "}",
        "const __seedResult = await __seedEntry(__seedInput)",
        f"console.log({json.dumps(LAMBDA_RESULT_PREFIX)} + JSON.stringify(__seedResult ?? null))",
        "",
    ]), source


def parse_lambda_result(stdout: str) -> tuple[bool, object, str]:
    """(has_result, result, logs) from a lambda run's stdout: the last marked line is the result
    (a marked line that is not JSON means no result), the other lines are logs."""
    lines = stdout.split("\n")
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i]
        if not line.startswith(LAMBDA_RESULT_PREFIX):
            continue
        logs = "\n".join(lines[:i] + lines[i + 1:]).strip()
        try:
            return True, json.loads(line[len(LAMBDA_RESULT_PREFIX):]), logs
        except ValueError:
            return False, None, stdout.strip()
    return False, None, stdout.strip()


def bound_output(data: bytes, limit: int = MAX_EXEC_OUTPUT_BYTES) -> tuple[str, bool]:
    """(text, truncated): at most `limit` bytes of UTF-8 (cut on a character), with a note."""
    if len(data) <= limit:
        return data.decode("utf-8", "replace"), False
    return data[:limit].decode("utf-8", "ignore") + TRUNCATED_NOTE, True


def document_contract(doc: dict, cid: str) -> str:
    """An authored or MCP tool's contract as a read of ~/tools/<name> answers it (the reference's
    toolDocumentContractMarkdown): description, schemas, and a lambda's source."""
    runtime = doc.get("runtime")
    parts = [f"# {doc['name']}", "", f"> {doc['kind']} tool" + (f" · version `{cid}`" if cid else "") + (f" · {runtime}" if runtime else ""),
             "", doc.get("description", ""), "", "## Input schema", "```json",
             json.dumps(doc.get("input") or {}, indent=2, ensure_ascii=False), "```"]
    if doc.get("output"):
        parts += ["", "## Output schema", "```json", json.dumps(doc["output"], indent=2, ensure_ascii=False), "```"]
    if doc.get("source"):
        python = runtime == "python"
        parts += ["", "> Runs in the execute sandbox: " + (
            "`main(input)` receives the validated input and returns the result." if python else
            "the default export receives the validated input and returns the result."),
            "", "## Source", "```" + ("python" if python else "ts"), doc["source"], "```"]
    return "\n".join(parts)
