"""The reading of a recording window's verdicts, the one reader that `report` and the
replay screen share: which samples the recorder's summaries serve and which are replayed,
and the episodes of both as one list.

    window = read(rec, rec.ranges(start_s, end_s), start_s, thresholds)
    window.episodes, window.spans        # what `report` lists and the replay screen marks

Two ways to the same verdicts:
  - recorded summaries (format v2, record/derived.py): what the recorder's detector
    decided for every interval.  Used when the window is one stretch of a steady clock and
    they were made by this version's model and detector with the thresholds asked for
    (summary_plan()); the samples between summary blocks (a recorder killed before writing
    its last ones) are replayed;
  - replaying the raw samples (session/replay.py), one pass per stretch of a steady clock
    (Recording.ranges()), the detector warmed up before the window.
The window is read piece by piece (a run of summary blocks, or samples replayed): each
piece is a Piece, whose two hooks a caller that adds the intervals up overrides (report's
tally, report/tally.py); the base class keeps the episodes, the stall ledger and each
job's figures (session/jobs.py: from a replay's step, derived.job_parts, or from the
summaries' job rows, the same figures).  A replayed piece's detector was warmed up before
its start, so an episode across a boundary shows in both pieces: merge_episodes() joins
them, each job's with that job's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from gpudisk_top.record import derived
from gpudisk_top.record.reader import Recording
from gpudisk_top.record.v2.summary import ABSENT
from gpudisk_top.session.jobs import JobTallies, JobTally
from gpudisk_top.session.replay import Replay
from gpudisk_top.verdict.detect.phases import phase_at
from gpudisk_top.verdict.detect import STATES, Episode, Thresholds
from gpudisk_top.verdict.ledger import Ledger


@dataclass
class Piece:
    """What one piece of the window found: its episodes and the stall ledger of its
    intervals, which keeps each episode's lost time by its id.  A caller that adds the
    intervals up subclasses it and extends interval() and blocks()."""

    episodes: list[Episode] = field(default_factory=list)
    open_at_end: bool = False           # its last episode was still open at the piece's end
    # the jobs (Episode.job_id; None: the node's own) whose last episode was still open
    open_jobs: set = field(default_factory=set)
    # per episode (by its place in `episodes`): its intervals inside the piece, for one
    # that a piece before already counted up to this piece's start
    inside: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    replayed: int = 0                   # samples replayed from raw counters
    breaks_first: bool = False          # its first sample starts a session or follows a clock step
    # per episode (by its place): its id as the step that found it numbered it, before
    # the window numbers its episodes: the key of its lost time in the stall ledger (an
    # int where the piece was replayed, (session, id) where summaries recorded it)
    keys: list = field(default_factory=list)
    # (episode, key) of those its intervals named but that are not listed: ended before
    # the piece began, they held its first intervals through their exit hysteresis
    unlisted: list = field(default_factory=list)
    # its intervals' stall ledger (None: summaries written before they carried it)
    ledger: Ledger | None = field(default_factory=Ledger)
    # summaries: each recorder session's ledger of the piece's intervals, whose
    # by_episode holds its episodes' lost time by the ids the session recorded
    sessions: dict = field(default_factory=dict)
    # summaries written before they carried the ledger: sample index -> (session, episode
    # id) of the intervals in an episode (report/ledger.py replay_ledger counts them)
    key_at: dict = field(default_factory=dict)
    # each job's figures over the piece's intervals (None: summaries written before they
    # carried the jobs' rows)
    jobs: JobTallies | None = field(default_factory=JobTallies)

    def lost_of(self, key, replayed: dict | None = None) -> float:
        """The GPU-seconds the piece's intervals lost to one of its episodes, by its key
        (keys); replayed: report/ledger.py replay_ledger's, by (session, id), where the
        summaries predate the ledger."""
        if isinstance(key, tuple):
            led = self.sessions.get(key[0])
            return led.lost_of(key[1]) if led is not None else (replayed or {}).get(key, 0.0)
        return self.ledger.lost_of(key) if self.ledger is not None else 0.0

    def lost_of_phase(self, key, phase: int) -> float:
        """lost_of for one phase of the episode (Ledger.lost_of_phase); 0 where the
        summaries predate the ledger."""
        if isinstance(key, tuple):
            led = self.sessions.get(key[0])
            return led.lost_of_phase(key[1], phase) if led is not None else 0.0
        return self.ledger.lost_of_phase(key, phase) if self.ledger is not None else 0.0

    def interval(self, i: int, model, verdict, loss, clip_s: float | None) -> None:
        """Sample i replayed: its Model, the replay's Verdict and the step's IntervalLoss;
        an interval that begins before clip_s counts only from clip_s.  The base class
        counts its loss and each job's."""
        self.ledger.add(loss)
        for info, jv, jloss in derived.job_parts(verdict, loss):
            tally = self.jobs.job(info.id, info.source, info.name, info.cgroup, info.gpus,
                                  info.pids)
            if tally is not None:
                self.job_interval(i, tally, jv.state, jloss)

    def job_interval(self, i: int, tally: JobTally, state: str, loss) -> None:
        """Sample i's interval of one job, replayed or read from summaries: its verdict's
        state and its loss.  The base class adds it to the job's tally."""
        tally.add(loss.wall_s, state, loss)

    def blocks(self, rec: Recording, blocks: list, lo: int, hi: int, start_s: float | None,
               window_blocks: int) -> None:
        """A run of summary blocks [(first index, SummaryBlock, session)...], cut to
        samples lo..hi (start_s: the window's start); window_blocks: how many summary
        blocks the whole window reads.  The base class counts the ledger the blocks
        carry, cut as the window cuts them: each interval's lost time goes to the episode
        its summary names (the step's rule, by the session's own ids).  The jobs' rows
        give each job's figures and the node's causes (its ledger row's parts)."""
        ledger = self.ledger = Ledger() if all(b.ledger is not None for _, b, _ in blocks) else None
        with_jobs = ledger is not None and all(b.jobs is not None for _, b, _ in blocks)
        if not with_jobs:
            self.jobs = None
        for g, b, sno in blocks:
            a, z = max(g, lo), min(g + b.n - 1, hi)
            if a > z:
                continue
            if ledger is None:
                self.key_at.update((g + j, (sno, b.episode[j]))
                                   for j in range(a - g, z - g + 1) if b.episode[j])
                continue
            session = self.sessions.setdefault(sno, Ledger())
            tallies: dict = {}
            phases: dict = {}
            for j in range(a - g, z - g + 1):
                wall_s = rec.wall_s(g + j)
                parts = self._job_rows(b, j, g + j, wall_s, tallies, phases) if with_jobs else ()
                loss = derived.loss_of(b.ledger[j], wall_s, derived.state_of(b.state[j]),
                                       b.episode[j], parts=parts,
                                       phase=derived.block_phase(b, phases, b.episode[j], wall_s))
                session.add(loss)
        # the piece's ledger is its sessions' (in order): each interval counted once
        for session in self.sessions.values() if ledger is not None else ():
            ledger.merge(session)

    def _job_rows(self, b, j: int, i: int, wall_s: float, tallies: dict, phases: dict) -> tuple:
        """Interval j of a block (sample i): each job's loss from its rows, counted in its
        tally (tallies: by row, the block's, looked up once a block; phases: the block's
        episodes' phases, derived.block_phase); the node's loss's parts."""
        parts = []
        for r in b.jobs:
            code = r.state[j]
            if code == ABSENT:
                continue
            state = derived.state_of(code)
            jloss = derived.loss_of(r.ledger[j], wall_s, state, r.episode[j], job_id=r.id,
                                    phase=derived.block_phase(b, phases, r.episode[j], wall_s))
            if jloss is None:
                continue
            parts.append(jloss)
            tally = tallies.get(id(r), False)
            if tally is False:
                tally = tallies[id(r)] = self.jobs.job(r.id, r.source, r.name, r.cgroup,
                                                       r.gpus, r.pids)
            if tally is not None:
                self.job_interval(i, tally, state, jloss)
        return tuple(parts)


