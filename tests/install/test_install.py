"""rolecall as a user installs it: ``pip install`` of the checkout into a fresh venv.

One venv for the whole test session. Nothing is downloaded: rolecall is installed with
``--no-deps --no-index --no-build-isolation`` and its dependencies are seen through a
``.pth`` line naming this test environment's site-packages (what ``--system-site-packages``
does for a system interpreter). Every command runs from a folder that is not the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Installed:
    venv: Path
    site: Path
    work: Path  # an empty folder away from the checkout, the commands' working directory

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def run(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "ROLECALL_HOME": str(self.work / "home")}
        env.pop("PYTHONPATH", None)
        return subprocess.run(
            list(args),
            cwd=cwd or self.work,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def pip_install(self, project: Path) -> None:
        done = self.run(
            str(self.python),
            *("-m", "pip", "install", "--quiet", "--disable-pip-version-check"),
            *("--no-deps", "--no-index", "--no-build-isolation", "--ignore-installed"),
            str(project),
        )
        assert done.returncode == 0, done.stderr


def _copy_checkout(dest: Path) -> Path:
    """The files a build reads, so the build writes nothing into the checkout."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, dest / name)
    shutil.copytree(
        ROOT / "src",
        dest / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
    )
    return dest


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("install")
    venv = base / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60
    )
    found = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_path('purelib'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    site = Path(found.stdout.strip())
    # this environment's packages (rolecall's dependencies, pip, setuptools) after its own
    (site / "_deps.pth").write_text(sysconfig.get_path("purelib") + "\n", encoding="utf-8")
    work = base / "elsewhere"
    work.mkdir()
    done = Installed(venv=venv, site=site, work=work)
    done.pip_install(_copy_checkout(base / "checkout"))
    return done


def test_installed_package_is_the_wheel_not_the_checkout(installed: Installed) -> None:
    where = installed.run(str(installed.python), "-c", "import rolecall; print(rolecall.__file__)")
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(installed.site)
    licenses = list(installed.site.glob("rolecall-*.dist-info/licenses/LICENSE"))
    assert len(licenses) == 1
    assert "MIT License" in licenses[0].read_text("utf-8")
    meta = next(installed.site.glob("rolecall-*.dist-info/METADATA")).read_text("utf-8")
    assert "License-Expression: MIT" in meta
    assert "Classifier: Typing :: Typed" in meta


def test_shipped_worlds_run_from_any_folder(installed: Installed) -> None:
    rolecall = str(installed.venv / "bin" / "rolecall")
    listed = installed.run(rolecall, "worlds", "list")
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines()]
    assert {"classroom", "debate", "study", "tutoring"} <= set(names)
    assert all(line.split()[1] == "shipped" for line in listed.stdout.splitlines())

    ran = installed.run(rolecall, "run", "classroom", "--json", "--max-turns", "2")
    assert ran.returncode == 0, ran.stderr
    stops = [r for r in map(json.loads, ran.stdout.splitlines()) if r["type"] == "stop"]
    assert stops[0]["reason"] == "max_turns"

    # the study world's document is package data too
    valid = installed.run(rolecall, "worlds", "validate", "study")
    assert valid.returncode == 0, valid.stderr


def test_python_dash_m_rolecall(installed: Installed) -> None:
    version = installed.run(str(installed.python), "-m", "rolecall", "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("rolecall ")
    missing = installed.run(str(installed.python), "-m", "rolecall", "run", "no-such-world")
    assert missing.returncode == 2
    assert "no world 'no-such-world'" in missing.stderr


def test_local_world_wins_over_the_shipped_one(installed: Installed, tmp_path: Path) -> None:
    folder = tmp_path / "worlds" / "classroom"
    folder.mkdir(parents=True)
    (folder / "world.yaml").write_text(
        textwrap.dedent(
            """\
            name: classroom
            title: My own classroom
            model: scripted
            roles:
              - id: solo
                script: ["mine {n}"]
            flow:
              steps:
                - {id: say, speaker: solo}
            """
        ),
        encoding="utf-8",
    )
    rolecall = str(installed.venv / "bin" / "rolecall")
    listed = installed.run(rolecall, "worlds", "list", cwd=tmp_path)
    lines = {line.split()[0]: line for line in listed.stdout.splitlines()}
    assert lines["classroom"].split()[1] == "local"
    assert "My own classroom" in lines["classroom"]
    assert "instead of the shipped one" in lines["classroom"]
    assert lines["debate"].split()[1] == "shipped"

    ran = installed.run(rolecall, "run", "classroom", "--json", "--max-turns", "1", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    texts = [
        r["content"] for r in map(json.loads, ran.stdout.splitlines()) if r["type"] == "message"
    ]
    assert texts == ["mine 1"]


def _docs_block(text: str, lang: str) -> str:
    """The first fenced code block of language ``lang`` in a Markdown text."""
    start = text.index(f"```{lang}\n") + len(lang) + 4
    return text[start : text.index("```", start)]


def test_a_model_plugin_from_the_docs_installs_and_runs(installed: Installed) -> None:
    docs = (ROOT / "docs" / "plugins.md").read_text("utf-8")
    plugin = installed.work / "rolecall-echo"
    plugin.mkdir()
    (plugin / "pyproject.toml").write_text(_docs_block(docs, "toml"), encoding="utf-8")
    (plugin / "rolecall_echo.py").write_text(_docs_block(docs, "python"), encoding="utf-8")
    installed.pip_install(plugin)
    rolecall = str(installed.venv / "bin" / "rolecall")

    listed = installed.run(rolecall, "models")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()}
    assert "plugin rolecall-echo 0.1.0" in rows["echo[/...]"]
    assert "rolecall_echo:EchoModel" in rows["echo[/...]"]

    world = installed.work / "echo.yaml"
    world.write_text(
        "name: echo\nmodel: echo/loud\nroles: [{id: alice}, {id: bob}]\n"
        "flow: {steps: [{id: one, speaker: alice}, {id: two, speaker: bob}]}\n",
        encoding="utf-8",
    )
    ran = installed.run(rolecall, "run", str(world), "--json")
    assert ran.returncode == 0, ran.stderr
    texts = [
        r["content"] for r in map(json.loads, ran.stdout.splitlines()) if r["type"] == "message"
    ]
    assert texts == ["ALICE (LOUD) SPEAKS ON TURN 1.", "BOB (LOUD) SPEAKS ON TURN 2."]
