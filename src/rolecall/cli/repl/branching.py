"""``/fork``, ``/retry`` and ``/branch``: the branches of a session in the REPL (repl.md,
Branches). Each returns a :class:`LoadRequest` when the REPL is to switch sessions.

A *branch point* is a message mK at which sessions were forked; the *branches* at mK are
the sessions linked to each other by forks at mK (the parent and its forks there, and
their forks there): they share m1..mK and differ from m(K+1) on. ``/retry`` makes one
more branch at the message before the last answer; ``/branch`` lists the branches at
the current point (the latest point the session was forked at or forked from) and
switches between them.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from rolecall.cli.repl.commands import CommandError, LoadRequest, SlashCommand
from rolecall.errors import UsageError

if TYPE_CHECKING:
    from rolecall.api.session import Session
    from rolecall.cli.palette import Palette
    from rolecall.memory import MemoryFiles
    from rolecall.session.state import TranscriptMessage
    from rolecall.storage.data_store import DataStore
    from rolecall.storage.document import SessionDocument


class BranchingRunner(Protocol):
    """The command runner as the branching commands see it: what they use of
    :class:`rolecall.cli.repl.runner.CommandRunner`."""

    session: Session
    store: DataStore | None
    memory: MemoryFiles | None
    palette: Palette
    echo: Callable[[str], None]
    busy: Callable[[], bool]

    @property
    def driven(self) -> bool: ...

    interactive: bool  # False in piped mode: a fork is not switched to


def _shorten(text: str, limit: int) -> str:
    return textwrap.shorten(text, limit, placeholder="…")


def _needs(runner: BranchingRunner, name: str) -> tuple[DataStore, MemoryFiles]:
    if runner.store is None or runner.memory is None:
        raise CommandError(f"/{name} needs the session store")
    if runner.busy() or runner.session.generating:
        raise CommandError(f"a turn is running: /pause (or wait for it), then /{name}")
    return runner.store, runner.memory


async def _fork(runner: BranchingRunner, name: str, at: str, edit: str | None) -> SessionDocument:
    from rolecall.api.fork import fork_session

    store, memory = _needs(runner, name)
    await runner.session.flush()
    try:
        plan = await fork_session(store, memory, runner.session.session_id, at, edit=edit)
    except UsageError as exc:  # the command line's wording (--at m9) as typed here
        text = str(exc).replace("--at ", f"/{name} ", 1).replace("--edit:", f"/{name}:", 1)
        raise CommandError(text) from None
    return await store.load(plan.new_id)


def _span(at: str) -> str:
    return "m1" if at == "m1" else f"m1..{at}"


async def fork_here(runner: BranchingRunner, cmd: SlashCommand) -> LoadRequest:
    """``/fork mK [TEXT]``: the fork (as ``sessions fork``), then the REPL switches to it."""
    at = cmd.args[0]
    edit = cmd.args[1] if len(cmd.args) > 1 else None
    sid = runner.session.session_id
    doc = await _fork(runner, "fork", at, edit)
    edited = f", {at} edited" if edit is not None else ""
    forked = f"forked {sid} at {at} → {doc.session_id} ({_span(at)}{edited})"
    if runner.interactive:
        forked += (
            f"; switching to the fork · /load {sid} goes back · /branch lists the branches at {at}"
        )
    runner.echo(forked)
    # a human message of a chat: its replies are due in the fork, answered as when it
    # was sent; a flow step's message: that step is undecided, decided now (its hooks,
    # its loop or branch, on the fork's history), so the next turn speaks
    return LoadRequest(doc, f"the fork {doc.session_id}", after=_settle)


async def _settle(session: Session) -> None:
    await session.settle()


def _who(message: TranscriptMessage) -> str:
    return "yours" if message.kind == "human" else f"{message.sender}'s ({message.kind})"


async def retry(runner: BranchingRunner, cmd: SlashCommand) -> LoadRequest:
    """``/retry``: a new branch at the message before the last answer, where the last
    speaker is asked again (one turn); the old answer stays in this session."""
    from rolecall.session.state import PendingReply

    _needs(runner, "retry")
    messages = runner.session.transcript
    if not messages:
        raise CommandError("nothing to retry: no message yet")
    last = messages[-1]
    if last.kind != "agent":
        raise CommandError(
            f"nothing to retry: the last message ({last.id}) is {_who(last)}, not an agent's answer"
        )
    if len(messages) == 1:
        raise CommandError(
            "nothing to retry before m1: the first message cannot be asked again here "
            "(start the world again)"
        )
    sid = runner.session.session_id
    at = messages[-2].id
    doc = await _fork(runner, "retry", at, None)
    if last.reply_to is not None and (last.step_id == "interjection" or not runner.driven):
        # a reply (chat, or an answer to an interjection): it is due again in the branch;
        # a flow step or a mode's turn comes again by itself
        kind = "interjection" if last.step_id == "interjection" else "chat"
        doc.state.pending = [PendingReply(agent=last.sender, message_id=last.reply_to, kind=kind)]
    runner.echo(
        f"asking {last.sender} again in a new branch {doc.session_id} ({_span(at)}); "
        f"{last.id} stays in {sid} · /branch lists the answers"
    )
    return LoadRequest(doc, f"the branch {doc.session_id}", after=_ask_again)


async def _ask_again(session: Session) -> None:
    """Turns until the branch has its new answer: a fork at a flow step's message decides
    that step first (its hooks, the next step), then the next step speaks."""
    before = session.result.messages
    for _ in range(_MAX_TURNS):
        if not await session.step() or session.finished or session.result.messages > before:
            return


_MAX_TURNS = 4  # a decision, the answer; more would be a flow that says nothing


def _point(sid: str, forks: dict[str, tuple[str, str]]) -> str | None:
    """The current branch point: the latest mK this session was forked at or from."""
    points = [at for child, (parent, at) in forks.items() if parent == sid]
    if sid in forks:
        points.append(forks[sid][1])
    numbered = [p for p in points if p[1:].isdigit()]
    return max(numbered, key=lambda p: int(p[1:])) if numbered else None


def _group(sid: str, forks: dict[str, tuple[str, str]], at: str) -> set[str]:
    """The sessions linked to ``sid`` by forks at ``at``."""
    links: dict[str, set[str]] = {}
    for child, (parent, point) in forks.items():
        if point == at:
            links.setdefault(child, set()).add(parent)
            links.setdefault(parent, set()).add(child)
    found, todo = {sid}, [sid]
    while todo:
        for other in links.get(todo.pop(), ()):
            if other not in found:
                found.add(other)
                todo.append(other)
    return found


async def branch(runner: BranchingRunner, cmd: SlashCommand) -> LoadRequest | None:
    """``/branch``: the branches at the current point; ``/branch N|ID`` switches."""
    store = runner.store
    if store is None:
        raise CommandError("/branch needs the session store")
    sid = runner.session.session_id
    await runner.session.flush()
    forks = await store.forks()
    at = _point(sid, forks)
    if at is None:
        runner.echo("no branches here: this session has no forks (/retry or /fork mK makes one)")
        return None
    k = int(at[1:])
    docs = [await store.load(s, with_events=False) for s in _group(sid, forks, at)]
    docs.sort(key=lambda d: (d.created_at, d.session_id))
    if not cmd.args:
        _list(runner, docs, sid, at, k)
        return None
    wanted = cmd.args[0]
    ids = [d.session_id for d in docs]
    if wanted.isdigit():
        if not 1 <= int(wanted) <= len(docs):
            raise CommandError(f"no branch {wanted} at {at}: there are 1..{len(docs)} (/branch)")
        chosen = int(wanted)
    else:
        matches = [i for i, d in enumerate(ids, start=1) if d.startswith(wanted)]
        if len(matches) != 1:
            what = "is ambiguous" if matches else "is not a branch"
            raise CommandError(f"{wanted} {what} at {at} (/branch lists them; /load ID opens any)")
        chosen = matches[0]
    target = ids[chosen - 1]
    if target == sid:
        runner.echo(f"already on branch {chosen} ({sid})")
        return None
    _needs(runner, "branch")
    runner.echo(f"switching to branch {chosen} at {at}: {target}")
    return LoadRequest(await store.load(target), f"branch {chosen}")


def _list(runner: BranchingRunner, docs: list[SessionDocument], sid: str, at: str, k: int) -> None:
    p = runner.palette

    def said(m: TranscriptMessage, limit: int) -> str:
        return f"{m.id} {p.role(m.sender, m.sender)}: {_shorten(m.content, limit)}"

    edited = len({d.messages[k - 1].content for d in docs}) > 1  # a fork with --edit
    lines = [f"branches at {at} ({len(docs)}; what each says {'from' if edited else 'after'} it):"]
    for n, doc in enumerate(docs, start=1):
        mark = "*" if doc.session_id == sid else " "
        shown = [said(doc.messages[k - 1], 30)] if edited else []
        if len(doc.messages) > k:
            shown.append(said(doc.messages[k], 30 if edited else 60))
        else:
            shown.append(p.dim(f"(nothing after {at} yet)"))
        lines.append(f"{mark} {n}  {p.dim(doc.session_id)}  {' → '.join(shown)}")
    lines.append(p.dim("* this session · /branch N switches to branch N (or /branch ID)"))
    runner.echo("\n".join(lines))