@dataclass
class Window:
    """A window read: its pieces in recorded order, their episodes joined and numbered."""

    ranges: list[tuple[int, int]]
    pieces: list[Piece]
    episodes: list[Episode]
    where: list[int]                    # per episode: the range it was found in
    recorded: bool                      # read from recorded summaries (else replayed)
    # id(a piece's episode) -> the window's episode it was joined to (merge_episodes);
    # a piece's episode not here is the window's own
    joined: dict = field(default_factory=dict)

    @property
    def spans(self) -> list[tuple[int, int]]:
        """Per episode: the (first, last) sample indexes of the stretch of a steady clock
        it was found in (wall times alone are ambiguous after a step back)."""
        return [self.ranges[r] for r in self.where]

    @property
    def replayed(self) -> int:
        return sum(p.replayed for p in self.pieces)

    def jobs(self) -> JobTallies | None:
        """Every job's figures over the window, its pieces' added up in order; None where
        a piece's summaries predate the jobs' rows."""
        out = JobTallies()
        for piece in self.pieces:
            if piece.jobs is None:
                return None
            out.merge(piece.jobs)
        return out

    def lost_by_episode(self, replayed: dict | None = None) -> list[float]:
        """The GPU-seconds each of its episodes lost in the window, by the step's one
        rule: an interval's lost time is the episode its verdict named.  Each piece's
        ledger keeps it by the id the piece's step (or the recorder's, in its summaries)
        gave the episode (Piece.keys, lost_of), and an episode joined across pieces
        (joined) has its parts'.  replayed: report/ledger.py replay_ledger's, where
        summaries predate the ledger."""
        lost = {id(e): 0.0 for e in self.episodes}
        for piece in self.pieces:
            for e, key in [*zip(piece.episodes, piece.keys), *piece.unlisted]:
                into = id(self.joined.get(id(e), e))
                if into in lost:
                    lost[into] += piece.lost_of(key, replayed)
        return [lost[id(e)] for e in self.episodes]

    def lost_by_phase(self) -> list[list[float]]:
        """lost_by_episode's figures by phase: per episode, per phase (Episode.phases)
        the GPU-seconds its intervals lost; a piece's part of a joined episode adds to
        the window's phase its own phase ended in (0 where the summaries predate the
        ledger: the episode's own figure stands alone)."""
        lost = {id(e): [0.0] * len(e.phases) for e in self.episodes}
        for piece in self.pieces:
            for e, key in [*zip(piece.episodes, piece.keys), *piece.unlisted]:
                into = self.joined.get(id(e), e)
                row = lost.get(id(into))
                if row is None:
                    continue
                for k, p in enumerate(e.phases):
                    at = k if into is e else phase_at(into.phases, p.last_wall_s)
                    if at is not None and at < len(row):
                        row[at] += piece.lost_of_phase(key, k)
        return [lost[id(e)] for e in self.episodes]


