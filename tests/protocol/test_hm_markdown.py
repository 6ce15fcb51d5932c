"""Markdown ⇄ Seed blocks equal @seed-hypermedia/client's (tests/hm_vectors/documents.json):
parseMarkdown's tree and metadata, flattenToOperations, the API node shape, blocksToMarkdown and
emitFrontmatter, case by case."""

from __future__ import annotations

import hashlib
import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.hm import hm_blobs
from seed_agents.protocol.hm import hm_markdown as md

from tests.hm_vectors import block_ids, load

DOCUMENTS = load("documents")
GENESIS = hm_blobs.genesis_blob(bytes(32)).cid


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _plain(value):
    return json.loads(json.dumps(value))


@pytest.mark.parametrize("case", DOCUMENTS["parse"], ids=lambda c: repr(c["markdown"][:40]))
def test_markdown_to_blocks_and_back_equal_the_library(case):
    tree, metadata = md.parse_markdown(case["markdown"], block_ids(case["randomSeed"]))
    assert _plain(tree) == case["tree"]
    assert metadata == case["metadata"]
    assert _plain(md.flatten_to_operations(tree)) == case["ops"]
    assert _plain(md.to_hm_nodes(tree)) == case["content"]
    assert md.blocks_to_markdown(metadata, case["content"]) == case["rendered"]
    # The library's own round trip: the rendered Markdown parses back to the same blocks.
    again, again_meta = md.parse_markdown(case["rendered"], block_ids(case["randomSeed"] + 1000))
    assert _plain(md.to_hm_nodes(again)) == case["reparsedContent"]
    assert again_meta == case["reparsedMetadata"]


@pytest.mark.parametrize("case", DOCUMENTS["frontmatter"], ids=lambda c: repr(c["metadata"])[:40])
def test_front_matter_equals_the_library(case):
    assert md.emit_frontmatter(case["metadata"]) == case["rendered"]


def test_annotation_offsets_count_utf16_units_as_javascript_does():
    text, annotations = md.parse_inline("🤖 **bold**")
    assert text == "🤖 bold"
    assert annotations == [{"type": "Bold", "starts": [3], "ends": [7]}]
    assert md.render_inline(text, annotations, True) == "🤖 **bold**"


def test_a_read_document_round_trips_to_the_same_markdown():
    # Whatever blocks_to_markdown writes parses back to the same blocks (ids kept), so reading a
    # document and writing it back unchanged is a no-op.
    vector = DOCUMENTS["document"]["create"]
    rendered = vector["rendered"]
    tree, metadata = md.parse_markdown(rendered, block_ids(1))
    assert md.blocks_to_markdown(metadata, md.to_hm_nodes(tree)) == rendered


def test_random_block_ids_have_the_library_alphabet():
    ids = {md.random_block_id() for _ in range(50)}
    assert len(ids) == 50 and all(len(i) == 8 and set(i) <= set(md.ID_CHARS) for i in ids)


@pytest.mark.parametrize("markdown", ["[" * 20_000, "![" * 10_000, "[a](" * 5_000,
                                      "".join("  " * i + "- x\n" for i in range(200))])
def test_pathological_markdown_is_refused_quickly(markdown):
    # The library rescans from every `[` (quadratic); we stop past a work bound instead of hanging.
    start = time.perf_counter()
    with pytest.raises(md.MarkdownTooComplex):
        md.parse_markdown(markdown)
    assert time.perf_counter() - start < 5


def test_overlapping_styles_from_a_server_cost_a_bounded_time():
    n = 3000  # nested ranges: every segment has every span open
    text = "x" * (2 * n)
    annotations = [{"type": "Link", "link": f"https://x.y/{i}", "starts": [i], "ends": [2 * n - i]} for i in range(n)]
    start = time.perf_counter()
    with pytest.raises(md.MarkdownTooComplex):
        md.render_inline(text, annotations, False)
    assert time.perf_counter() - start < 5


def test_large_ordinary_documents_convert_in_linear_time():
    markdown = "".join(f"## Part {i}\n\nSome **bold** text with a [link](https://x.y/{i}) and `code`.\n\n- a\n- b\n\n"
                       for i in range(1000))
    start = time.perf_counter()
    tree, metadata = md.parse_markdown(markdown)
    rendered = md.blocks_to_markdown(metadata, md.to_hm_nodes(tree))
    assert "Part 999" in rendered
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize("case", DOCUMENTS["random"], ids=lambda c: str(c["randomSeed"]))
def test_random_documents_equal_the_library_by_digest(case):
    # 300 documents drawn from every construct (make_vectors.mjs randomDocument): the DAG-CBOR
    # of the operations and the rendered Markdown hash to the library's.
    tree, metadata = md.parse_markdown(case["markdown"], block_ids(case["randomSeed"]))
    assert _sha(dagcbor.encode(md.flatten_to_operations(tree))) == case["ops"]
    assert _sha(dagcbor.encode(hm_blobs.metadata_operations(metadata))) == case["metadata"]
    assert _sha(md.blocks_to_markdown(metadata, md.to_hm_nodes(tree)).encode()) == case["rendered"]


@pytest.mark.parametrize("case", DOCUMENTS["updates"], ids=lambda c: str(c["randomSeed"]))
def test_random_updates_diff_as_the_library(case):
    # A random document's rendering edited at random, diffed against its blocks
    # (make_vectors.mjs randomUpdate): the change's operations hash to the library's.
    old_tree, _ = md.parse_markdown(case["oldMarkdown"], block_ids(case["oldSeed"]))
    old_content = md.to_hm_nodes(old_tree)
    assert _sha(dagcbor.encode(old_content)) == case["oldContent"]
    base = hm_blobs.DocumentBase(genesis=GENESIS, heads=(GENESIS,), depth=1, content=old_content)
    try:
        _, blobs = hm_blobs.document_blobs(bytes(32), case["markdown"], 1, base=base,
                                           new_id=block_ids(case["randomSeed"]))
    except hm_blobs.NoChanges:
        assert case["count"] == 0
        return
    ops = dagcbor.decode(blobs[0].data)["body"]["ops"]
    assert len(ops) == case["count"]
    assert _sha(dagcbor.encode(ops)) == case["ops"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(["# ", "- ", "1. ", "> ", "```", "$$", "|", "![", "[", "](", ")", "**",
                                           "_", "`", "<!-- id:x -->", "<!-- end:x -->", "\n", "\n\n", "  ", "\t",
                                           "---\n", "name: x\n", "<u>", "</u>", "<br>", "<hm://a>", "\\", "~~"]),
                          st.text(max_size=8)), max_size=40).map("".join))
def test_any_text_converts_or_is_refused_cleanly(markdown):
    try:
        tree, metadata = md.parse_markdown(markdown, block_ids(1))
    except md.MarkdownTooComplex:
        return
    md.flatten_to_operations(tree)
    rendered = md.blocks_to_markdown(metadata, md.to_hm_nodes(tree))
    assert isinstance(rendered, str)
    try:
        hm_blobs.document_blobs(bytes(32), markdown, 1, new_id=block_ids(2))
    except Exception as exc:  # only text that is not valid Unicode cannot become CBOR
        assert "surrogate" in str(exc)
