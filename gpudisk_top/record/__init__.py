"""Recordings: raw Samples on disk, crash-safe and compact, read back by time.

    from gpudisk_top.record import Recorder, Recording, Replay, make_header

    rec = Recorder(path, make_header(origin, interval_s=1.0))   # write
    rec.append(sample); rec.close()

    with Recording.open(path) as r:                               # read
        r.header, len(r), r.start_s, r.end_s, r.seek(t), r.sample(i), r.samples()
        for model, verdict in Replay(r).models(start_s, end_s): ...

The format is in docs/recording-format.md.  Reading imports only the collection layer
(raw Samples); Replay brings in the model, and so does a Recorder that writes summaries
(the default; summaries=False records raw samples only).
"""

from gpudisk_top.record.header import FORMAT_VERSION, SEGMENT_SAMPLES, make_header
from gpudisk_top.record.reader import CorruptRecording, Recording, Session
from gpudisk_top.record.writer import Recorder

SUFFIX = ".gdtrec"


def __getattr__(name):
    # Replay needs the model; load it only when asked, so the recorder stays light
    if name in ("Replay", "WARMUP_S"):
        from gpudisk_top.record import replay

        return getattr(replay, name)
    raise AttributeError(name)


__all__ = ["FORMAT_VERSION", "SEGMENT_SAMPLES", "SUFFIX", "CorruptRecording", "Recorder",
           "Recording", "Replay", "Session", "make_header"]