def read(rec: Recording, ranges: list[tuple[int, int]], start_s: float | None,
         thresholds=None, recompute: bool = False,
         new_piece: Callable[[], Piece] = Piece) -> Window:
    """The window of `ranges` (Recording.ranges(start_s, end_s)): from the recorded
    summaries when they serve (see the module's doc), else (or with recompute) by replaying
    the raw samples, one pass per range.  Raises RuntimeFailure or OSError where the
    recording cannot be read."""
    if not recompute and len(ranges) == 1:
        lo, hi = ranges[0]
        plan = summary_plan(rec, lo, hi, thresholds)
        if plan is not None:
            return _read_summaries(rec, ranges, plan, start_s, thresholds, new_piece)
    return _read_replay(rec, ranges, start_s, thresholds, new_piece)


def episodes_of(rec: Recording, thresholds=None) -> tuple[list[Episode], list[tuple[int, int]]]:
    """The whole recording's episodes, as `report` lists them, and the stretch of a steady
    clock of each (Window.spans).  Raises RuntimeFailure or OSError where the recording
    cannot be read."""
    episodes, spans, _lost = known_episodes(rec, thresholds)
    return episodes, spans


def known_episodes(rec: Recording, thresholds=None):
    """episodes_of's, and the GPU-seconds each lost, by its id (report's by-episode
    figures; none where the summaries predate the ledger).  Raises as episodes_of."""
    window = read(rec, rec.ranges(), None, thresholds)
    lost = window.lost_by_episode()
    return window.episodes, window.spans, {e.id: v for e, v in zip(window.episodes, lost)}


