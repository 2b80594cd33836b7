"""Text charts over time with plotext, built to a string (no terminal needed).

plotext 6 draws through a figure object (plotext.figure: signal(), draw(), build());
plotext 5 through module functions (plot(), build()).  Both are supported; the text is
colourless so it can be pasted into an incident.
"""

from __future__ import annotations

import datetime as dt

import plotext


def clock_label(wall_s: float, span_s: float) -> str:
    """A tick's label: the time of day, with the date when the span is two days or more."""
    t = dt.datetime.fromtimestamp(wall_s).astimezone()
    if span_s >= 2 * 86400:
        return t.strftime("%m-%d %H:%M")
    return t.strftime("%H:%M" if span_s >= 600 else "%H:%M:%S")


def line_chart(title: str, series: list[tuple[str, list[float], list[float]]],
               marks: list[tuple[float, float, str]], x_lo: float, x_hi: float,
               ticks: tuple[list[float], list[str]], width: int = 100, height: int = 16,
               ylim: tuple[float, float] | None = None, ylabel: str = "") -> str:
    """A colourless chart: each series (label, xs, values) as a line over [x_lo, x_hi];
    each mark (x0, x1, letter) a span drawn along the top of the plot (the episodes, the
    gaps); ticks (positions, labels) along x.  Returns the text, one line per row."""
    if hasattr(plotext, "figure") and hasattr(plotext.figure, "signal"):
        return _plotext6(title, series, marks, x_lo, x_hi, width, height, ylim, ylabel, *ticks)
    return _plotext5(title, series, marks, x_lo, x_hi, width, height, ylim, ylabel, *ticks)


def _yticks(low: float, top: float) -> list[float]:
    return [low + (top - low) * k / 4 for k in range(5)]


def _num(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 10 or v == 0 else f"{v:.2g}"


def _top(ylim, series) -> float:
    if ylim is not None:
        return ylim[1]
    values = [v for _, _, vs in series for v in vs]
    return max(values) if values else 1.0


def _plotext6(title, series, marks, x_lo, x_hi, width, height, ylim, ylabel, ticks, labels) -> str:
    f = plotext.figure
    f.clear()
    f.plot_size(width, height)
    f.theme("colorless")
    top = _top(ylim, series) or 1.0
    for label, xs, ys in series:
        if xs:
            f.draw(f.signal(xs, ys).lines(True))
    band = top * 1.04
    for start, end, letter in marks:
        xs = [start, max(end, start)]
        f.draw(f.signal(xs, [band, band], marker=letter).lines(True))
    f.title(title)
    if ylabel:
        f.label(ylabel, axis="y")
    f.ruler("x").lim(x_lo, x_hi)
    f.ruler("x").ticks(ticks, labels)
    f.ruler("y").lim(ylim[0] if ylim else 0, band * 1.02)
    yt = _yticks(ylim[0] if ylim else 0, top)
    f.ruler("y").ticks(yt, [_num(v) for v in yt])
    text = f.build().string(colorless=True)
    f.clear()
    return text.rstrip("\n")


def _plotext5(title, series, marks, x_lo, x_hi, width, height, ylim, ylabel, ticks, labels) -> str:
    plt = plotext
    plt.clear_figure()
    plt.plotsize(width, height)
    plt.theme("clear")
    top = _top(ylim, series) or 1.0
    for label, xs, ys in series:
        if xs:
            plt.plot(xs, ys)
    band = top * 1.04
    for start, end, letter in marks:
        plt.plot([start, max(end, start)], [band, band], marker=letter)
    plt.title(title)
    if ylabel:
        plt.ylabel(ylabel)
    plt.xlim(x_lo, x_hi)
    plt.xticks(ticks, labels)
    plt.ylim(ylim[0] if ylim else 0, band * 1.02)
    yt = _yticks(ylim[0] if ylim else 0, top)
    plt.yticks(yt, [_num(v) for v in yt])
    text = plt.build()
    plt.clear_figure()
    return plt.uncolorize(text).rstrip("\n")
