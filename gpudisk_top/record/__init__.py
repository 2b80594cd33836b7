"""Recordings: raw Samples on disk, crash-safe and compact, read back by time.

    from gpudisk_top.record import Recorder, Recording, make_header

    rec = Recorder(path, make_header(origin, interval_s=1.0))   # write
    rec.append(sample); rec.close()

    with Recording.open(path) as r:                               # read
        r.header, len(r), r.start_s, r.end_s, r.seek(t), r.sample(i), r.samples()

Models and verdicts from a recording are session.replay's (Replay, ReplayFeed).  The
format is in docs/recording-format.md.  Reading imports only the collection layer (raw
Samples); a Recorder that writes summaries (the default; summaries=False records raw
samples only) brings in the model.
"""

from gpudisk_top.record.header import FORMAT_VERSION, SEGMENT_SAMPLES, make_header
from gpudisk_top.record.reader import CorruptRecording, Recording, Session
from gpudisk_top.record.writer import Recorder

SUFFIX = ".gdtrec"

__all__ = ["FORMAT_VERSION", "SEGMENT_SAMPLES", "SUFFIX", "CorruptRecording", "Recorder",
           "Recording", "Session", "make_header"]