def reads_summaries(rec: Recording, thresholds=None) -> bool:
    """Would reading the whole recording add its recorded summaries up (well under a
    second for a day) rather than replay every sample?  The replay screen asks, to know
    the recording's episodes at once or to find them in the background."""
    ranges = rec.ranges()
    return len(ranges) == 1 and summary_plan(rec, *ranges[0], thresholds) is not None


def summary_plan(rec: Recording, lo: int, hi: int, thresholds) -> list | None:
    """Samples lo..hi (a window within one stretch of a steady clock) as pieces: ("sum",
    [(first index, SummaryBlock, session)...]) where summaries cover them, ("replay",
    first, last) where they do not; None when summaries cannot be used (format v1,
    another model or thresholds)."""
    if rec.version < 2 or hi < lo:
        return None
    t = thresholds if thresholds is not None else Thresholds()
    for k in range(rec.session_index(lo), rec.session_index(hi) + 1):
        if not derived.usable(rec.sessions[k].header.get("derived"), t):
            return None
    blocks = [(g, b, sno) for g, b, sno in rec.summaries() if g + b.n > lo and g <= hi]
    if not blocks or any(_stepped(rec, g, b) for g, b, _ in blocks):
        return None
    pieces: list = []
    i = lo
    for g, b, sno in blocks:
        if g > i:
            pieces.append(("replay", i, g - 1))
        if pieces and pieces[-1][0] == "sum":
            pieces[-1][1].append((g, b, sno))
        else:
            pieces.append(("sum", [(g, b, sno)]))
        i = g + b.n
    if i <= hi:
        pieces.append(("replay", i, hi))
    return pieces


def _stepped(rec: Recording, g: int, b) -> bool:
    """Must a summary block be replayed: did the wall clock step forward within its
    intervals (the recorder's detector ran across the step, and an episode across it
    would last the step: the replay starts afresh), or did it count a gap as time?"""
    return derived.replay_block(rec, g, b)


# ---------------------------------------------------------------------------- replayed
def _read_replay(rec, ranges, start_s, thresholds, new_piece) -> Window:
    """Every sample of the window replayed, one pass (Replay) per range: a range is a
    stretch of a steady clock, apart in time from the others, so each range's episodes
    are its own.  A range's first interval is clipped to the window unless the sample
    before it is in the window (the clock stepped back there)."""
    pieces = []
    episodes: list[Episode] = []
    where: list[int] = []
    for r, (lo, hi) in enumerate(ranges):
        after_step = r > 0 and ranges[r - 1][1] == lo - 1
        piece = replay_piece(rec, lo, hi, None if after_step else start_s, start_s,
                             thresholds, new_piece())
        pieces.append(piece)
        episodes += piece.episodes
        where += [r] * len(piece.episodes)
    for i, e in enumerate(episodes, 1):
        e.id = i
    return Window(list(ranges), pieces, episodes, where, recorded=False)


