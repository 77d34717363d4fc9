"""What a line typed at the REPL's prompt does (repl.md).

An empty line runs the next turn in step mode (when one is due); ``//text`` sends
``/text`` as a message; ``/whisper @a text`` sends a message to some agents only
(audiences.md); any other ``/command`` is carried out by the :class:`CommandRunner`;
anything else is a message to the agents, whose replies run in the background.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from rolecall.cli.repl.commands import (
    CommandError,
    LoadRequest,
    SlashCommand,
    parse_command,
    parse_whisper,
)
from rolecall.cli.repl.runner import LoopControl
from rolecall.log import get_logger

if TYPE_CHECKING:
    from rolecall.api.session import Session
    from rolecall.cli.repl.display import ReplDisplay
    from rolecall.cli.repl.runner import CommandRunner, Spawner

log = get_logger("rolecall.cli.repl")


async def handle_line(
    text: str,
    *,
    session: Session,
    runner: CommandRunner,
    display: ReplDisplay,
    spawn: Spawner,
    step_mode: bool,
) -> LoopControl | LoadRequest:
    """Carry out ``text`` on ``session``: what the REPL does next (go on, quit, or switch
    to another session). A message's replies are started with ``spawn``."""
    message = text.strip()
    if not message:
        due = runner.driven or session.status.pending
        if step_mode and not session.finished and due:
            return await runner.execute(SlashCommand("next"))
        return LoopControl.CONTINUE
    audience: list[str] | None = None
    if message.startswith("//"):
        message = message[1:]  # a message that starts with "/"
    elif message.split()[0].lower() == "/whisper":  # sent as a message (audiences.md)
        try:
            audience, message = parse_whisper(message.partition(" ")[2])
        except CommandError as exc:
            display.error(str(exc))
            return LoopControl.CONTINUE
        unknown = [a for a in audience if a not in session.world.role_ids]
        if unknown:
            display.error(
                f"/whisper: no agent {', '.join('@' + a for a in unknown)} "
                f"(agents: {', '.join(session.world.role_ids)}); the message was not sent"
            )
            return LoopControl.CONTINUE
        display.note(f"  (whispered: to {', '.join(audience)} only)")
    elif message.startswith("/"):
        from rolecall.errors import RolecallError

        try:
            return await runner.execute(parse_command(message))
        except (CommandError, RolecallError) as exc:
            display.error(str(exc))
        except Exception as exc:
            log.warning("repl_command_failed", command=message.split()[0], exc_info=exc)
            display.error(f"{message.split()[0]} failed: {exc}")
        return LoopControl.CONTINUE
    if session.finished:
        display.warn(
            f"the session has finished ({session.result.stop_reason}); "
            "the message was not sent (/load another session, or start a new chat)"
        )
        return LoopControl.CONTINUE
    st = session.status
    if st.state == "paused" and st.pause_reason == "manual" and st.pending:
        # paused with /pause: the new message supersedes the old question
        dropped = session.drop_replies()
        display.note(
            f"dropped {len(dropped)} repl{'y' if len(dropped) == 1 else 'ies'} still due "
            f"to your earlier message ({', '.join(dropped)}): your new message is answered"
        )
    spawn("message", lambda: session.say(message, audience=audience))
    # let the message go out (stored, its turn started, the request sent) before the
    # next prompt is drawn: drawing it first delayed the request by 7-60 ms under load
    await anyio.lowlevel.checkpoint()
    return LoopControl.CONTINUE
