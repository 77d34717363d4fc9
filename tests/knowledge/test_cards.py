"""Character cards: `rolecall roles import` of V2/V3 cards (JSON, PNG text chunks) and
`rolecall roles export --format card`; an imported card plays in a world."""

from __future__ import annotations

import base64
import json
import os
import struct
import zlib
from pathlib import Path

import pytest

from tests.cli.test_run_cli import rolecall

CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Captain Mira Vale",
        "description": "{{char}} commands the airship Kestrel and distrusts {{user}}.",
        "personality": "gruff, loyal, dry humour",
        "scenario": "The Kestrel is caught in a storm over the Shattered Coast.",
        "first_mes": "*grips the wheel* Hold on, {{user}}!",
        "mes_example": "<START>\n{{user}}: Are we safe?\n{{char}}: Safe is for groundlings.",
        "creator_notes": "",
        "system_prompt": "",
        "post_history_instructions": "",
        "alternate_greetings": [],
        "tags": [],
        "creator": "",
        "character_version": "1",
        "extensions": {},
    },
}


def chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def png_with(chunks: list[bytes]) -> bytes:
    """A real 1x1 PNG with extra chunks before its image data."""
    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
    pixels = chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
    return b"\x89PNG\r\n\x1a\n" + header + b"".join(chunks) + pixels + chunk(b"IEND", b"")


def text_chunk(key: str, card: dict[str, object]) -> bytes:
    return chunk(b"tEXt", key.encode() + b"\x00" + base64.b64encode(json.dumps(card).encode()))


def test_a_png_card_imports_and_plays(tmp_path: Path, data_dir: Path) -> None:
    v3 = {**CARD, "spec": "chara_card_v3", "spec_version": "3.0"}
    v3["data"] = {**CARD["data"], "name": "Mira"}  # type: ignore[dict-item]
    png = tmp_path / "mira.png"  # both chunks: ccv3 wins, as SillyTavern reads it
    png.write_bytes(png_with([text_chunk("chara", CARD), text_chunk("ccv3", v3)]))
    result = rolecall("roles", "import", str(png))
    assert result.returncode == 0, result.stderr
    assert "imported Mira as role mira" in result.stdout
    role = (data_dir / "roles" / "mira.yaml").read_text()
    assert "name: Mira" in role
    assert "Mira commands the airship Kestrel and distrusts the user." in role
    assert "Personality: gruff, loyal, dry humour" in role
    assert "Scenario: The Kestrel is caught in a storm over the Shattered Coast." in role
    assert "Hold on, the user!" in role
    assert "Safe is for groundlings." in role and "<START>" not in role

    world = tmp_path / "w"
    world.mkdir()
    (world / "world.yaml").write_text(
        "name: ship\ntopic: the storm\nroles:\n  - template: mira\n"
        "  - id: deckhand\n    model: scripted\n    script: ['Captain, the mast is cracking!']\n"
        "flow:\n  steps:\n    - id: alarm\n      speaker: deckhand\n"
        "    - id: order\n      speaker: mira\n"
    )
    run = rolecall("run", str(world), env={"NO_COLOR": "1"})
    assert run.returncode == 0, run.stderr
    assert "mira → deckhand [step order]" in run.stdout