def replay_piece(rec: Recording, lo: int, hi: int, clip_s, since_s, thresholds,
                 piece: Piece) -> Piece:
    """Replay samples lo..hi (the detector warmed up before since_s, or before lo) into
    piece; intervals that begin before clip_s count only from clip_s."""
    known_warnings = len(rec.warnings)
    replay = Replay(rec, thresholds)
    inside: dict[int, int] = {}
    named: set[int] = set()
    last_s = None
    for i, model, verdict, loss in replay.run([(lo, hi)], since_s, close=False):
        piece.interval(i, model, verdict, loss, clip_s)
        piece.replayed += 1
        last_s = model.wall_s
        for jv in verdict.jobs or (verdict,):        # each job's episode
            ep = jv.episode
            if ep is not None:
                named.add(id(ep))
                if jv.raw_state == ep.state:
                    inside[id(ep)] = inside.get(id(ep), 0) + 1
    piece.breaks_first = lo in replay.breaks_at
    if replay.detector is not None and last_s is not None:
        piece.open_at_end = replay.open_at_end
        piece.open_jobs = {e.job_id for e in replay.stepper.open_episodes}
        replay.close(last_s)
        first = since_s if since_s is not None else float("-inf")
        piece.episodes = [e for e in replay.all_episodes if e.end_wall_s >= first]
        piece.keys = [e.id for e in piece.episodes]
        piece.unlisted = [(e, e.id) for e in replay.all_episodes
                          if e.end_wall_s < first and id(e) in named]
        piece.inside = {k: inside.get(id(e), 0) for k, e in enumerate(piece.episodes)}
    piece.warnings = rec.warnings[known_warnings:]
    return piece


# ---------------------------------------------------------------------------- recorded summaries
def _read_summaries(rec, ranges, plan, start_s, thresholds, new_piece) -> Window:
    lo_global, hi_global = ranges[0]
    window_blocks = sum(len(piece[1]) for piece in plan if piece[0] == "sum")
    pieces: list[Piece] = []
    boundaries: list[float] = []
    for step in plan:
        if step[0] == "replay":
            _, a, z = step
            # a replay that starts where the window does keeps its clip and warm-up
            s_a = start_s if a == lo_global else rec.wall_s(a)
            piece = replay_piece(rec, a, z, start_s if a == lo_global else None, s_a,
                                 thresholds, new_piece())
            boundaries.append(rec.wall_s(a) if s_a is None else s_a)
        else:
            first_g = step[1][0][0]
            a = max(first_g, lo_global)
            piece = new_piece()
            piece.blocks(rec, step[1], lo_global, hi_global, start_s, window_blocks)
            _summed_episodes(rec, step[1], lo_global, hi_global, start_s, piece)
            boundaries.append(start_s if a == lo_global and start_s is not None else rec.wall_s(a))
        pieces.append(piece)
    joined: dict = {}
    episodes = merge_episodes(pieces, boundaries, joined)
    return Window(list(ranges), pieces, episodes, [0] * len(episodes), recorded=True,
                  joined=joined)


def _summed_episodes(rec: Recording, blocks, lo: int, hi: int, start_s, piece: Piece) -> None:
    """The episodes a run of summary blocks, cut to [lo, hi], recorded."""
    records: dict[tuple, tuple] = {}   # (session, episode id) -> (record, block, first index)
    last_block = None
    for g, b, sno in blocks:
        for r in b.episodes:
            records[(sno, r["id"])] = (r, b, g, sno)
        if max(g, lo) <= min(g + b.n - 1, hi):
            last_block = (g, b, sno)
    if last_block is None:
        return
    g, b, _ = last_block
    piece_hi = min(hi, g + b.n - 1)        # where this piece ends (a replay may follow)
    piece.episodes, sessions, piece.open_jobs = _episodes(rec, records, last_block, lo,
                                                          piece_hi, start_s)
    piece.open_at_end = bool(piece.open_jobs)
    piece.keys = [(sno, e.id) for e, sno in zip(piece.episodes, sessions)]
    first = max(lo, blocks[0][0])
    for place, (e, sno) in enumerate(zip(piece.episodes, sessions)):
        if e.start_wall_s < rec.wall_s(first):
            piece.inside[place] = _count_inside(blocks, e, sno, first, piece_hi)


def _count_inside(blocks, e: Episode, sno: int, a: int, z: int) -> int:
    """An episode's intervals in its state among samples a..z of a run of summary blocks
    (its job's codes: derived.job_codes)."""
    n = 0
    for g, b, s in blocks:
        if s != sno:
            continue
        _state, raw, episode = derived.job_codes(b, e.job_id)
        for j in range(max(0, a - g), min(b.n, z - g + 1)):
            if episode[j] == e.id and 0 <= raw[j] < len(STATES) and STATES[raw[j]] == e.state:
                n += 1
    return n


