"""A corpus of the files a repository really receives, generated (nothing of it in git).

Types research data comes in (JSON, CSV, XML, HTML, SVG, PDF, ZIP, gzip, images, text in
UTF-8 and Latin-1, an empty file, a 50 MB file) under the names depositors give them (every
printable ASCII punctuation mark a file name can hold, accents in NFC and in NFD, spaces,
leading dots, 255-byte names, folders 8 deep). Used by ``tests/integration/test_corpus.py``
(the deposit API over moto) and ``tests/e2e/test_corpus.py`` (``ibi deposit`` and the deposit
API on ``ibi local``): each file deposited is fetched back through its persistent URL.

The names a file can never have in an item are in :data:`IMPOSSIBLE` (docs/archive.md).
"""

from __future__ import annotations

import gzip
import io
import json
import random
import string
import struct
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

LARGE_BYTES = 50 * 1024 * 1024

# The corpus's types a browser shows without running anything of the file's: served inline.
# Every other type is an attachment: the active ones (HTML, SVG, XML, JavaScript) above all.
INLINE = frozenset({"text/plain", "text/csv", "application/json", "application/pdf", "image/png"})
ACTIVE = frozenset({"text/html", "image/svg+xml", "application/xml", "text/javascript"})


@dataclass(frozen=True, slots=True)
class CorpusFile:
    path: str  # in the item ("/"-separated)
    data: bytes
    content_type: str  # as declared; what the CLI guesses from the name is the same

    @property
    def inline(self) -> bool:
        return self.content_type.split(";")[0] in INLINE


def _png() -> bytes:
    """A valid 1x1 PNG."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\x2a\x6e\xb5")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def _pdf() -> bytes:
    """A small valid PDF (one empty page), with its cross-reference table."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>",
    ]
    out = io.BytesIO(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    out.seek(0, io.SEEK_END)
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.writelines(b"%010d 00000 n \n" % offset for offset in offsets)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (4, xref))
    return out.getvalue()


def _zip() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("readme.txt", "A dataset in a zip.\n")
        archive.writestr("data/values.csv", "x,y\n1,2\n3,4\n")
    return out.getvalue()


def _csv_rows(count: int) -> str:
    rows = ["station,date,rain_mm"]
    rows += [f"CP{n % 7},2024-01-{n % 28 + 1:02d},{n * 0.25:.2f}" for n in range(count)]
    return "\n".join(rows) + "\n"


def large_data() -> bytes:
    """50 MB of reproducible bytes (no repeat a compressor would shrink)."""
    return random.Random(23).randbytes(LARGE_BYTES)


def typed_files() -> list[CorpusFile]:
    """One file of each type a repository receives."""
    text = "Precipitação em Cachoeira Paulista — dados horários, ±0,1 mm.\n"
    json_text = json.dumps({"title": "Chuva", "values": [0.0, 1.5, None], "ok": True})
    return [
        CorpusFile("data.json", json_text.encode(), "application/json"),
        CorpusFile("data/records.csv", _csv_rows(200).encode(), "text/csv"),
        CorpusFile("data/latin1.csv", "estação,chuva\nSão José,1,5\n".encode("latin-1"), "text/csv"),
        CorpusFile("metadata.xml", b'<?xml version="1.0"?><record><t>x</t></record>\n', "application/xml"),
        CorpusFile("index.html", b"<!doctype html><title>x</title><script>alert(1)</script>", "text/html"),
        CorpusFile("figure.svg", b'<svg xmlns="http://www.w3.org/2000/svg"><script>1</script></svg>', "image/svg+xml"),
        CorpusFile("report.pdf", _pdf(), "application/pdf"),
        CorpusFile("bundle.zip", _zip(), "application/zip"),
        CorpusFile("series.csv.gz", gzip.compress(_csv_rows(50).encode(), mtime=0), "application/gzip"),
        CorpusFile("plot.png", _png(), "image/png"),
        CorpusFile("empty.txt", b"", "text/plain"),
        CorpusFile("readme-utf8.txt", text.encode("utf-8"), "text/plain"),
        CorpusFile("readme-latin1.txt", text.replace("—", "-").encode("latin-1"), "text/plain"),
        CorpusFile("script.js", b"document.title = 'x';\n", "text/javascript"),
        CorpusFile("raw.dat", bytes(range(256)) * 4, "application/octet-stream"),
        CorpusFile("table.tsv", b"a\tb\n1\t2\n", "text/tab-separated-values"),
        CorpusFile("notes.md", b"# Notas\n\n*Dados* brutos.\n", "text/markdown"),
        CorpusFile("data.jsonld", b'{"@context": "https://schema.org/", "@type": "Dataset"}', "application/ld+json"),
    ]  # fmt: skip


# "/" makes folders; "\\" is refused (a Windows separator read as a folder elsewhere).
NAME_PUNCTUATION = [mark for mark in string.punctuation if mark not in "/\\"]

NFC = unicodedata.normalize("NFC", "café")
NFD = unicodedata.normalize("NFD", "café")


def _name_of_bytes(total: int, unit: str, ending: str) -> str:
    """A name of exactly ``total`` bytes of UTF-8: ``unit`` repeated, then ``ending``."""
    width = len(unit.encode())
    count, rest = divmod(total - len(ending.encode()), width)
    return unit * count + "x" * rest + ending


def named_files() -> list[CorpusFile]:
    """Small text files under names depositors give (the bytes name the file)."""
    names = [f"mark {index:02d} a{mark}b.txt" for index, mark in enumerate(NAME_PUNCTUATION)]
    names += [
        f"nfc-{NFC}.txt",
        f"nfd-{NFD}.txt",
        "two  spaces and a tab-less name .txt",
        " leading space.txt",
        "trailing space.txt ",
        ".hidden",
        "..two-leading-dots.txt",
        ".config/settings.ini",
        _name_of_bytes(255, "n", ".txt"),
        _name_of_bytes(255, "é", ".txt"),
        "d1/d2/d3/d4/d5/d6/d7/d8/deep.txt",
        "d1/d2/d3/d4/d5/d6/d7/d8/also%20deep; v=1 #2 ?x&y+z.txt",
        "per%cent%2Fnot-a-folder%25.txt",
        "ação/ünïcödé 日本語.txt",
        "x?versionId=1.txt",
    ]
    return [CorpusFile(name, f"file: {name}\n".encode(), _text_type(name)) for name in names]


def _text_type(name: str) -> str:
    """What a depositor's tool says a small text file is: by its extension (``.txt``)."""
    return "text/plain" if name.endswith(".txt") else "application/octet-stream"


def corpus(*, large: bool = True) -> list[CorpusFile]:
    """Every file of the corpus (``large``: with the 50 MB one)."""
    files = typed_files() + named_files()
    if large:
        files.append(CorpusFile("large/50MB.bin", large_data(), "application/octet-stream"))
    return files


# What no item can hold, and why (the deposit API answers 400 naming the file).
IMPOSSIBLE = {
    "back\\slash.txt": "a backslash, a folder separator elsewhere",
    "control\x01char.txt": "a control character",
    "line\nbreak.txt": "a control character",
}


def write(files: list[CorpusFile], root: Path) -> Path:
    """The corpus as a directory tree under ``root`` (what ``ibi deposit DIR`` reads)."""
    for file in files:
        target = root.joinpath(*file.path.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(file.data)
    return root


def persistent_path(ibi: str, path: str) -> str:
    """``/<ibi>/<path>``, each character a URL cannot carry percent-encoded."""
    return f"/{ibi}/{quote(path, safe='/')}"
