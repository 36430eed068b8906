"""Charts for the HTML report as inline SVG text: bars with error bars, and histograms.

Plain SVG written here rather than a plotting library: the report needs only two chart
kinds on linear axes, and hand-written SVG is a few KB per chart, renders in every browser
with no script, takes its colours from the page's CSS (so it follows light/dark mode), and
costs no dependency or import time. Every bar carries a ``<title>`` (the browser's native
tooltip) with its exact numbers.

>>> svg = bar_chart("Accuracy", [Bar("a", 0.5, 0.4, 0.6, 10), Bar("OVERALL", 0.5, emphasis=True)])
>>> svg.startswith("<svg") and svg.count('class="gs-bar') == 2
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

_TOP, _BOTTOM, _LEFT, _RIGHT = 26, 38, 44, 10


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar: a fraction in [0, 1] with an optional confidence interval."""

    label: str
    value: float | None
    low: float | None = None
    high: float | None = None
    num: int = 0
    emphasis: bool = False
    cls: str = ""  # an extra CSS class, e.g. the run's colour in a comparison


def _pct(v: float) -> str:
    text = f"{v * 100:.1f}".removesuffix(".0")
    return f"{text}%"


def _f(v: float) -> str:
    return f"{v:.1f}".removesuffix(".0")


def nice_ticks(top: float, count: int = 4, *, integer: bool = False) -> list[float]:
    """Round tick values from 0 to at least ``top`` (whole steps only with ``integer``).

    >>> nice_ticks(7), nice_ticks(0.37), nice_ticks(1, integer=True)
    ([0, 2, 4, 6, 8], [0.0, 0.1, 0.2, 0.3, 0.4], [0, 1])
    """
    if top <= 0:
        return [0, 1]
    raw = top / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
    if integer:
        step = max(1, math.ceil(step))
    n = math.ceil(top / step - 1e-9)
    return [round(i * step, 10) if step < 1 else round(i * step) for i in range(n + 1)]


def _short(label: str, width: float) -> str:
    room = max(3, int(width / 6.2))
    return label if len(label) <= room else label[: room - 1] + "…"


def _frame(title: str, width: int, height: int, body: list[str], *, title_x: int = 8) -> str:
    head = (f'<svg class="gs-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="{escape(title)}">')
    title_el = f'<text class="gs-title" x="{title_x}" y="16">{escape(title)}</text>'
    return "".join([head, f"<title>{escape(title)}</title>", title_el, *body, "</svg>"])


def _y_axis(ticks: Sequence[float], y_of: Callable[[float], float], width: int,
            fmt: Callable[[float], str]) -> list[str]:
    out = []
    for t in ticks:
        y = _f(y_of(t))
        out.append(f'<line class="gs-grid" x1="{_LEFT}" x2="{width - _RIGHT}" y1="{y}" y2="{y}"/>')
        out.append(f'<text class="gs-tick" x="{_LEFT - 4}" y="{y}" text-anchor="end" '
                   f'dominant-baseline="middle">{escape(fmt(t))}</text>')
    return out


def bar_chart(title: str, bars: Sequence[Bar], *, plot_w: int = 180) -> str:
    """Horizontal bars on a 0-100% axis, each with its CI as an error bar and its value."""
    longest = max((len(b.label) for b in bars), default=4)
    label_w, value_w, row_h = int(min(170, max(60, 6.3 * longest + 12))), 46, 22
    width = label_w + plot_w + value_w + 8
    height = _TOP + row_h * len(bars) + 22

    def x_of(v: float) -> float:
        return label_w + plot_w * min(1.0, max(0.0, v))

    bottom = _TOP + row_h * len(bars)
    body = []
    for t in (0, 0.25, 0.5, 0.75, 1.0):
        x = _f(x_of(t))
        body.append(f'<line class="gs-grid" x1="{x}" x2="{x}" y1="{_TOP - 4}" y2="{bottom}"/>')
        body.append(f'<text class="gs-tick" x="{x}" y="{bottom + 13}" text-anchor="middle">'
                    f"{_pct(t)}</text>")
    for i, bar in enumerate(bars):
        y0 = _TOP + i * row_h
        cy = y0 + row_h / 2
        value = "n/a" if bar.value is None else _pct(bar.value)
        tip = f"{bar.label}: {value}"
        if bar.low is not None and bar.high is not None:
            tip += f" (95% CI {_pct(bar.low)}–{_pct(bar.high)})"
        tip += f", n={bar.num}"
        body.append(f'<text class="gs-tick" x="{label_w - 6}" y="{_f(cy)}" text-anchor="end" '
                    f'dominant-baseline="middle"><title>{escape(bar.label)}</title>'
                    f"{escape(_short(bar.label, label_w - 8))}</text>")
        if bar.value is not None:
            cls = " ".join(filter(None, ["gs-bar", "gs-bar-em" if bar.emphasis else "", bar.cls]))
            body.append(f'<rect class="{cls}" x="{label_w}" y="{_f(y0 + 4)}" '
                        f'width="{_f(x_of(bar.value) - label_w)}" height="{row_h - 8}">'
                        f"<title>{escape(tip)}</title></rect>")
        if bar.low is not None and bar.high is not None:
            lo, hi = _f(x_of(bar.low)), _f(x_of(bar.high))
            body.append(f'<path class="gs-err" d="M{lo} {_f(cy)}H{hi}M{lo} {_f(cy - 5)}V{_f(cy + 5)}'
                        f'M{hi} {_f(cy - 5)}V{_f(cy + 5)}"><title>{escape(tip)}</title></path>')
        body.append(f'<text class="gs-val" x="{width - 6}" y="{_f(cy)}" text-anchor="end" '
                    f'dominant-baseline="middle">{value}</text>')
    return _frame(title, width, height, body)


