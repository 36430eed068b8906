"""TSV / CSV rows counted from a file's bytes, without parsing a cell: the progress
display's total (``readers.count_records(exact=False)``), framed as ``readers`` frames rows.

Measured (a loaded 2-core machine): 200 MB of VLMEvalKit-style TSV (base64 images inline)
in ~0.4 s, where re-parsing it with the csv module takes ~7 s; 200,000 short CSV rows in
~0.15 s (~2 s re-parsed).
"""

from __future__ import annotations

import codecs
from typing import IO

CHUNK = 1 << 20


class RowCount:
    """TSV / CSV rows counted from physical lines, framed as the reader frames them where
    quotes are balanced: a line with an odd number of ``"`` opens a quoted cell that the next
    such line closes; blank lines are no row; a line past ``limit`` bytes is one; a quote
    still open after ``max_row_lines`` lines (or at the end) is one bad row and its other lines
    rows again, as the reader resumes. A ``"`` inside an unquoted cell (a character to the
    csv module) makes it an estimate, not a count."""

    def __init__(self, limit: int, max_row_lines: int) -> None:
        self.limit = limit
        self.max_row_lines = max_row_lines
        self.rows = 0
        self.spanned = 0  # lines of the row whose quote is open

    def line(self, quotes: int, size: int, blank: bool) -> None:
        long = size > self.limit
        odd = not long and quotes % 2 == 1
        if self.spanned:
            self.spanned += 1
            if odd or long:
                self.rows, self.spanned = self.rows + 1, 0
            elif self.spanned > self.max_row_lines:
                self.rows, self.spanned = self.rows + self.spanned, 0
        elif odd:
            self.spanned = 1
        elif long or not blank:
            self.rows += 1


def count_rows(handle: IO[bytes], limit: int, max_row_lines: int) -> int:
    """The data rows of a TSV / CSV file (see ``RowCount``), read in 1 MiB chunks and split
    at ``\\n``, ``\\r\\n`` and ``\\r`` in C: no line is joined, no cell decoded.

    >>> import io
    >>> count_rows(io.BytesIO(b'q,a\\r\\n1,"x\\ny"\\n\\n2,b\\r3,c'), 100, 100)
    3
    """
    count = RowCount(limit, max_row_lines)
    quotes = size = 0
    blank, cr, first = True, False, True
    while chunk := handle.read(CHUNK):
        if first:
            chunk, first = chunk.removeprefix(codecs.BOM_UTF8), False
        if cr and chunk.startswith(b"\n"):  # a "\r\n" cut between two chunks
            chunk = chunk[1:]
        cr = chunk.endswith(b"\r")
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *ended, rest = chunk.split(b"\n")
        for piece in ended:
            count.line(quotes + piece.count(b'"'), size + len(piece) + 1,
                       blank and (not piece or piece.isspace()))
            quotes, size, blank = 0, 0, True
        quotes += rest.count(b'"')
        size += len(rest)
        blank = blank and (not rest or rest.isspace())
    if size:
        count.line(quotes, size, blank)
    return max(0, count.rows + count.spanned - 1)  # the header is no record
