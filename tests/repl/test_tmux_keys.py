"""The toolbar and the keys on a real terminal (tmux at 120x40)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.repl.test_tmux import TMUX, Terminal, stored, terminal, toolbar

__all__ = ["terminal"]  # the fixture
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not on PATH")


def test_the_toolbar_keeps_status_tokens_and_hint_at_120_columns(
    terminal: Callable[[], Terminal],
) -> None:
    t = terminal()
    t.start("classroom", "--mode", "step")
    t.ready()
    for n in range(1, 8):  # seven steps: the counters outgrow the line
        t.key("Enter")
        t.wait_for(lambda s, n=n: s.count("  ↑") >= n and "│ ready │" in toolbar(s), timeout=30)
    t.type("@student are you following?")  # an interjection: not a step
    t.key("Enter")
    t.wait_for(lambda s: "interjection" in s and "│ ready │" in toolbar(s), timeout=30)
    bar = toolbar(t.screen())
    assert bar.rstrip().endswith("Enter: next turn · /help"), bar
    assert "│ ready │" in bar and "↑" in bar and "↓" in bar
    assert "interjection×" not in bar
    t.type("/flow")
    t.key("Enter")
    t.wait_for("(and 1 interjection)")
    t.type("/model offline")
    t.key("Enter")
    t.wait_for(lambda s: "model offline" in toolbar(s))


def test_esc_closes_the_menu_and_esc_then_a_command_is_a_command(
    terminal: Callable[[], Terminal],
) -> None:
    t = terminal()
    t.start("worlds/panel")
    t.ready()
    t.type("@")
    t.wait_for("Dr. Amara Osei")
    t.key("Escape")
    t.wait_for(lambda s: "Dr. Amara Osei" not in s)
    t.key("C-u")
    t.key("Escape")
    t.type("/agents")  # at once after Esc
    t.key("Enter")
    screen = t.wait_for("@historian")
    assert "human: agents" not in screen and "→ human" not in screen  # not a message


def test_ctrl_c_twice_quits_only_within_its_window_and_ctrl_d_asks_during_a_reply(
    terminal: Callable[[], Terminal],
) -> None:
    t = terminal()
    t.start("worlds/panel", "--stream", "full", env={"ROLECALL_STREAM_DELAY": "0.2"})
    t.ready()
    t.key("C-c")
    t.wait_for("press Ctrl-C again to quit, within 2 s")
    time.sleep(2.5)
    t.key("C-c")  # too late: armed again, not quit
    screen = t.wait_for(lambda s: s.count("press Ctrl-C again to quit, within 2 s") == 2)
    assert "EXIT=" not in screen
    t.type("@historian what happened in Chicago in 1995?")
    t.key("Enter")
    t.wait_for(lambda s: "historian → human" in s and "│ " in s)
    t.key("C-d")  # during the reply: asks
    screen = t.wait_for("a reply is being generated: Ctrl-D again within 2 s quits")
    assert "EXIT=" not in screen
    t.key("C-d")
    t.wait_for("EXIT=0")
    ((_, state, reason),) = stored(t.home)
    assert (state, reason) == ("paused", "quit")


def test_resume_right_after_pause_keeps_the_reply_going(terminal: Callable[[], Terminal]) -> None:
    t = terminal()
    t.start("worlds/panel", env={"ROLECALL_STREAM_DELAY": "0.05"})
    t.ready()
    t.type("@all how should a city start?")
    t.key("Enter")
    t.wait_for(lambda s: "→ human" in s and "│ " in s)
    t.type("/pause")
    t.key("Enter")
    t.wait_for(lambda s: "pausing…" in toolbar(s))
    t.type("/resume")
    t.key("Enter")
    t.wait_for("not pausing: it goes on after the current turn")
    screen = t.wait_for(lambda s: "│ ready │" in toolbar(s), timeout=40)
    assert screen.count("→ human") == 4  # all four answered: nothing paused
    assert "already running" not in screen and "paused (manual)" not in screen


def test_run_in_a_chat_world_while_replies_stream_says_it_is_a_chat(
    terminal: Callable[[], Terminal],
) -> None:
    t = terminal()
    t.start("worlds/panel", env={"ROLECALL_STREAM_DELAY": "0.05"})
    t.ready()
    t.type("@all how should a city start?")
    t.key("Enter")
    t.wait_for(lambda s: "→ human" in s and "│ " in s)
    t.type("/run")
    t.key("Enter")
    screen = t.wait_for("this world has no flow to run: it is a chat")
    assert "already running; /pause or /stop it" not in screen


def test_a_finished_flow_does_not_offer_the_next_turn(terminal: Callable[[], Terminal]) -> None:
    t = terminal()
    t.start("worlds/tutoring", "--mode", "step")
    t.ready()
    t.type("/run")
    t.key("Enter")
    screen = t.wait_for(lambda s: "finished (flow_end)" in toolbar(s), timeout=40)
    screen = t.wait_for("the session has finished · /load another · /quit")
    assert "Enter runs the next turn" not in screen.splitlines()[-3]
    assert "Enter: next turn" not in toolbar(screen)


def test_the_reply_queue_in_the_toolbar_skip_and_a_new_message_after_pause(
    terminal: Callable[[], Terminal],
) -> None:
    t = terminal()
    t.start("worlds/panel", env={"ROLECALL_STREAM_DELAY": "0.05"})
    t.ready()
    t.type("@all how should a city start?")
    t.key("Enter")
    t.wait_for(lambda s: "3 due · next: " in toolbar(s))  # one answering, three queued
    t.type("/skip")
    t.key("Enter")
    screen = t.wait_for("dropped 3 replies still due")
    t.wait_for(lambda s: "│ ready │" in toolbar(s), timeout=30)
    assert t.screen().count("→ human") == 1  # only the reply that was streaming

    t.type("@all and who pays for it?")
    t.key("Enter")
    t.wait_for(lambda s: "3 due · next: " in toolbar(s))
    t.type("/pause")
    t.key("Enter")
    t.wait_for(lambda s: "paused (manual)" in toolbar(s) and "3 due" in toolbar(s), timeout=30)
    t.type("@historian what happened in Chicago in 1995?")
    t.key("Enter")
    screen = t.wait_for("dropped 3 replies still due to your earlier message")
    screen = t.wait_for(lambda s: "│ ready │" in toolbar(s), timeout=30)
    assert screen.count("→ human") == 3  # 1, then 1 before the pause, then the historian
    assert screen.rstrip().splitlines()[-1].count("due") == 0


def test_cjk_text_is_wrapped_by_its_width_on_screen(terminal: Callable[[], Terminal]) -> None:
    from wcwidth import wcswidth

    t = terminal()
    t.start("worlds/panel")
    t.ready()
    cjk = "光合作用是植物利用光能把二氧化碳和水转化为葡萄糖和氧气的过程。" * 6
    t.type("@historian " + cjk)
    t.key("Enter")
    t.wait_for(lambda s: "historian → human" in s and "│ ready │" in toolbar(s), timeout=30)
    t.type("/history --role human")
    t.key("Enter")
    marker = "› /history --role human"
    screen = t.wait_for(lambda s: marker in s and "光合作用" in s[s.rindex(marker) :])
    history = screen[screen.rindex(marker) :]
    lines = [line for line in history.splitlines() if "光" in line or "。" in line]
    assert len(lines) >= 3  # wrapped over several lines ...
    assert max(wcswidth(line) for line in lines) <= 120  # ... none wider than the terminal