def _episodes(rec: Recording, records: dict, last_block, lo: int, hi: int, start_s):
    """The recorded episodes that reach into [lo, hi], as a replay of that window shows
    them: one still open at hi ends there.  Returns (episodes, the session of each, the
    jobs (Episode.job_id) whose last one is open at hi)."""
    g_hi, b_hi, sno_hi = last_block
    j_hi = hi - g_hi
    open_ids = set()
    if 0 <= j_hi < b_hi.n:
        open_ids = {b_hi.episode[j_hi], *(r.episode[j_hi] for r in b_hi.jobs or ())} - {0}
    first_wall = start_s if start_s is not None else float("-inf")
    out = []
    closed_at_hi = set()
    for (sno, eid), (r, b, g, _) in records.items():
        opened = rec.global_index(sno, r["opened_at"])
        if opened is None or opened > hi:
            continue
        e = derived.episode_from(r)
        if sno == sno_hi and eid in open_ids:
            # open at the window's end: close it there, count its intervals so far
            e.end_wall_s = rec.wall_s(hi)
            e.intervals, last_i = _intervals_until(rec, records, sno, e, r, hi)
            e.last_wall_s = rec.wall_s(last_i)
            closed_at_hi.add(id(e))
        elif e.end_wall_s is None:
            # its session ended (a recorder stopped) with it open: it ends there
            last_i = _session_last(rec, sno, hi)
            e.end_wall_s = rec.wall_s(last_i)
        if e.end_wall_s < first_wall:
            continue
        out.append((e, sno))
    out.sort(key=lambda x: (x[0].start_wall_s, x[1], x[0].id))
    last_of = {e.job_id: e for e, _ in out}          # each job's last listed episode
    open_jobs = {job for job, e in last_of.items() if id(e) in closed_at_hi}
    return [e for e, _ in out], [sno for _, sno in out], open_jobs


def _intervals_until(rec, records, sno, e: Episode, r, hi):
    """An episode's interval count up to index hi, and the last interval in its state
    (its job's codes: derived.job_codes)."""
    n = r["intervals_at_open"]
    opened = rec.global_index(sno, r["opened_at"])
    last_i = opened
    for g, b, s in _blocks_of(rec, sno):
        _state, raw, episode = derived.job_codes(b, e.job_id)
        for j in range(b.n):
            i = g + j
            if i <= opened or i > hi:
                continue
            if episode[j] == e.id and derived.state_of(raw[j]) == e.state:
                n += 1
                last_i = i
    return n, last_i


def _blocks_of(rec, sno):
    return [(g, b, s) for g, b, s in rec.summaries() if s == sno]


def _session_last(rec: Recording, sno: int, hi: int) -> int:
    firsts = rec.session_firsts
    nxt = firsts[sno + 1] - 1 if sno + 1 < len(firsts) else len(rec) - 1
    return min(nxt, hi)


def _join(joined: dict, merged: list[Episode], e: Episode) -> None:
    """A piece's episode that the pieces before already listed: joined to the latest
    listed one of its job and state begun by its end (the same episode, seen by two
    detectors)."""
    into = next((m for m in reversed(merged) if m.state == e.state and m.job_id == e.job_id
                 and m.start_wall_s <= e.last_wall_s), None)
    if into is not None:
        joined[id(e)] = into


def _join_phases(last: Episode, e: Episode, boundary: float) -> None:
    """The phases of a later piece's part of an episode after the earlier's: those that
    went on past the boundary (the rest were the warm-up's), the first one cut there, or
    the earlier's last phase going on where it has the same cause."""
    for p in e.phases:
        if p.last_wall_s <= boundary:
            continue
        if p.start_wall_s < boundary and last.phases \
                and last.phases[-1].signature() == p.signature():
            into = last.phases[-1]
            into.end_wall_s, into.last_wall_s = p.end_wall_s, p.last_wall_s
            into.reason, into.advice, into.whatif = p.reason, p.advice, p.whatif
            continue
        if last.phases and last.phases[-1].end_wall_s is None:
            last.phases[-1].end_wall_s = max(p.start_wall_s, boundary)
        p.start_wall_s = max(p.start_wall_s, boundary)
        last.phases.append(p)


