"""Character cards: `rolecall roles import` of V2/V3 cards (JSON, PNG text chunks) and
`rolecall roles export --format card`; an imported card plays in a world."""

from __future__ import annotations

import base64
import json
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