def test_json_card_import_and_export_round_trip(tmp_path: Path, data_dir: Path) -> None:
    path = tmp_path / "card.json"
    path.write_text(json.dumps(CARD))
    imported = rolecall("roles", "import", str(path), "--id", "vale")
    assert imported.returncode == 0, imported.stderr
    again = rolecall("roles", "import", str(path), "--id", "vale")
    assert again.returncode == 2 and "role 'vale' already exists" in again.stderr
    out = tmp_path / "vale.json"
    exported = rolecall("roles", "export", "vale", "--format", "card", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    card = json.loads(out.read_text())
    assert card["spec"] == "chara_card_v2" and card["spec_version"] == "2.0"
    assert card["data"]["name"] == "Captain Mira Vale"
    assert "Scenario: The Kestrel is caught in a storm" in card["data"]["system_prompt"]
    assert card["data"]["extensions"]["rolecall"]["id"] == "vale"
    # the exported card imports again (a card reader's view of it)
    back = rolecall("roles", "import", str(out), "--id", "vale2")
    assert back.returncode == 0, back.stderr
    built_in = rolecall("roles", "export", "teacher", "--format", "card")
    teacher = json.loads(built_in.stdout)
    assert teacher["data"]["name"] and teacher["data"]["system_prompt"]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b'{"hello": "world"}', "not a character card: no spec (chara_card_v2 or chara_card_v3)"),
        (b'{"spec": "chara_card_v9", "data": {}}', "not a character card: spec 'chara_card_v9'"),
        (b"[1, 2]", "not a character card: the JSON is not an object"),
        (b"name: yaml", "not a character card: not JSON"),
        (b"\xff\xfe\x00garbage", "not a character card: neither JSON text nor a PNG image"),
        (png_with([]), "not a character card: a PNG without a chara or ccv3 text chunk"),
        (
            png_with([chunk(b"tEXt", b"chara\x00!!not base64!!")]),
            "the PNG's chara chunk is not a base64 character card",
        ),
        (
            json.dumps({"spec": "chara_card_v2", "data": {"description": "x"}}).encode(),
            "not a character card: it has no name",
        ),
    ],
)
def test_a_file_that_is_not_a_card_is_refused(
    tmp_path: Path, data_dir: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "thing.png"
    path.write_bytes(content)
    result = rolecall("roles", "import", str(path))
    assert result.returncode == 2
    assert f"{path}: {problem}" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (data_dir / "roles").exists() or not list((data_dir / "roles").iterdir())


# --------------------------------------------------------------- hostile cards
def zlib_bomb(size: int) -> bytes:
    """``size`` bytes of "A" deflated (about a thousandth of it), made a MiB at a time."""
    deflate = zlib.compressobj(9)
    block = b"A" * (1024 * 1024)
    out = [deflate.compress(block) for _ in range(size // len(block))]
    return b"".join(out) + deflate.flush()


# runs the command line in a fresh interpreter, then writes that interpreter's peak
# resident memory (VmHWM: its own, since exec; wait4's ru_maxrss would count the pytest
# worker it was forked from) to the file named first
MEASURED = """\
import sys
from rolecall.cli.main import main
try:
    code = main(sys.argv[2:])
finally:
    with open("/proc/self/status", encoding="ascii") as status:
        peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(sys.argv[1], "w", encoding="ascii") as out:
        out.write(peak)
sys.exit(code)
"""


def run_measured(*args: str) -> tuple[int, str, str, int]:
    """``rolecall ARGS`` as a process: exit code, stdout, stderr and its peak memory in
    KiB (the process's own high-water mark)."""
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        peak = Path(folder) / "peak"
        done = subprocess.run(
            [sys.executable, "-c", MEASURED, str(peak), *args],
            capture_output=True,
            text=True,
            check=False,
        )
        return done.returncode, done.stdout, done.stderr, int(peak.read_text("ascii"))


@pytest.mark.parametrize("kind", ["zTXt", "iTXt"])
def test_a_png_decompression_bomb_is_refused_early(
    tmp_path: Path, data_dir: Path, kind: str
) -> None:
    bomb = zlib_bomb(512 * 1024 * 1024)  # 512 MiB of text in about half a MB
    flags = b"\x00" if kind == "zTXt" else b"\x01\x00\x00\x00"  # compressed, deflate
    body = b"chara\x00" + flags + bomb
    png = tmp_path / "bomb.png"
    png.write_bytes(png_with([chunk(kind.encode(), body)]))
    assert png.stat().st_size < 1024 * 1024
    code, _out, err, peak_kib = run_measured("roles", "import", str(png))
    assert code == 2, err
    assert (
        f"{png}: the PNG's chara chunk: its inflated text is over 8 MiB (a card is kilobytes)"
    ) in err
    assert "Traceback" not in err
    assert peak_kib < 200 * 1024  # never the 512 MiB it would inflate to (old: over 1 GB)
    assert not (data_dir / "roles").exists()


def test_cards_over_the_cap_and_nested_too_deeply_are_refused(
    tmp_path: Path, data_dir: Path
) -> None:
    big = tmp_path / "big.json"
    big.write_text(json.dumps({**CARD, "padding": "x" * (9 * 1024 * 1024)}))
    result = rolecall("roles", "import", str(big))
    assert result.returncode == 2
    assert f"{big}: not a character card: the file is over 8 MiB" in result.stderr

    deep = "[" * 200_000 + "]" * 200_000
    nested = {**CARD, "data": {**CARD["data"], "extensions": "DEEP"}}  # type: ignore[dict-item]
    text = json.dumps(nested).replace('"DEEP"', deep)
    for path in (tmp_path / "deep.json", tmp_path / "deep.png"):
        if path.suffix == ".png":
            raw = b"chara\x00" + base64.b64encode(text.encode())
            path.write_bytes(png_with([chunk(b"tEXt", raw)]))
        else:
            path.write_text(text)
        result = rolecall("roles", "import", str(path))
        assert result.returncode == 2, result.stderr
        assert f"{path}: not a character card: its JSON is nested too deeply" in result.stderr
        assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr


def test_a_name_that_is_not_text_is_refused_and_a_bad_library_file_is_skipped(
    tmp_path: Path, data_dir: Path
) -> None:
    card = tmp_path / "s.json"  # a JSON escape of half a character: a lone surrogate
    card.write_text(json.dumps(CARD).replace("Captain Mira Vale", "s\\udc80x"))
    result = rolecall("roles", "import", str(card))
    assert result.returncode == 2
    assert (
        f"{card}: card field name is not text: a lone surrogate U+DC80 at character 2"
    ) in result.stderr
    assert "Traceback" not in result.stderr
    assert not (data_dir / "roles").exists()  # nothing written

    # what older versions wrote, beside a good role and a file whose name is not UTF-8
    roles = data_dir / "roles"
    roles.mkdir(parents=True)
    (roles / "s-x.yaml").write_text('id: s-x\nname: "s\\uDC80x"\nsystem_prompt: hi\n')
    (roles / "good.yaml").write_text("id: good\nname: Good\nsystem_prompt: hi\n")
    Path(os.fsdecode(bytes(roles) + b"/bad\xff.yaml")).write_text("id: bad\nsystem_prompt: hi\n")
    listed = rolecall("roles", "list")
    assert listed.returncode == 0, listed.stderr
    assert "Traceback" not in listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()[1:] if line.strip()}
    assert "Good" in rows["good"]
    assert "(invalid: line 2, column 1: name: not text: a lone surrogat…)" in rows["s-x"]
    assert "bad\\xff" in listed.stdout  # the file named as it can be shown
    assert (
        f"warning: role file {roles / 's-x.yaml'}: line 2, column 1: name: not text: a "
        "lone surrogate U+DC80"
    ) in listed.stderr
    assert "warning: role file" in listed.stderr and "bad\\xff.yaml" in listed.stderr
    shown = rolecall("roles", "show", "s-x")  # using it is an error naming it
    assert shown.returncode == 2 and f"{roles / 's-x.yaml'}: line 2" in shown.stderr


def test_control_characters_of_a_name_are_shown_not_obeyed(tmp_path: Path, data_dir: Path) -> None:
    card = tmp_path / "evil.json"
    card.write_text(
        json.dumps(CARD).replace("Captain Mira Vale", "Evil\\u001b[31mRed\\u0007\\u0000")
    )
    result = rolecall("roles", "import", str(card), "--id", "evil")
    assert result.returncode == 0, result.stderr
    assert "imported Evil␛[31mRed␇␀ as role evil" in result.stdout
    listed = rolecall("roles", "list")
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith("evil "))
    assert "Evil␛[31mRed␇␀" in row
    for raw in ("\x1b", "\x07", "\x00"):
        assert raw not in result.stdout and raw not in listed.stdout


def fields_of(role_id: str) -> dict[str, object]:
    import yaml

    shown = rolecall("roles", "show", role_id)
    assert shown.returncode == 0, shown.stderr
    data = yaml.safe_load(shown.stdout)
    data.pop("id")
    return dict(data)


def test_a_rolecall_role_survives_export_and_import_unchanged(
    tmp_path: Path, data_dir: Path
) -> None:
    made = rolecall(
        "roles", "create", "tutor", "--name", "Ms. Rivera", "--description", "A patient tutor",
        "--system-prompt", "You explain with analogies.\nAsk one question back.",
        "--style", "warm, brief", "--constraint", "At most 80 words.",
        "--constraint", "One idea per turn.",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    for original in ("tutor", "teacher"):
        want = fields_of(original)
        current = original
        for cycle in (1, 2, 3):  # export, import, compare; and again from the copy
            out = tmp_path / f"{original}-{cycle}.json"
            exported = rolecall("roles", "export", current, "--format", "card", "--out", str(out))
            assert exported.returncode == 0, exported.stderr
            card = json.loads(out.read_text())["data"]
            if original == "tutor":  # other card readers see the persona too
                assert card["post_history_instructions"] == "Style: warm, brief"
                assert "- At most 80 words." in card["system_prompt"]
            current = f"{original}-copy{cycle}"
            imported = rolecall("roles", "import", str(out), "--id", current)
            assert imported.returncode == 0, imported.stderr
            assert fields_of(current) == want, cycle


def test_a_card_edited_elsewhere_is_read_as_any_card(tmp_path: Path, data_dir: Path) -> None:
    out = tmp_path / "teacher.json"
    rolecall("roles", "export", "teacher", "--format", "card", "--out", str(out))
    card = json.loads(out.read_text())
    card["data"]["description"] = "A teacher, edited in another tool."
    out.write_text(json.dumps(card))
    imported = rolecall("roles", "import", str(out), "--id", "edited")
    assert imported.returncode == 0, imported.stderr
    fields = fields_of("edited")
    assert fields["description"] == "A teacher, edited in another tool."
    assert str(fields["system_prompt"]).startswith(card["data"]["system_prompt"])
