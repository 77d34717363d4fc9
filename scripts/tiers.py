"""Choose the test suite's fast tier from a measured whole run (docs/testing.md).

    .venv/bin/python -m pytest -n 2 --dist loadscope --junitxml=/tmp/run.xml
    .venv/bin/python scripts/tiers.py /tmp/run.xml            # writes tests/full_tier.txt
    .venv/bin/python scripts/tiers.py /tmp/run.xml --budget 200 --dry-run
    .venv/bin/python scripts/tiers.py /tmp/run.xml /tmp/realmodel.xml   # a part measured again

A module's cost is the sum of its tests' times in the JUnit XML of a whole run (setup
and teardown included, so a module-scoped server counts once). The fast tier takes the
cheapest modules first until their summed cost reaches ``--budget`` seconds of worker
time (both pytest workers together: 200 s of it is about 100 s on two CPUs); every
other module is listed in ``tests/full_tier.txt``, which ``tests/conftest.py`` marks
``full`` and ``./scripts/test --fast`` leaves out. A module that is not in the run
(a new one) is in the fast tier until the next measurement. Reports after the first
replace the figures of the modules they hold (some modules measured again, or moved); a
module no longer in the tree is left out.
The figures also order the run: tests/conftest.py hands the costliest modules to the
pytest workers first.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIST = ROOT / "tests" / "full_tier.txt"
HEADER = """\
# Test modules that only the full tier runs (./scripts/test); ./scripts/test --fast leaves
# them out. Written by scripts/tiers.py from a measured whole run: the cheapest modules
# make the fast tier until its budget, these are the rest, costliest first (seconds of
# worker time in that run). Regenerate it after a large change of the suite.
"""


def module_costs(report: Path) -> dict[str, float]:
    """Seconds per test module (``tests/x/test_y.py``) in a JUnit XML report."""
    costs: dict[str, float] = defaultdict(float)
    for case in ET.parse(report).getroot().iter("testcase"):
        classname = case.get("classname") or ""
        parts = classname.split(".")
        # pytest writes "tests.cli.test_run_cli" (or "...test_x.TestClass")
        while parts and not parts[-1].startswith("test_"):
            parts.pop()
        if not parts:
            continue
        costs["/".join(parts) + ".py"] += float(case.get("time") or 0.0)
    return dict(costs)


def split(costs: dict[str, float], budget: float) -> tuple[list[str], list[str]]:
    """The fast tier (cheapest first, within ``budget``) and the rest (costliest first)."""
    fast: list[str] = []
    spent = 0.0
    for module, cost in sorted(costs.items(), key=lambda item: (item[1], item[0])):
        if spent + cost > budget:
            break
        fast.append(module)
        spent += cost
    rest = sorted(set(costs) - set(fast), key=lambda m: (-costs[m], m))
    return fast, rest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("report", type=Path, help="JUnit XML of a whole run")
    parser.add_argument(
        "again", type=Path, nargs="*", help="JUnit XML of modules measured again (they replace)"
    )
    parser.add_argument("--budget", type=float, default=200.0, help="seconds of worker time")
    parser.add_argument("--dry-run", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    costs: dict[str, float] = {}
    for report in (args.report, *args.again):
        measured = module_costs(report)
        if not measured:
            print(f"{report}: no test cases in it", file=sys.stderr)
            return 2
        costs.update(measured)
    gone = sorted(m for m in costs if not (ROOT / m).exists())
    if gone:  # moved or removed since the run
        print(f"not in the tree any more, left out: {', '.join(gone)}", file=sys.stderr)
        costs = {m: c for m, c in costs.items() if m not in gone}
    fast, rest = split(costs, args.budget)
    lines = [f"{module}  # {costs[module]:.1f} s" for module in rest]
    text = HEADER + "\n".join(lines) + "\n"
    spent = sum(costs[m] for m in fast)
    print(
        f"fast tier: {len(fast)} modules, {spent:.0f} s of worker time; "
        f"full tier only: {len(rest)} modules, {sum(costs[m] for m in rest):.0f} s",
        file=sys.stderr,
    )
    if args.dry_run:
        sys.stdout.write(text)
    else:
        LIST.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
