"""Corpus files: decompression, UTF-8 line splitting and document reading, all streaming.

A stored corpus is the uploaded file decompressed, byte for byte. Its documents are its
non-blank lines ("text") or the `text_field` of each JSON line ("jsonl"). Lines end at
"\\n" only (a trailing "\\r" is dropped): U+2028 and friends stay inside a document.
"""

import itertools
import json
import zlib
from collections.abc import Iterable, Iterator
from typing import IO, TYPE_CHECKING, cast

import numpy as np
import zstandard

from tokenmill.errors import InvalidCorpus
from tokenmill.store import CHUNK, ChunkReader, ObjectStore

if TYPE_CHECKING:
    from tokenmill.models import Corpus

FORMATS = ("text", "jsonl")
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
NEWLINE = 0x0A
VALIDATE_BYTES = 16 * 1024


def decompressed(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The chunks, gunzipped or un-zstd'ed when their first bytes say so (by content, not name)."""
    chunks = iter(chunks)
    head = b""
    for chunk in chunks:
        head += chunk
        if len(head) >= 4:
            break
    if head.startswith(GZIP_MAGIC):
        yield from _gunzip(head, chunks)
    elif head.startswith(ZSTD_MAGIC):
        yield from _unzstd(head, chunks)
    else:
        if head:
            yield head
        yield from chunks


def _gunzip(head: bytes, chunks: Iterator[bytes]) -> Iterator[bytes]:
    # A gzip file may hold several members one after another (as `cat a.gz b.gz` makes);
    # max_length bounds each output piece, so a small bomb cannot blow up memory.
    decoder, fed = zlib.decompressobj(wbits=47), False
    try:
        for data in itertools.chain([head], chunks):
            while data:
                fed = True
                if out := decoder.decompress(data, CHUNK):
                    yield out
                if decoder.eof:
                    data = decoder.unused_data
                    decoder, fed = zlib.decompressobj(wbits=47), False
                else:
                    data = decoder.unconsumed_tail
        if fed:
            if out := decoder.flush():
                yield out
            if not decoder.eof:
                raise InvalidCorpus("truncated gzip data", field="file")
    except zlib.error as exc:
        raise InvalidCorpus(f"corrupt gzip data: {exc}", field="file") from None


def _unzstd(head: bytes, chunks: Iterator[bytes]) -> Iterator[bytes]:
    # zstandard asks for a file but only reads one (and closes it if it can).
    source = cast(IO[bytes], ChunkReader(itertools.chain([head], chunks)))
    reader = zstandard.ZstdDecompressor().stream_reader(source, read_across_frames=True)
    try:
        while out := reader.read(CHUNK):
            yield out
    except zstandard.ZstdError as exc:
        raise InvalidCorpus(f"corrupt zstd data: {exc}", field="file") from None


class LineSplitter:
    """Turns a stream of UTF-8 byte chunks into lines, failing on invalid UTF-8 with a line number.

    The unfinished line is held as a list of byte pieces and joined once, when its newline
    arrives, so each byte is copied a fixed number of times however long the line (joining
    per chunk is quadratic). Bytes can be split at b"\\n" before decoding: in UTF-8 that byte
    never occurs inside a multi-byte character. With `max_line_bytes`, a longer line is
    refused as soon as it passes the cap: no more than the cap plus one chunk is ever held.
    `feed` decodes the lines; `feed_bytes` only checks them, for counting them as bytes
    (tokenmill/corpora/text_counts.py), and fails the same way, on the same line.
    """

    def __init__(self, max_line_bytes: int | None = None) -> None:
        self.max_line_bytes = max_line_bytes
        self.line_number = 0  # lines returned so far
        self._pieces: list[bytes] = []  # the unfinished line
        self._held = 0  # its length in bytes

    def feed(self, chunk: bytes, final: bool = False) -> list[str]:
        """The lines this chunk completes; with `final`, the unfinished line as well."""
        data = self._complete(chunk, final)
        text = self._decoded(data)
        del data  # the bytes and the text of a long line need not both live on
        lines = text.split("\n")
        if lines[-1] == "":  # the newline ending the data, or an empty stream
            lines.pop()
        self.line_number += len(lines)
        return [line[:-1] if line.endswith("\r") else line for line in lines]

    def feed_bytes(self, chunk: bytes, final: bool = False) -> list[bytes | memoryview]:
        """The lines `feed` would return, undecoded but checked to be UTF-8: blocks of whole lines.

        The unfinished line and the chunk's first line are joined into a block of their own; the
        chunk's other whole lines are a view of it, not a copy.
        """
        end = self._whole_lines(chunk, final)
        if end is None:
            return []
        view, start = memoryview(chunk), 0
        blocks: list[bytes | memoryview] = []
        if self._pieces:
            start = chunk.find(b"\n", 0, end) + 1 or end
            blocks.append(b"".join([*self._pieces, view[:start]]))
            self._pieces, self._held = [], 0
        if start < end:
            blocks.append(view[start:end])
        self._hold(chunk[end:])
        for block in blocks:
            self._validate(block)
            self.line_number += int(np.count_nonzero(np.frombuffer(block, dtype=np.uint8) == NEWLINE))
            self.line_number += 1 if block[-1] != NEWLINE else 0  # the last line of a stream, without "\n"
        return blocks

    def _complete(self, chunk: bytes, final: bool) -> bytes:
        # The held pieces and the chunk's whole lines, joined once.
        end = self._whole_lines(chunk, final)
        if end is None:
            return b""
        self._pieces.append(chunk[:end] if end < len(chunk) else chunk)
        data = b"".join(self._pieces)
        self._pieces, self._held = [], 0
        self._hold(chunk[end:])
        return data

    def _whole_lines(self, chunk: bytes, final: bool) -> int | None:
        # Where the chunk's whole lines end (all of it with `final`), after the cap's check; None
        # when it ends none: then it is held, the line goes on.
        self._check_lengths(chunk)
        end = len(chunk) if final else chunk.rfind(b"\n") + 1
        if not final and end == 0:
            self._hold(chunk)
            return None
        return end

    def _hold(self, piece: bytes) -> None:
        if piece:
            self._pieces.append(piece)
            self._held += len(piece)

    def _decoded(self, data: bytes) -> str:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = self.line_number + data.count(b"\n", 0, exc.start) + 1
            raise InvalidCorpus(f"invalid UTF-8 in line {line}: {exc.reason}", field="file") from None

    def _validate(self, data: bytes | memoryview) -> None:
        # Decodes about VALIDATE_BYTES at a time and drops the text: small strings come from memory
        # already mapped, where one string of the whole block costs a page fault per 4 KiB. Pieces
        # are cut before a byte that starts a character, so they are all valid exactly when the
        # block is; where one fails, the whole block is decoded again for `feed`'s very message.
        view, start, size = memoryview(data), 0, len(data)
        while start < size:
            end = min(start + VALIDATE_BYTES, size)
            while end < size and view[end] & 0xC0 == 0x80:  # a continuation byte: at most three
                end += 1
            try:
                str(view[start:end], "utf-8")
            except UnicodeDecodeError:
                self._decoded(bytes(data))
            start = end

    def _check_lengths(self, chunk: bytes) -> None:
        # Checked before anything is held. One comparison per chunk unless a line this long is possible.
        cap = self.max_line_bytes
        if cap is None or self._held + len(chunk) <= cap:
            return
        for index, part in enumerate(chunk.split(b"\n")):
            if len(part) + (self._held if index == 0 else 0) > cap:
                number = self.line_number + index + 1
                raise InvalidCorpus(f"line {number} is longer than {cap} bytes (the limit, TOKENMILL_MAX_LINE_BYTES)",
                                    field="file")


def iter_lines(chunks: Iterable[bytes], max_line_bytes: int | None = None) -> Iterator[str]:
    """Every line of a UTF-8 byte stream (InvalidCorpus for one longer than `max_line_bytes`)."""
    splitter = LineSplitter(max_line_bytes)
    for chunk in chunks:
        yield from splitter.feed(chunk)
    yield from splitter.feed(b"", final=True)


def document_of(line: str, line_number: int, fmt: str, text_field: str | None) -> str | None:
    """The document a line holds, or None for a blank line."""
    if fmt == "text":
        return line if line.strip() else None
    if not line.strip():
        return None
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidCorpus(f"line {line_number} is not valid JSON: {exc.msg}", field="file") from None
    field = text_field or "text"
    value = record.get(field) if isinstance(record, dict) else None
    if not isinstance(value, str):
        raise InvalidCorpus(f"line {line_number} has no string field {field!r}", field="text_field")
    if "\\u" in line and not _is_unicode(value):
        # A JSON escape of half a surrogate pair (\ud800) is valid JSON but not text: no
        # tokenizer library can take it.
        raise InvalidCorpus(f"line {line_number}: field {field!r} holds an unpaired surrogate escape (\\uD800-\\uDFFF)",
                            field="file")
    return value or None


def _is_unicode(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def corpus_documents(store: ObjectStore, corpus: "Corpus", max_line_bytes: int | None = None) -> Iterator[str]:
    """The documents of a stored corpus, streamed from the store."""
    return documents_of(store.iter_chunks(corpus.storage_key), corpus, max_line_bytes)


def documents_of(chunks: Iterable[bytes], corpus: "Corpus", max_line_bytes: int | None = None) -> Iterator[str]:
    """The documents in chunks of a corpus's bytes (whole lines), read as its format says."""
    lines = iter_lines(chunks, max_line_bytes)
    if corpus.format == "text":
        yield from filter(str.strip, lines)  # document_of's rule for text, without a call per line
        return
    for number, line in enumerate(lines, start=1):
        document = document_of(line, number, corpus.format, corpus.text_field)
        if document is not None:
            yield document