def merge_episodes(parts: list[Piece], bounds: list[float],
                   joined: dict | None = None) -> list[Episode]:
    """Episodes of consecutive pieces of a window read from summaries (runs of summary
    blocks, and the samples between them that have none, replayed) as one list.  A
    replayed piece's detector was warmed up before its start, so an episode that went on
    across a boundary shows in both pieces: the earlier one closed at its last sample, the
    later one begun before the boundary.  They are joined; an episode that ended within
    the warm-up belongs to the piece before.  A piece that starts at a break (a session's
    start, a clock step: Replay restarts its detector there) joins nothing: the piece
    before closed its episodes at its end.  Each job's episodes are joined with that job's
    only (Episode.job_id; each job has its own detector).  joined: filled with id(a
    piece's episode) -> the merged episode it went into, where that is another (its
    intervals' lost time is that episode's)."""
    merged: list[Episode] = []
    joined = {} if joined is None else joined
    last_of: dict = {}        # job id -> its latest merged episode
    carried: set = set()      # the jobs whose latest merged episode was open at the piece end
    for k, part in enumerate(parts):
        boundary = bounds[k]
        if k > 0 and part.breaks_first:
            merged.extend(part.episodes)
            last_of.update((e.job_id, e) for e in part.episodes)
            carried = set(part.open_jobs)
            continue
        for place, e in enumerate(part.episodes):
            job = e.job_id
            last = last_of.get(job)
            if k > 0 and e.end_wall_s is not None and e.end_wall_s < boundary:
                if job in carried and last is not None and last.state == e.state \
                        and e.start_wall_s <= last.end_wall_s and e.end_wall_s >= last.start_wall_s:
                    # the piece before closed it at its last sample, still open there; this
                    # piece's detector saw it end, just before the boundary: it ended then
                    last.end_wall_s = e.end_wall_s
                    last.intervals += part.inside.get(place, 0)
                    carried.discard(job)
                _join(joined, merged, e)       # the piece before reported it
                continue
            if k > 0 and e.start_wall_s < boundary:
                if job in carried and last is not None and last.state == e.state:
                    last.end_wall_s = e.end_wall_s
                    last.last_wall_s = e.last_wall_s
                    # the piece's detector, warmed up before its start, counted the
                    # intervals before it too: add only those inside the piece
                    last.intervals += part.inside.get(place, e.intervals)
                    for attr in ("gpus", "devices", "processes"):
                        have = getattr(last, attr)
                        have.extend(x for x in getattr(e, attr) if x not in have)
                    last.gpus.sort()
                    last.reason, last.advice = e.reason or last.reason, e.advice or last.advice
                    last.culprits = e.culprits if e.reason else last.culprits
                    last.whatif = e.whatif if e.reason else last.whatif
                    if e.min_util_pct is not None:
                        last.min_util_pct = e.min_util_pct if last.min_util_pct is None \
                            else min(last.min_util_pct, e.min_util_pct)
                    _join_phases(last, e, boundary)
                    joined[id(e)] = last
                    carried.discard(job)
                    continue
                # the piece before had not opened it yet (too few intervals before its end):
                # keep the start the warmed-up detector found, after what is already listed
                if last is not None and last.end_wall_s is not None:
                    e.start_wall_s = max(e.start_wall_s, last.end_wall_s)
            merged.append(e)
            last_of[job] = e
            carried.discard(job)
        if k > 0:
            for e, _key in part.unlisted:        # ended before the piece: the one before's
                _join(joined, merged, e)
        carried = set(part.open_jobs)
    for i, e in enumerate(merged, 1):
        e.id = i
    return merged
