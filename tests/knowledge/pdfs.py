"""Small PDF files for tests: one with a text layer (each line a text show), one without."""

from __future__ import annotations


def _pdf(objects: list[bytes]) -> bytes:
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def text_pdf(lines: list[str]) -> bytes:
    """A one-page PDF whose text layer holds ``lines`` (ASCII), one under the other."""
    shows = b"".join(
        b"BT /F1 11 Tf 50 %d Td (%s) Tj ET\n"
        % (
            780 - 14 * i,
            line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode(),
        )
        for i, line in enumerate(lines)
    )
    return _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
            b"<< /Length %d >>\nstream\n" % len(shows) + shows + b"\nendstream",
        ]
    )


def scanned_pdf() -> bytes:
    """A one-page PDF with nothing but a drawn rectangle: no text layer."""
    draw = b"0 0 1 rg 100 100 200 200 re f\n"
    return _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
            b"<< /Length %d >>\nstream\n" % len(draw) + draw + b"\nendstream",
        ]
    )
