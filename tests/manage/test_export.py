"""Markdown and HTML exports of a session document (rolecall.export): pure rendering."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rolecall.export import md_escape, md_quote, select, to_html, to_markdown, to_text, token_table
from rolecall.session.state import Draft, ExecutionRecord, TranscriptMessage
from rolecall.storage.document import SessionDocument, StateDoc

T0 = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
SCRIPT = "<script>alert(1)</script>"
HOSTILE = (
    "# Heading\n---\n```\n<img src=x onerror=alert(2)>\n| a | b |\n1. one\n> quote\n===\n    code"
)


def msg(i: int, sender: str, content: str, **kw: Any) -> TranscriptMessage:
    base: dict[str, Any] = {
        "id": f"m{i}",
        "sender": sender,
        "kind": "human" if sender == "human" else "agent",
        "content": content,
        "ts": T0 + timedelta(seconds=i),
        "input_tokens": 10 * i,
        "output_tokens": i,
    }
    base.update(kw)
    return TranscriptMessage(**base)


def document(state: StateDoc | None = None, **kw: Any) -> SessionDocument:
    messages = [
        msg(1, "teacher", f"Welcome {SCRIPT}", step_id="intro", loop_iteration=0),
        msg(2, "student", "Why is the SKY blue?", target="teacher", reply_to="m1", step_id="ask"),
        msg(3, "teacher", HOSTILE, target="student", reply_to="m2", step_id="explain"),
        msg(4, "student", "and the sky at night?", reply_to="m3", step_id="ask", loop_iteration=1),
        msg(5, "human", "@teacher a question <b>bold</b>", input_tokens=0, output_tokens=0),
    ]
    data: dict[str, Any] = {
        "session_id": "20261122-100000-abc123",
        "created_at": T0,
        "updated_at": T0 + timedelta(minutes=5),
        "world": {
            "name": "classroom",
            "title": "Lesson <i>one</i> & more",
            "topic": "Light & <colour>",
            "roles": [
                {"id": "teacher", "name": "Ms. <Rivera>"},
                {"id": "student", "name": "Sam"},
            ],
        },
        "state": state
        or StateDoc(state="finished", stop_reason="flow_end", stop_detail="after the last step"),
        "messages": messages,
        "execution_log": [
            ExecutionRecord(
                execution_order=1,
                step_id="intro",
                speaker="teacher",
                message_id="m1",
                loop_iteration=0,
                result="success",
                started_at=T0,
                ended_at=T0 + timedelta(seconds=1),
                input_tokens=10,
                output_tokens=1,
            )
        ],
        "drafts": [
            Draft(
                message_id="m6",
                sender="teacher",
                content="half a sentence <script>x</script>",
                reason="cancelled",
                step_id="explain",
                ts=T0 + timedelta(seconds=6),
            )
        ],
    }
    data.update(kw)
    return SessionDocument.model_validate(data)


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend(attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> Tags:
    parser = Tags()
    parser.feed(page)
    parser.close()
    return parser


# --------------------------------------------------------------------- HTML
def test_html_escapes_every_piece_of_content() -> None:
    page = to_html(document())
    assert SCRIPT not in page
    assert "<script" not in page.lower()
    assert "<img" not in page and "<b>" not in page and "<i>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    tags = parse(page)
    assert "script" not in tags.tags and "img" not in tags.tags
    text = "".join(tags.text)
    assert SCRIPT in text  # shown as text
    assert "Lesson <i>one</i> & more" in text
    assert "Ms. <Rivera>" in text


def test_html_is_one_self_contained_page() -> None:
    page = to_html(document())
    assert page.startswith("<!DOCTYPE html>")
    tags = parse(page)
    assert tags.tags.count("style") == 1
    assert not {"script", "link", "img", "iframe", "object"} & set(tags.tags)
    for name, value in tags.attrs:
        if name in ("href", "src"):
            assert value is not None and value.startswith("#"), (name, value)
    assert "http://" not in page and "https://" not in page and "@import" not in page


def test_html_shows_who_answers_whom_steps_loops_status_and_drafts() -> None:
    page = to_html(document())
    text = " ".join("".join(parse(page).text).split())
    assert "m2 student → teacher step ask" in text
    assert "m3 teacher → student step explain" in text
    # no target stored: the target is the sender of the message replied to
    assert "m4 student → teacher step ask loop 1" in text
    assert "loop 0" not in text
    assert "finished: flow_end (after the last step)" in text
    drafts = page.split("<h2>Drafts (incomplete)</h2>")
    assert len(drafts) == 2
    assert ">d1<" in drafts[1] and "m6" not in drafts[1] and "incomplete: cancelled" in drafts[1]
    assert "half a sentence" not in drafts[0]  # not in the transcript


def test_html_token_table_sums() -> None:
    doc = document()
    page = to_html(doc)
    body = page.split('<table class="tokens">')[1].split("</table>")[0]
    cells = re.findall(r'<td class="n">([\d,]+)</td>', body)
    numbers = [int(c.replace(",", "")) for c in cells]
    rows = [numbers[i : i + 4] for i in range(0, len(numbers), 4)]
    *per_role, total = rows
    assert len(per_role) == 3  # teacher, student, human
    for column in range(4):
        assert total[column] == sum(r[column] for r in per_role)
    assert total[0] == 5
    assert total[1] == sum(m.input_tokens for m in doc.messages)
    assert total[2] == sum(m.output_tokens for m in doc.messages)
    assert total[3] == total[1] + total[2]


def test_token_table_rows_follow_the_world_roles() -> None:
    doc = document()
    rows = token_table(doc, doc.messages)
    assert [r.sender for r in rows] == ["teacher", "student", "human"]
    teacher = rows[0]
    assert (teacher.messages, teacher.input_tokens, teacher.output_tokens) == (2, 40, 4)
    assert teacher.name == "Ms. <Rivera>"


# --------------------------------------------------------------------- filters
def test_filter_by_role() -> None:
    doc = document()
    sel = select(doc, role="student")
    assert [m.id for m in sel.messages] == ["m2", "m4"]
    assert sel.drafts == []
    assert sel.describe() == "2 of 5 messages (role student)"
    md = to_markdown(doc, role="student")
    assert re.findall(r"^### (m\d+)", md, re.M) == ["m2", "m4"]
    assert "| student | 2 | 60 | 6 | 66 |" in md
    assert "| **total** | **2** | **60** | **6** | **66** |" in md
    page = to_html(doc, role="student")
    assert re.findall(r'<article class="msg" id="(m\d+)"', page) == ["m2", "m4"]


def test_filter_by_search_is_case_insensitive_and_combines_with_role() -> None:
    doc = document()
    assert [m.id for m in select(doc, search="sky").messages] == ["m2", "m4"]
    assert [m.id for m in select(doc, search="SKY", role="student").messages] == ["m2", "m4"]
    assert [m.id for m in select(doc, search="night", role="teacher").messages] == []
    md = to_markdown(doc, search="Sky")
    assert re.findall(r"^### (m\d+)", md, re.M) == ["m2", "m4"]
    assert '2 of 5 messages (search "Sky")' in md
    text = to_text(doc, search="NIGHT")
    assert "[m4]" in text and "[m2]" not in text
    assert "No messages match." in to_markdown(doc, search="no such text")


# --------------------------------------------------------------------- Markdown
def test_markdown_content_cannot_create_structure() -> None:
    md = to_markdown(document())
    headings = re.findall(r"^(#+ .*)$", md, re.M)
    assert headings == [
        "# Lesson \\<i\\>one\\</i\\> \\& more",
        "## Cast",
        "## Tokens",
        "## Transcript",
        "### m1 · teacher",
        "### m2 · student → teacher",
        "### m3 · teacher → student",
        "### m4 · student → teacher",
        "### m5 · human",
        "## Drafts (incomplete)",
        "### d1 · teacher (incomplete)",
    ]
    lines = md.splitlines()
    assert not any(re.match(r"^\s{0,3}(-{3,}|={3,}|\*{3,}|_{3,})\s*$", line) for line in lines)
    assert not any(line.lstrip().startswith(("```", "~~~", "<")) for line in lines)
    assert not any(_unescaped(line, "<`[") for line in lines)  # no HTML, code or links
    quoted = [line for line in lines if line.startswith(">")]
    assert not any(_unescaped(line[1:], "|>") for line in quoted)  # no tables, nested quotes
    # the hostile message is one blockquote with every line neutralised
    quote = md.split("### m3 · teacher → student")[1].split("###")[0]
    body = [line for line in quote.splitlines() if line.startswith(">")]
    assert body == [
        "> \\# Heading\\",
        "> \\---\\",
        "> \\`\\`\\`\\",
        "> \\<img src=x onerror=alert(2)\\>\\",
        "> \\| a \\| b \\|\\",
        "> 1\\. one\\",
        "> \\> quote\\",
        "> \\===\\",
        "> \u00a0\u00a0\u00a0\u00a0code",
    ]


def test_markdown_shows_status_badges_tokens_and_drafts() -> None:
    md = to_markdown(document())
    assert "- **Status:** finished: flow\\_end (after the last step)" in md
    assert "*step ask · loop 1* · replying to m3" in md
    assert "| teacher | 2 | 40 | 4 | 44 |" in md
    assert "| **total** | **5** | **100** | **10** | **110** |" in md
    drafts = md.split("## Drafts (incomplete)")[1]
    assert "cancelled · *step explain*" in drafts
    assert "> half a sentence \\<script\\>x\\</script\\>" in drafts


def test_status_of_paused_running_and_created_sessions() -> None:
    paused = document(StateDoc(state="paused", pause_reason="interrupted"))
    assert "**Status:** paused (interrupted)" in to_markdown(paused)
    assert "paused (interrupted)" in to_html(paused)
    running = document(StateDoc(state="running"))
    assert "running (not finished" in to_markdown(running)
    created = document(StateDoc(state="created"), messages=[], drafts=[])
    assert "created (nothing has run yet)" in to_html(created)
    assert "No messages yet." in to_markdown(created)


def _unescaped(line: str, chars: str) -> bool:
    """Whether ``line`` has one of ``chars`` not preceded by a backslash escape."""
    i = 0
    while i < len(line):
        if line[i] == "\\":
            i += 2
            continue
        if line[i] in chars:
            return True
        i += 1
    return False


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("#-=+*_>|<`~[]&\\ .1)a\n\t")), max_size=60))
def test_quoted_markdown_is_always_inert(text: str) -> None:
    quoted = md_quote(text)
    if not text.strip():
        assert quoted == "> *(empty)*"
        return
    for line in quoted.splitlines():
        assert line == ">" or line.startswith("> "), line
        body = line[2:]
        assert not _unescaped(body, "`*_[]<>|~&"), line
        assert not re.match(r"^[ \t]", body), line  # no indentation: no code blocks
        assert not re.match(r"^([#+=-]|\d+[.)])", body), line


@given(st.text(max_size=40))
def test_inline_escape_is_one_line(text: str) -> None:
    assert "\n" not in md_escape(text) and "\r" not in md_escape(text)


def test_exports_show_each_roles_cost_and_unknown_stays_unknown() -> None:
    doc = document()
    priced = [
        m.model_copy(update={"cost_usd": 0.0001 * int(m.id[1:])}) if m.kind == "agent" else m
        for m in doc.messages
    ]
    rows = token_table(doc, priced)
    assert [r.cost_usd for r in rows][:2] == [pytest.approx(0.0004), pytest.approx(0.0006)]
    page = to_markdown(doc.model_copy(update={"messages": priced}))
    assert "| teacher | 2 | 40 | 4 | 44 | $0.000400 |" in page
    assert "**$0.001000** |" in page
    html = to_html(doc.model_copy(update={"messages": priced}))
    assert '<td class="n cost">$0.000600</td>' in html

    # one message without a known cost: its role and the total say unknown, never a sum
    priced[2] = priced[2].model_copy(update={"cost_usd": None})
    page = to_markdown(doc.model_copy(update={"messages": priced}))
    assert "| teacher | 2 | 40 | 4 | 44 | unknown |" in page
    assert "**unknown** |" in page
    assert "| student | 2 | 60 | 6 | 66 | $0.000600 |" in page
