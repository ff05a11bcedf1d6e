"""Corpus files: decompression, UTF-8 line splitting and document reading, all streaming.

A stored corpus is the uploaded file decompressed, byte for byte. Its documents are its
non-blank lines ("text") or the `text_field` of each JSON line ("jsonl"). Lines end at
"\\n" only (a trailing "\\r" is dropped): U+2028 and friends stay inside a document.
"""

import itertools
import json
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any, cast

import numpy as np
import zstandard

from tokenmill.errors import InvalidCorpus
from tokenmill.store import CHUNK, ChunkReader, ObjectStore

if TYPE_CHECKING:
    from tokenmill.models import Corpus

FORMATS = ("text", "jsonl")
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
SKIPPABLE_MAGIC = b"\x2a\x4d\x18"  # the last three bytes of a skippable frame's magic number
NEWLINE = 0x0A
VALIDATE_BYTES = 16 * 1024
MAX_JSON_DEPTH = 128  # arrays and objects inside one another on one JSON line


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
    # zstandard asks for a file but only reads one (and closes it if it can). Its stream reader
    # bounds each output piece, so a small bomb cannot blow up memory, but it ends quietly
    # where its input ends, mid-frame or not: the frames walked alongside say which it was.
    frames = ZstdFrames()
    source = cast(IO[bytes], ChunkReader(frames.walked(itertools.chain([head], chunks))))
    reader = zstandard.ZstdDecompressor().stream_reader(source, read_across_frames=True)
    try:
        while out := reader.read(CHUNK):
            yield out
    except zstandard.ZstdError as exc:
        raise InvalidCorpus(f"corrupt zstd data: {exc}", field="file") from None
    if not frames.ended:
        raise InvalidCorpus("truncated zstd data: the file ends inside a frame", field="file")


