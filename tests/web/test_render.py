"""Message Markdown as the pages render it: every construct renders (never an error),
nothing loads and no markup from a message reaches the page."""

from __future__ import annotations

import pytest

from rolecall.web.render import markdown


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "See ![a chart](https://example.com/chart.png)",
            '<p>See <a href="https://example.com/chart.png" rel="nofollow noopener noreferrer">'
            "a chart</a></p>\n",
        ),
        (  # reference-style, with a title
            '![the chart][c]\n\n[c]: https://example.com/c.png "Figure 1"',
            '<p><a href="https://example.com/c.png" title="Figure 1" rel="nofollow noopener noreferrer">'
            "the chart</a></p>\n",
        ),
        (  # an image in a link: its label only, no link inside a link
            "[![logo](https://example.com/logo.png)](https://example.org)",
            '<p><a href="https://example.org" rel="nofollow noopener noreferrer">logo</a></p>\n',
        ),
        (  # no alt text
            "![](https://example.com/x.png)",
            '<p><a href="https://example.com/x.png" rel="nofollow noopener noreferrer">image</a></p>\n',
        ),
        (  # markup in the alt text is text; an image in an image is its alt text
            "![*big* ![inner](https://example.com/i.png)](https://example.com/o.png)",
            '<p><a href="https://example.com/o.png" rel="nofollow noopener noreferrer">big inner</a></p>\n',
        ),
        ("![x](javascript:alert(1))", "<p>![x](javascript:alert(1))</p>\n"),
        ("![x](data:image/png;base64,AAAA)", "<p>![x](data:image/png;base64,AAAA)</p>\n"),
        (
            "<https://example.com>",
            '<p><a href="https://example.com" rel="nofollow noopener noreferrer">https://example.com</a></p>\n',
        ),
        ("<javascript:alert(1)>", "<p>&lt;javascript:alert(1)&gt;</p>\n"),
        (
            "<div onclick=x>hi</div>\n\nafter",
            "<p>&lt;div onclick=x&gt;hi&lt;/div&gt;</p>\n<p>after</p>\n",
        ),
        (
            '<img src="https://example.com/x.png">',
            "<p>&lt;img src=&quot;https://example.com/x.png&quot;&gt;</p>\n",
        ),
        (  # CommonMark has no tables: the pipes stay text
            "| a | b |\n|---|---|\n| 1 | 2 |",
            "<p>| a | b |\n|---|---|\n| 1 | 2 |</p>\n",
        ),
    ],
)
def test_markdown_constructs_render_safely(text: str, expected: str) -> None:
    assert markdown(text) == expected


def test_an_image_never_loads() -> None:
    html = markdown(
        "![a](https://example.com/a.png) [![b](https://example.com/b.png)](https://e.org)\n\n"
        "![c][r]\n\n[r]: https://example.com/c.png\n\n<img src=x onerror=alert(1)>"
    )
    assert "<img" not in html
    assert html.count("<a ") == 3


def test_cited_message_ids_link_to_the_message() -> None:
    html = markdown("As [m3] and [m12] said; not [x], `[m4]`, [m0] nor [see [m5]](#m5)")
    assert html == (
        '<p>As <a class="cite" href="#m3">[m3]</a> and <a class="cite" href="#m12">[m12]</a>'
        ' said; not [x], <code>[m4]</code>, [m0] nor <a href="#m5">see [m5]</a></p>\n'
    )
