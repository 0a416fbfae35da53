"""Record batch compression codecs, keyed by the id in the batch attributes (bits 0-2).

Only the records section of a batch (everything after the 61-byte header) is compressed, so these
functions work on plain byte strings and know nothing about batches.

What goes on the wire has to be readable by every client in use (Java, librdkafka, kafka-python,
aiokafka), and we must read whatever any of them writes. Per codec:

* 1 gzip: an RFC 1952 stream. Readers must accept several concatenated members (gzip allows it
  and the JDK's GZIPInputStream reads them), so decompression goes through a multi-member reader.
  Level 6, the zlib default, which is also what Java uses unless told otherwise.
* 2 snappy: two framings are in use. The Java client writes snappy-java's "xerial" stream: a
  16-byte header (0x82 "SNAPPY" 0x00, then big-endian int32 version 1 and compatible-version 1)
  followed by chunks, each a big-endian int32 length and a raw snappy block of at most 32 KiB of
  input. librdkafka writes one raw snappy block (no framing) for magic 2 batches. Every reader
  accepts both: snappy-java falls back to raw when the header is absent, librdkafka, kafka-python
  and aiokafka sniff the 8-byte magic. We therefore *decompress* either, and *compress* to xerial
  framing, which is what the reference client (Java) produces. Two details keep it readable
  everywhere: the version/compat ints are written as 1/1 (aiokafka compares the whole 16-byte
  header), and there is always at least one chunk, even for empty input (librdkafka and
  kafka-python only recognise the framing when more than 16 / 20 bytes are present; a bare header
  would be misread as raw snappy). The "snappy framing format" of the snappy project (the stream
  cramjam.snappy.compress produces) is a third, different format that no Kafka client speaks.
* 3 lz4: the LZ4 *frame* format (magic 0x184D2204), never bare LZ4 blocks. Java's reader rejects
  linked blocks ("Dependent block stream is unsupported"), so we always write independent blocks.
  The content checksum is left off like Java's writer; readers that see one do verify it.
* 4 zstd: a standard zstd frame at level 3 (Java's default). Frames written by streaming encoders
  carry no content size, and a payload may hold several frames; the decoder handles both.

Decompression failures become CORRUPT_MESSAGE; an id outside 0-4 is UNSUPPORTED_COMPRESSION_TYPE,
the code a Kafka broker returns for it.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Final

import cramjam

from .errors import ErrorCode, KafkaError

NONE: Final = 0
GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4

NAMES: Final[dict[int, str]] = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
BY_NAME: Final[dict[str, int]] = {name: codec for codec, name in NAMES.items()}

GZIP_LEVEL = 6
ZSTD_LEVEL = 3

XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
XERIAL_HEADER: Final = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE: Final = 32 * 1024  # snappy-java's default; kafka-python uses the same
_XERIAL_HEADER_SIZE = len(XERIAL_HEADER)
_I32 = struct.Struct(">i")

BytesLike = bytes | bytearray | memoryview


def codec_name(codec: int) -> str:
    """The name Kafka's configs use for a codec id ("gzip", ...), for messages and config checks."""
    try:
        return NAMES[codec]
    except KeyError:
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"compression id {codec}") from None


# --- gzip -----------------------------------------------------------------------------------------

def _gzip_compress(data: BytesLike) -> bytes:
    # zlib with wbits=31 writes a gzip member directly (mtime 0, no name); faster than gzip.compress.
    c = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def _gzip_decompress(data: BytesLike) -> bytes:
    # cramjam's reader follows concatenated members and is faster than the stdlib's
    return bytes(cramjam.gzip.decompress(data))


# --- snappy ---------------------------------------------------------------------------------------

