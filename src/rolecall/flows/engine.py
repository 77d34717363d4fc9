"""The flow state machine (flows.md, Next step and The loop rule), as pure functions.

:func:`after_step` takes the step that just completed and returns an
:class:`StepOutcome`: the next step (or a stop) and the execution-log result, with every
condition evaluation it made. It looks only at the step definition, the per-step
execution counts and O(1) facts of the session.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rolecall.errors import ConditionTimeout
from rolecall.flows.conditions import ConditionContext, CondModel, Evaluation, evaluate
from rolecall.flows.model import Flow, Step
from rolecall.session.state import FlowPointer


@dataclass(frozen=True)
class StepOutcome:
    next_step: str | None  # None: the session finishes
    result: str  # success | loop_continue | loop_break | branch:<goto>
    stop_reason: str | None = None
    stop_detail: str = ""
    evaluations: list[tuple[str, Evaluation]] = field(default_factory=list)  # (context, eval)


class FlowEngine:
    """Decides what runs next; holds only the (immutable) flow and its indexes."""

    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self.steps: dict[str, Step] = {s.id: s for s in flow.steps}
        self._following: dict[str, str | None] = {
            s.id: (flow.steps[i + 1].id if i + 1 < len(flow.steps) else None)
            for i, s in enumerate(flow.steps)
        }

    @property
    def start(self) -> str:
        return self.flow.start_id

    def step(self, step_id: str) -> Step:
        return self.steps[step_id]

    def global_stop(
        self, ctx: ConditionContext
    ) -> tuple[Evaluation | None, list[tuple[str, Evaluation]]]:
        """The first global stop condition that holds, with the evaluations made."""
        evals: list[tuple[str, Evaluation]] = []
        for cond in self.flow.stop:
            ev = _evaluate(cond, ctx, "flow stop condition")
            evals.append(("stop", ev))
            if ev.result:
                return ev, evals
        return None, evals

    def after_step(self, step_id: str, pointer: FlowPointer, ctx: ConditionContext) -> StepOutcome:
        step = self.steps[step_id]
        hit, evals = self.global_stop(ctx)
        if hit is not None:
            return StepOutcome(None, "success", hit.reason, hit.detail, evals)
        result = "success"
        if step.loop is not None:
            n = pointer.exec_counts.get(step_id, 0)
            until_holds = False
            if step.loop.until is not None:
                ev = _evaluate(step.loop.until, ctx, f"loop until: of step '{step_id}'")
                evals.append((f"until:{step_id}", ev))
                until_holds = ev.result
            if not until_holds and n < step.loop.max:
                return StepOutcome(step.loop.to, "loop_continue", evaluations=evals)
            result = "loop_break"
        nxt = step.next
        if isinstance(nxt, str):
            return self._goto(nxt, result, evals)
        if isinstance(nxt, list):
            for branch in nxt:
                if branch.when is not None:
                    ev = _evaluate(branch.when, ctx, f"when: of step '{step_id}'")
                    evals.append((f"when:{step_id}", ev))
                    if not ev.result:
                        continue
                branch_result = result if result == "loop_break" else f"branch:{branch.goto}"
                return self._goto(branch.goto, branch_result, evals)
        following = self._following[step_id]
        if following is None:
            return StepOutcome(None, result, "flow_end", f"after the last step '{step_id}'", evals)
        return StepOutcome(following, result, evaluations=evals)

    @staticmethod
    def _goto(target: str, result: str, evals: list[tuple[str, Evaluation]]) -> StepOutcome:
        if target == "end":
            return StepOutcome(None, result, "flow_end", "next: end", evals)
        return StepOutcome(target, result, evaluations=evals)


def _evaluate(cond: CondModel, ctx: ConditionContext, where: str) -> Evaluation:
    """``evaluate``, with a timed-out regex naming where in the flow its condition is."""
    try:
        return evaluate(cond, ctx)
    except ConditionTimeout as exc:
        raise ConditionTimeout(f"{where} {exc}") from None
