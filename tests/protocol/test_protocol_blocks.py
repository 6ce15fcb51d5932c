"""The desktop's block tree turned into the Markdown the model reads (protocol/hm/blocks.py)."""
from __future__ import annotations

import pytest

from seed_agents.protocol.hm.blocks import BlockTreeError, check_tree, system_prompt_markdown, to_markdown


def b(kind, text=None, children=None, **block):
    node = {"block": {"id": f"id-{kind}-{text}", "type": kind, **block}}
    if text is not None:
        node["block"]["text"] = text
    if children is not None:
        node["children"] = children
    return node


def test_paragraphs_are_separated_by_blank_lines():
    assert to_markdown([b("Paragraph", "One."), b("Paragraph", "Two\nlines.")]) == "One.\n\nTwo\nlines."


def test_headings_nest_one_level_deeper_under_each_heading():
    tree = [b("Heading", "Role", [b("Paragraph", "You help."),
                                  b("Heading", "Tone", [b("Paragraph", "Be brief.")])]),
            b("Heading", "Rules")]
    assert to_markdown(tree) == "# Role\n\nYou help.\n\n## Tone\n\nBe brief.\n\n# Rules"


def test_list_children_become_lists_and_nest():
    tree = [b("Paragraph", "Steps:", [
        b("Paragraph", "first"),
        b("Paragraph", "second", [b("Paragraph", "a"), b("Paragraph", "b")],
          attributes={"childrenType": "Unordered"}),
        b("Paragraph", "third"),
    ], attributes={"childrenType": "Ordered"})]
    assert to_markdown(tree) == "Steps:\n\n1. first\n2. second\n\n   - a\n   - b\n3. third"


def test_blockquote_and_older_childrentype_on_the_block():
    tree = [b("Paragraph", "Quote:", [b("Paragraph", "to be"), b("Paragraph", "or not")],
              childrenType="Blockquote")]
    assert to_markdown(tree) == "Quote:\n\n> to be\n>\n> or not"


def test_heading_children_in_a_list_keep_their_level():
    tree = [b("Heading", "Checklist", [b("Paragraph", "x"), b("Paragraph", "y")],
              attributes={"childrenType": "Unordered"})]
    assert to_markdown(tree) == "# Checklist\n\n- x\n- y"


def test_code_is_fenced_and_math_image_and_unknown_types():
    tree = [b("Code", "print('```')", attributes={"language": "python"}),
            b("Math", "e^{i\\pi}+1=0"),
            b("Image", "a cat", link="ipfs://bafy"),
            b("Video", link="https://v.example/1"),
            b("Callout", "Careful."),
            b("Paragraph", "")]
    assert to_markdown(tree) == ("````python\nprint('```')\n````\n\n$$\ne^{i\\pi}+1=0\n$$\n\n"
                                 "![a cat](ipfs://bafy)\n\n[Video](https://v.example/1)\n\nCareful.")


def test_system_prompt_markdown_takes_text_or_blocks():
    assert system_prompt_markdown({"systemPrompt": "plain *text*"}) == "plain *text*"
    assert system_prompt_markdown({"systemPrompt": [b("Heading", "Hi")]}) == "# Hi"
    assert system_prompt_markdown({}) == "" and system_prompt_markdown({"systemPrompt": []}) == ""


def test_rendering_is_lenient_with_stored_oddities():
    assert to_markdown([1, {"block": "x"}, b("Paragraph", "kept", children="nope")]) == "kept"
    assert to_markdown("not a tree") == ""


@pytest.mark.parametrize("tree, path", [
    ({"block": {}}, ""),
    ([1], "[0]"),
    ([{"children": []}], "[0].block"),
    ([{"block": {"type": "Paragraph"}}], "[0].block.id"),
    ([{"block": {"id": "a", "type": ""}}], "[0].block.type"),
    ([{"block": {"id": "a", "type": "Paragraph", "text": 5}}], "[0].block.text"),
    ([{"block": {"id": "a", "type": "Paragraph", "attributes": []}}], "[0].block.attributes"),
    ([{"block": {"id": "a", "type": "Paragraph"}, "children": {}}], "[0].children"),
    ([b("Paragraph", "x", [b("Paragraph", "y"), {"block": {"id": "z"}}])], "[0].children[1].block.type"),
])
def test_malformed_trees_name_the_place(tree, path):
    with pytest.raises(BlockTreeError) as info:
        check_tree(tree)
    assert info.value.path == path


def test_depth_is_bounded():
    tree: list = [b("Paragraph", "leaf")]
    for _ in range(70):
        tree = [b("Paragraph", "x", tree)]
    with pytest.raises(BlockTreeError) as info:
        check_tree(tree)
    assert "deeper than 64" in str(info.value)
    assert to_markdown(tree).count("x") == 64   # rendering stops at the same depth


def test_inline_annotations_render_as_the_reference_renders_them():
    # The desktop's prompt editor for "Cite **sources**, see [the guide](https://g.example) 🙂 `x`":
    # offsets in UTF-16 code units (the emoji counts two), as the reference's applyAnnotations reads them.
    text = "Cite sources, see the guide \U0001F642 x _y_"
    tree = [b("Paragraph", text, annotations=[
        {"type": "Bold", "starts": [5], "ends": [12]},
        {"type": "Link", "starts": [18], "ends": [27], "link": "https://g.example"},
        {"type": "Code", "starts": [31], "ends": [32]},
        {"type": "Unknown", "starts": [0], "ends": [4]},
        {"type": "Italic", "starts": "bad"},
    ]), b("Heading", "Tone  and style", annotations=[{"type": "Italic", "starts": [0], "ends": [4]}]),
        b("Paragraph", "see \ufffc", annotations=[{"type": "Embed", "starts": [4], "ends": [5], "link": "hm://z6Mk/doc"}])]
    assert to_markdown(tree) == ("Cite **sources**, see [the guide](https://g.example) \U0001F642 `x` _y_\n\n"
                                 "# _Tone_ and style\n\nsee <hm://z6Mk/doc>")
