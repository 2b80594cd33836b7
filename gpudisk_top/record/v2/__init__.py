"""Recording format version 2: Samples as rows and blocks, and back.

    fields.py     what the columns hold (field tables, schema) and shared small codings
    flatten.py    a Sample -> a layout (column keys) and one value per key
    unflatten.py  a layout and values -> the Sample (plans per layout)
    rows.py       R frames: one sample each, the crash-safe tail of a recording
    blocks.py     B frames: SEGMENT_SAMPLES samples column by column, LZMA-compressed
    summary.py    summary blocks (the derived stream: record/derived.py fills them)

record/index_v2.py finds which frames of a file hold which samples and decodes them with
this package; nothing here imports from record/ above it (tests/test_layering.py).

docs/recording-format.md specifies the format; flatten.py's docstring says what is kept
exactly and what is kept as the model uses it.  This package stays as it is once a
version 3 exists: a reader for every version is kept.
"""

from gpudisk_top.record.v2.blocks import (BLOCK_HEAD, Block, block_info, block_samples,
                                          block_summaries, decode_block, encode_block)
from gpudisk_top.record.v2.fields import IO_FIELDS, VERSION, FormatError, schema, util_window
from gpudisk_top.record.v2.flatten import Flattener
from gpudisk_top.record.v2.rows import ROW, RowCoder, RowDecoder
from gpudisk_top.record.v2.unflatten import Unflattener, canonical

__all__ = ["BLOCK_HEAD", "IO_FIELDS", "ROW", "VERSION", "Block", "Flattener", "FormatError",
           "RowCoder", "RowDecoder", "Unflattener", "block_info", "block_samples",
           "block_summaries", "canonical", "decode_block", "encode_block", "schema",
           "util_window"]
