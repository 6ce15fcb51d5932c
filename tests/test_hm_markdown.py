"""Markdown ⇄ Seed blocks equal @seed-hypermedia/client's (tests/hm_vectors/documents.json):
parseMarkdown's tree and metadata, flattenToOperations, the API node shape, blocksToMarkdown and
emitFrontmatter, case by case."""

from __future__ import annotations

import json

import pytest

from protocol import hm_markdown as md
from tests.hm_vectors import block_ids, load

DOCUMENTS = load("documents")


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