def bin_counts(values: Sequence[float], lo: float, hi: float, bins: int
               ) -> tuple[list[int], list[float]]:
    """Counts of ``values`` (clipped to [lo, hi]; NaN left out) in ``bins`` equal bins over
    [lo, hi], the last one closed, and the ``bins + 1`` edges: numpy's ``histogram`` of the
    clipped values, to the bit (its edges ``i * step + lo``, its bin ``(v - lo) / (hi - lo)
    * bins`` then corrected by the edges). Pure Python, so a report of more than
    ``BOOTSTRAP_MAX_N`` samples imports no numpy: ~12 MB of peak RSS at the end of a run.

    >>> bin_counts([0.0, 0.25, 0.5, 1.0, 7.0, float("nan")], 0.0, 1.0, 4)
    ([1, 1, 1, 2], [0.0, 0.25, 0.5, 0.75, 1.0])
    """
    lo, hi = float(lo), float(hi)
    step = (hi - lo) / bins
    edges = [i * step + lo for i in range(bins)] + [hi]
    counts = [0] * bins
    for raw in values:
        v = min(max(float(raw), lo), hi)
        if v != v:  # NaN
            continue
        i = min(int((v - lo) / (hi - lo) * bins), bins - 1)
        if v < edges[i]:
            i -= 1
        elif i != bins - 1 and v >= edges[i + 1]:
            i += 1
        counts[i] += 1
    return counts, edges


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of ``ordered`` (sorted, not empty; NaN if it holds a NaN):
    numpy's default (linear) ``percentile``, to the bit: index ``(n - 1) * (q / 100)``,
    then its two-sided interpolation between the neighbours.

    >>> percentile([1.0, 2.0, 4.0], 50), percentile([1.0, 2.0, 4.0], 90)
    (2.0, 3.6)
    """
    if any(v != v for v in ordered):
        return math.nan
    index = (len(ordered) - 1) * (q / 100)
    below = math.floor(index)
    a, b = ordered[below], ordered[min(below + 1, len(ordered) - 1)]
    t, diff = index - below, b - a
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t


def histogram(title: str, values: Sequence[float], *, lo: float, hi: float, bins: int,
              fmt: Callable[[float], str], unit: str = "samples", width: int = 270,
              height: int = 170) -> str:
    """Counts of ``values`` in ``bins`` equal bins over [lo, hi] (the last bin is closed)."""
    hi = hi if hi > lo else lo + 1.0
    counts, edges = bin_counts(values, lo, hi, bins)
    ticks = nice_ticks(float(max(counts)) if counts else 1.0, integer=True)
    plot_h, plot_w = height - _TOP - _BOTTOM, width - _LEFT - _RIGHT

    def y_of(v: float) -> float:
        return _TOP + plot_h * (1 - v / ticks[-1])

    body = _y_axis(ticks, y_of, width, lambda t: f"{t:g}")
    step = plot_w / bins
    for i, c in enumerate(counts):
        if not c:
            continue
        top = y_of(c)
        close = "]" if i == bins - 1 else ")"
        tip = f"[{fmt(edges[i])}, {fmt(edges[i + 1])}{close}: {c} {unit}"
        body.append(f'<rect class="gs-bar" x="{_f(_LEFT + i * step + 0.5)}" y="{_f(top)}" '
                    f'width="{_f(max(1.0, step - 1))}" height="{_f(_TOP + plot_h - top)}">'
                    f"<title>{escape(tip)}</title></rect>")
    base = _TOP + plot_h
    for frac, anchor in ((0.0, "start"), (0.5, "middle"), (1.0, "end")):
        x = _LEFT + plot_w * frac
        body.append(f'<text class="gs-tick" x="{_f(x)}" y="{_f(base + 14)}" text-anchor="{anchor}">'
                    f"{escape(fmt(lo + (hi - lo) * frac))}</text>")
    body.append(f'<text class="gs-val" x="{_f(_LEFT + plot_w / 2)}" y="{_f(base + 30)}" '
                f'text-anchor="middle">n={len(values)}</text>')
    return _frame(title, width, height, body)