def _snappy_compress(data: BytesLike) -> bytes:
    mv = memoryview(data)
    n = len(mv)
    compress_raw = cramjam.snappy.compress_raw
    parts: list[BytesLike] = [XERIAL_HEADER]
    # range(0, 0) would give no chunk for empty input; see the module docstring for why we need one
    for start in range(0, n, XERIAL_BLOCK_SIZE) if n else (0,):
        block = compress_raw(mv[start : start + XERIAL_BLOCK_SIZE])
        parts.append(_I32.pack(len(block)))
        parts.append(block)  # type: ignore[arg-type]  # cramjam.Buffer speaks the buffer protocol
    return b"".join(parts)


def _snappy_decompress(data: BytesLike) -> bytes:
    mv = memoryview(data)
    if len(mv) < _XERIAL_HEADER_SIZE or mv[:8] != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(mv))
    # The version/compat ints are not checked: some producers write them little-endian, and the
    # chunk layout has never changed, so the magic alone decides.
    decompress_raw = cramjam.snappy.decompress_raw
    out: list[BytesLike] = []
    pos, end = _XERIAL_HEADER_SIZE, len(mv)
    while pos < end:
        # snappy-java can read concatenated streams, each with its own header; a chunk length
        # never starts with 0x82 (it would be negative), so a header here is unambiguous.
        if mv[pos] == 0x82 and end - pos >= _XERIAL_HEADER_SIZE and mv[pos : pos + 8] == XERIAL_MAGIC:
            pos += _XERIAL_HEADER_SIZE
            continue
        if end - pos < 4:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "snappy: truncated xerial chunk length")
        (size,) = _I32.unpack_from(mv, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"snappy: xerial chunk of {size} bytes past the end")
        out.append(decompress_raw(mv[pos : pos + size]))  # type: ignore[arg-type]
        pos += size
    return b"".join(out)


# --- lz4 ------------------------------------------------------------------------------------------

def _lz4_compress(data: BytesLike) -> bytes:
    # cramjam.lz4.compress writes linked blocks, which Java cannot read; the streaming Compressor
    # lets us ask for independent blocks.
    c = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
    c.compress(data if type(data) is bytes else bytes(data))  # this entry point takes only bytes
    return bytes(c.finish())


def _lz4_decompress(data: BytesLike) -> bytes:
    return bytes(cramjam.lz4.decompress(data))


# --- zstd -----------------------------------------------------------------------------------------

def _zstd_compress(data: BytesLike) -> bytes:
    return bytes(cramjam.zstd.compress(data, level=ZSTD_LEVEL))


def _zstd_decompress(data: BytesLike) -> bytes:
    return bytes(cramjam.zstd.decompress(data))


def _identity(data: BytesLike) -> bytes:
    return bytes(data)


_COMPRESS: dict[int, Callable[[BytesLike], bytes]] = {
    NONE: _identity, GZIP: _gzip_compress, SNAPPY: _snappy_compress, LZ4: _lz4_compress, ZSTD: _zstd_compress,
}
_DECOMPRESS: dict[int, Callable[[BytesLike], bytes]] = {
    NONE: _identity, GZIP: _gzip_decompress, SNAPPY: _snappy_decompress, LZ4: _lz4_decompress,
    ZSTD: _zstd_decompress,
}


def compress(codec: int, data: BytesLike) -> bytes:
    """Compress a records section with the codec whose Kafka id is `codec` (0 returns a copy)."""
    fn = _COMPRESS.get(codec)
    if fn is None:
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"compression id {codec}")
    return fn(data)


def decompress(codec: int, data: BytesLike) -> bytes:
    """Decompress a records section. Anything the codec cannot read raises CORRUPT_MESSAGE, since
    the bytes came off the wire or a log and are simply not what the attributes claim."""
    fn = _DECOMPRESS.get(codec)
    if fn is None:
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"compression id {codec}")
    try:
        return fn(data)
    except KafkaError:
        raise
    except (zlib.error, cramjam.DecompressionError, ValueError, OSError, EOFError) as e:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{NAMES[codec]} decompression failed: {e}") from e
