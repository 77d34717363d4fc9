from __future__ import annotations

import compileall
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """Compile rolecall's modules once, before any test starts a ``rolecall`` process.

    The suite starts about a thousand fresh interpreters (``rolecall`` commands, workers,
    servers), and each would otherwise compile the modules it imports from source, about
    0.3 s of CPU apiece: the tests' processes run with ``PYTHONDONTWRITEBYTECODE=1``
    (``tests/faults/__init__.py``, and often the caller's environment), which stops an
    interpreter from writing what it compiled but not from reading what is there. The
    bytecode goes where Python itself puts it (``src/rolecall/**/__pycache__``, ignored by
    git); an up-to-date file is left alone. Under pytest-xdist the controller does it.
    """
    if hasattr(config, "workerinput"):
        return
    compileall.compile_dir(ROOT / "src" / "rolecall", quiet=1)


FULL_TIER = ROOT / "tests" / "full_tier.txt"


def full_tier_modules() -> frozenset[str]:
    """The test modules only the full tier runs (tests/full_tier.txt, written by
    scripts/tiers.py from a measured run): ``./scripts/test --fast`` leaves them out."""
    if not FULL_TIER.exists():
        return frozenset()
    lines = FULL_TIER.read_text("utf-8").splitlines()
    return frozenset(
        line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()
    )


def full_tier_costs() -> dict[str, float]:
    """Each full-tier module's measured seconds (the ``# N s`` tests/full_tier.txt gives it)."""
    costs: dict[str, float] = {}
    if not FULL_TIER.exists():
        return costs
    for line in FULL_TIER.read_text("utf-8").splitlines():
        module, _, note = line.partition("#")
        if module.strip() and note.strip().endswith(" s"):
            try:
                costs[module.strip()] = float(note.strip().removesuffix(" s"))
            except ValueError:
                continue
    return costs


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of a full-tier module ``full`` (``-m "not full"`` is the fast tier).

    Under pytest-xdist the costliest modules are also collected first (their measured
    seconds in tests/full_tier.txt; a module's own tests keep their order): with
    ``--dist loadscope --no-loadscope-reorder`` (./scripts/test) a worker takes the next
    module when it is free, so the long ones start early and the short ones fill the end,
    instead of a long module starting last and one CPU waiting for it alone."""
    modules = full_tier_modules()
    for item in items:
        if item.path.relative_to(ROOT).as_posix() in modules:
            item.add_marker(pytest.mark.full)
    if hasattr(config, "workerinput"):
        costs = full_tier_costs()
        items.sort(key=lambda item: -costs.get(item.path.relative_to(ROOT).as_posix(), 0.0))


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private data directory (ROLECALL_HOME) so no test touches the user's."""
    home = tmp_path / "home"
    monkeypatch.setenv("ROLECALL_HOME", str(home))
    return home
