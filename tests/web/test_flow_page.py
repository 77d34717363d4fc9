"""The flow page: a world's flow as a diagram, and loops and stops saved back to world.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rolecall.web.flowview import diagram
from rolecall.world.loader import load_world
from tests.conftest import ROOT
from tests.web.conftest import Server, Site


def test_diagram_has_a_box_per_step_and_every_kind_of_edge() -> None:
    world = load_world(ROOT / "worlds" / "classroom").world
    shapes = diagram(world, runs={"ask": 2, "explain": 2}, current="deepen")
    assert [n.step_id for n in shapes.nodes] == [
        "intro",
        "ask",
        "explain",
        "deepen",
        "review",
        "caveat",
        "close",
    ]
    assert [n.step_id for n in shapes.nodes if n.current] == ["deepen"]
    assert shapes.by_id["explain"].runs == 2
    assert shapes.by_id["ask"].target == "Ms. Rivera"
    loops = [e for e in shapes.edges if e.kind == "loop"]
    assert [(e.source, e.target) for e in loops] == [("explain", "ask")]
    assert loops[0].label == "loop max 2 until {contains: UNDERSTOOD, role: student}"
    replies = {(e.source, e.target) for e in shapes.edges if e.kind == "reply"}
    assert ("deepen", "explain") in replies and ("caveat", "intro") in replies
    assert shapes.stops == ["{contains: FINAL ANSWER}"]


def test_branches_are_labelled_with_their_conditions() -> None:
    world = load_world(ROOT / "worlds" / "review").world
    shapes = diagram(world)
    gotos = [e for e in shapes.edges if e.kind == "goto"]
    assert gotos, "the review world branches"
    assert any(e.label.startswith("when {") for e in gotos)


def test_world_flow_page_draws_the_flow(page: Any, server: Server) -> None:
    page.goto(server.url + "/w/tutoring/flow")
    nodes = page.locator("g.node")
    assert nodes.count() == 4
    assert " → " in (page.locator("#node-explain text.speaker").text_content() or "")
    loop = page.locator("g.edge-loop text")
    assert loop.text_content() == "loop max 4 until {contains: UNDERSTOOD, role: learner}"


def test_session_flow_page_highlights_where_it_stands(
    page: Any, server: Server, site: Site
) -> None:
    page.goto(f"{server.url}/s/{site.ids['tutoring']}/flow")
    assert page.locator("g.node.current").count() == 1
    runs = page.locator("#node-explain text.runs").text_content() or ""
    assert runs.startswith("×")


def test_an_invalid_edit_is_refused_next_to_its_field_and_nothing_is_saved(
    page: Any, server: Server, site: Site
) -> None:
    path = site.worlds / "tutoring" / "world.yaml"
    before = path.read_text()
    page.goto(server.url + "/w/tutoring/flow")
    page.fill("input[name='loop.2.max']", "0")
    page.click("#flow-form button[type=submit]")
    errors = page.locator("input[name='loop.2.max'] ~ .field-error")
    assert "flow.steps[2].loop.max" in errors.first.inner_text()
    assert page.locator("input[name='loop.2.max']").input_value() == "0"  # kept to fix
    assert path.read_text() == before
    page.fill("input[name='loop.2.max']", "3")
    page.fill("#stop-text", "{contains: FINAL}\n{contains: [unclosed")
    page.click("#flow-form button[type=submit]")
    stop_error = page.locator("#stop-text ~ .field-error").first.inner_text()
    assert stop_error.startswith("line 2: not YAML")
    assert path.read_text() == before


def test_a_valid_edit_is_saved_keeping_the_comments(page: Any, server: Server, site: Site) -> None:
    path = site.worlds / "tutoring" / "world.yaml"
    comments = [line for line in path.read_text().splitlines() if line.lstrip().startswith("#")]
    assert comments, "the shipped tutoring world has comments"
    page.goto(server.url + "/w/tutoring/flow")
    page.fill("input[name='loop.2.max']", "6")
    page.fill("input[name='loop.2.until']", "{contains: GOT IT, role: learner}")
    page.fill("#stop-text", "{contains: FINAL ANSWER}\n{flag: done}")
    page.click("#flow-form button[type=submit]")
    page.locator("p.saved").wait_for()
    text = path.read_text()
    for line in comments:
        assert line in text
    world = load_world(path).world
    assert world.flow is not None
    loop = world.flow.steps[2].loop
    assert loop is not None and loop.max == 6
    assert "GOT IT" in (page.locator("g.edge-loop text").text_content() or "")
    assert len(world.flow.stop) == 2


def test_shipped_worlds_are_drawn_but_not_editable(page: Any, server: Server) -> None:
    page.goto(server.url + "/w/classroom/flow")
    assert page.locator("g.node").count() == 7
    assert page.locator("#flow-form").count() == 0


def test_unknown_world_is_not_found(page: Any, server: Server, tmp_path: Path) -> None:
    for name in ("no-such-world", "..%2Fdata"):
        answer = page.goto(f"{server.url}/w/{name}/flow")
        assert answer is not None and answer.status == 404
