# gpudisk-top.pyz's first code: tools/build_pyz.py stores it, uncompressed, as the zip's
# __main__.py.  It owns the integrity check and the one-line messages: before anything
# else runs, the bytes of every other member (from the launcher's header to the zip's
# directory) are checked against the CRC-32 the build wrote into CHECK below, so a copy
# damaged anywhere in them is one line, `gpudisk-top: error: FILE is damaged (...)`, not a
# traceback from inside the zip (Python's own zipimport checks no CRC: a flipped byte
# becomes a garbled module).  Not in the zip's comment: zipimport before 3.8 cannot read a
# zip that has one, and 3.6 and 3.7 must reach the launcher's one-line refusal.  Then it runs the
# launcher (pyz_main.py in the zip, tools/pyz_main.py here) with `say` and `damaged` in its
# globals.  Kept this small: it is the one part that cannot check itself.  Python 2.7 and
# 3.0+ syntax, so that the launcher can refuse a Python too old in one line.

import os
import sys
# imported before the launcher isolates sys.path, as Python's own zipimport imports it for
# any compressed member: a job's PYTHONPATH that shadows zlib breaks every zip import
import zlib

LAUNCHER = "pyz_main.py"
# START-END-CRC32-LAUNCHER_START-LAUNCHER_END: the byte range checked, its CRC-32, and
# where in it the launcher's source lies (stored); written by tools/build_pyz.py over
# this placeholder at the same length (the stub's size is part of the offsets).  The
# launcher is sliced out of the bytes checked, not read again through zipimport (whose
# get_data before 3.8 cannot find a member behind the file's first line)
CHECK = "0000000000-0000000000-00000000-0000000000-0000000000"


def say(kind, text):
    # paths and errors come from the node: a control character in one must not reach the
    # terminal as itself (the package's textsafe is not importable yet)
    text = "".join(c if " " <= c != "\x7f" else "\\x%02x" % ord(c) for c in str(text))
    sys.stderr.write("gpudisk-top: %s: %s\n" % (kind, text))


def damaged(archive, why):
    say("error", "%s is damaged (%s): copy it again, and compare its sha256sum with the "
        "build's (the gpudisk-top.pyz.sha256 that tools/build_pyz.py writes beside the zip)"
        % (archive, why))
    sys.exit(2)


def _launcher_code(archive):
    try:
        with open(archive, "rb") as f:
            data = f.read()   # 3.5 MB: ~2 ms, and the CRC ~1.5 ms
    except (IOError, OSError) as err:
        say("error", "cannot read %s: %s" % (archive, getattr(err, "strerror", None) or err))
        sys.exit(2)
    start, end, crc, source_start, source_end = CHECK.split("-")
    if len(data) < int(end):
        damaged(archive, "it is %d bytes, shorter than the build's" % len(data))
    if zlib.crc32(data[int(start):int(end)]) & 0xFFFFFFFF != int(crc, 16):
        damaged(archive, "its CRC-32 does not match the build's")
    return compile(data[int(source_start):int(source_end)], os.path.join(archive, LAUNCHER),
                   "exec")


_archive = os.path.dirname(os.path.abspath(__file__))
exec(_launcher_code(_archive), {"__name__": "__main__", "__file__": __file__,
                                "__builtins__": __builtins__, "say": say, "damaged": damaged})