class ZstdFrames:
    """Where a zstd stream stands between its frames, read from their headers alone (RFC 8878).

    Each block's header says how long its body is, so the walk skips the bodies: a few steps
    per block (at most 128 KiB of output each), never per byte. Decoding the blocks, and
    finding corrupt data inside one, stay zstandard's; this only tells a stream that ends
    after a whole frame from one cut short, which zstandard's stream reader does not.
    """

    def __init__(self) -> None:
        self._header = b""  # what has arrived of the next header
        self._wanted = 4  # its length
        self._read: Callable[[bytes], None] = self._frame_magic  # what reads it
        self._skip = 0  # body bytes to pass over before the next header
        self._checksum = False  # the frame ends with a 4-byte checksum

    @property
    def ended(self) -> bool:
        """The bytes so far end with a whole frame (or with a whole skippable one)."""
        return self._read == self._frame_magic and not self._header and not self._skip

    def walked(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        """The chunks, each walked as it passes."""
        for chunk in chunks:
            self.feed(chunk)
            yield chunk

    def feed(self, data: bytes) -> None:
        at, size = 0, len(data)
        while at < size:
            if self._skip:
                step = min(self._skip, size - at)
                self._skip -= step
            elif not self._header and size - at >= self._wanted:  # a whole header here: read it where it is
                step = self._wanted
                self._read(data[at:at + step])
            else:  # a header cut by the end of the data: gathered across feeds
                step = min(self._wanted - len(self._header), size - at)
                self._header += data[at:at + step]
                if len(self._header) == self._wanted:
                    header, self._header = self._header, b""
                    self._read(header)
            at += step

    def _expect(self, size: int, read: Callable[[bytes], None]) -> None:
        self._wanted, self._read = size, read

    def _frame_magic(self, magic: bytes) -> None:
        if magic == ZSTD_MAGIC:
            self._expect(1, self._frame_descriptor)
        elif magic[1:] == SKIPPABLE_MAGIC and magic[0] & 0xF0 == 0x50:  # 0x184D2A50 to 0x184D2A5F
            self._expect(4, self._skippable_size)
        else:
            raise InvalidCorpus("corrupt zstd data: something other than a frame follows a frame", field="file")

    def _frame_descriptor(self, descriptor: bytes) -> None:
        # The rest of the frame header: a window byte unless single-segment, a dictionary id, the content size.
        flags = descriptor[0]
        single_segment = bool(flags & 0x20)
        self._checksum = bool(flags & 0x04)
        rest = (0 if single_segment else 1) + (0, 1, 2, 4)[flags & 0x03] + (int(single_segment), 2, 4, 8)[flags >> 6]
        if rest:
            self._expect(rest, self._frame_header)
        else:
            self._frame_header(b"")

    def _frame_header(self, _: bytes) -> None:
        self._expect(3, self._block_header)

    def _block_header(self, header: bytes) -> None:
        value = int.from_bytes(header, "little")
        last, kind, size = value & 1, (value >> 1) & 3, value >> 3
        if kind == 3:
            raise InvalidCorpus("corrupt zstd data: a block of the reserved type", field="file")
        self._skip = 1 if kind == 1 else size  # an RLE block's body is the one byte it repeats
        if not last:
            self._expect(3, self._block_header)
        elif self._checksum:
            self._expect(4, self._frame_end)
        else:
            self._frame_end(b"")

    def _frame_end(self, _: bytes) -> None:
        self._expect(4, self._frame_magic)

    def _skippable_size(self, size: bytes) -> None:
        self._skip = int.from_bytes(size, "little")
        self._expect(4, self._frame_magic)


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
    record = json_value(line, line_number)
    field = text_field or "text"
    if not isinstance(record, dict):
        raise InvalidCorpus(f"line {line_number} is {_json_kind(record)}, not a JSON object", field="file")
    if field not in record:
        raise InvalidCorpus(f"line {line_number} has no field {field!r}", field="text_field")
    value = record[field]
    if not isinstance(value, str):
        raise InvalidCorpus(f"line {line_number}: field {field!r} is {_json_kind(value)}, not a string", field="file")
    if "\\u" in line and not _is_unicode(value):
        # A JSON escape of half a surrogate pair (\ud800) is valid JSON but not text: no
        # tokenizer library can take it.
        raise InvalidCorpus(f"line {line_number}: field {field!r} holds an unpaired surrogate escape (\\uD800-\\uDFFF)",
                            field="file")
    return value or None


def json_value(line: str, line_number: int) -> Any:
    """The value of one JSON line, in time and memory linear in its length; InvalidCorpus naming the line if it has none.

    Deep nesting is refused past MAX_JSON_DEPTH (the C scanner would stop at the interpreter's
    recursion limit, about a thousand levels less the caller's frames, so a line read here at
    upload could fail where training reads it). A long integer is refused by Python's own
    limit on digits (4,300 by default) before it is converted, which would be quadratic.
    """
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidCorpus(f"line {line_number} is not valid JSON: {exc.msg}", field="file") from None
    except RecursionError:
        raise _too_deep(line_number) from None
    except ValueError:  # the integer limit: not a JSONDecodeError, and no position
        raise InvalidCorpus(f"line {line_number} holds an integer of more than {sys.get_int_max_str_digits()} digits",
                            field="file") from None
    # Only a line with that many brackets can nest that deep; most have far fewer.
    if line.count("[") + line.count("{") > MAX_JSON_DEPTH and _nests_deeper(value, MAX_JSON_DEPTH):
        raise _too_deep(line_number)
    return value


def _too_deep(line_number: int) -> InvalidCorpus:
    return InvalidCorpus(f"line {line_number} nests arrays or objects more than {MAX_JSON_DEPTH} levels deep",
                         field="file")


def _nests_deeper(value: Any, limit: int) -> bool:
    # Depth first with a stack of its own: the value may nest as deep as the scanner allowed.
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _json_kind(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    kinds = {dict: "an object", list: "an array", str: "a string", int: "a number", float: "a number"}
    return kinds.get(type(value), "a value")


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
