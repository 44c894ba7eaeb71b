"""Charts written as SVG text: a plot area with axes, ticks, labels and a legend, and the
marks the report draws in it (bars, lines, points, cells).

The report's plots are a few bars, lines and points each. A plotting library built them,
then rasterised them, taking most of the report's time and the first seconds after the
pipeline had finished; written out directly they cost next to nothing. An ``<img>`` shows
them like any picture: no script, no font or file from elsewhere.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence

FONT = "font-family='DejaVu Sans, Arial, Helvetica, sans-serif'"
AXIS_COLOUR = "#333"
GRID_COLOUR = "#e6e6e6"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (steps of 1, 2 or 5 times a power of ten) covering ``low``..``high``."""
    if not math.isfinite(low) or not math.isfinite(high):
        raise ValueError(f"tick range must be finite, got {low}..{high}")
    if high <= low:
        return [low]
    rough = (high - low) / max(count, 1)
    power = 10 ** math.floor(math.log10(rough))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= rough)
    first = math.floor(low / step + 1e-9) * step
    ticks, value = [], first
    while value <= high + step * 1e-9:
        if value >= low - step * 1e-9:
            ticks.append(round(value, 12))
        value += step
    return ticks


def padded(low: float, high: float, share: float = 0.05) -> tuple[float, float]:
    """The range widened by ``share`` of its span on each side (a flat one by a unit)."""
    span = high - low
    if span <= 0:
        return low - 0.5, high + 0.5
    return low - span * share, high + span * share


def label(value: float) -> str:
    """A tick's value, as short as it reads unambiguously."""
    return f"{value:.4g}"


class Chart:
    """One plot: ``width`` x ``height`` pixels, data ranges mapped onto the area inside the
    margins (``left, right, top, bottom`` in pixels), y growing upwards."""

    def __init__(
        self,
        width: int,
        height: int,
        x_range: tuple[float, float],
        y_range: tuple[float, float],
        margins: tuple[int, int, int, int] = (56, 12, 12, 44),
    ):
        self.width, self.height = width, height
        self.left, self.right, self.top, self.bottom = margins
        self.x_range, self.y_range = x_range, y_range
        self._grid: list[str] = []
        self._marks: list[str] = []
        self._axes: list[str] = []

    def x(self, value: float) -> float:
        low, high = self.x_range
        return self.left + (value - low) / ((high - low) or 1.0) * (self.width - self.left - self.right)

    def y(self, value: float) -> float:
        low, high = self.y_range
        return (
            self.height - self.bottom - (value - low) / ((high - low) or 1.0) * (self.height - self.top - self.bottom)
        )

    def bar(self, x0: float, x1: float, y0: float, y1: float, colour: str, kind: str = "bar") -> None:
        """A rectangle between data coordinates (x0, y0) and (x1, y1)."""
        left, right = sorted((self.x(x0), self.x(x1)))
        top, bottom = sorted((self.y(y0), self.y(y1)))
        self._marks.append(
            f"<rect class='{kind}' x='{left:.1f}' y='{top:.1f}' width='{right - left:.1f}' "
            f"height='{bottom - top:.1f}' fill='{colour}'/>"
        )

    def line(
        self, points: Sequence[tuple[float, float]], colour: str, dotted: bool = False, markers: bool = False
    ) -> None:
        """A polyline through ``points``, with a dot on each when ``markers``."""
        path = " ".join(f"{self.x(x):.1f},{self.y(y):.1f}" for x, y in points)
        dash = " stroke-dasharray='2,3'" if dotted else ""
        self._marks.append(
            f"<polyline class='line' points='{path}' fill='none' stroke='{colour}' stroke-width='1.6'{dash}/>"
        )
        if markers:
            for x, y in points:
                self.point(x, y, 3.0, colour)

    def point(self, x: float, y: float, radius: float, colour: str) -> None:
        self._marks.append(
            f"<circle class='point' cx='{self.x(x):.1f}' cy='{self.y(y):.1f}' r='{radius:.1f}' fill='{colour}'/>"
        )

    def text(
        self,
        x: float,
        y: float,
        words: str,
        size: int = 10,
        anchor: str = "middle",
        colour: str = AXIS_COLOUR,
        rotate: float = 0.0,
    ) -> None:
        """Text at pixel (x, y), its baseline there; rotated about that point."""
        turn = f" transform='rotate({rotate:g} {x:.1f} {y:.1f})'" if rotate else ""
        self._axes.append(
            f"<text x='{x:.1f}' y='{y:.1f}' font-size='{size}' text-anchor='{anchor}' fill='{colour}'{turn}>"
            f"{html.escape(words)}</text>"
        )

    def x_ticks(self, ticks: Sequence[float], labels: Sequence[str] | None = None, slanted: bool = False) -> None:
        """Tick labels under the plot area (slanted ones end under their tick)."""
        base = self.height - self.bottom
        for value, words in zip(ticks, labels or [label(t) for t in ticks], strict=True):
            x = self.x(value)
            self._axes.append(f"<line x1='{x:.1f}' y1='{base}' x2='{x:.1f}' y2='{base + 4}' stroke='{AXIS_COLOUR}'/>")
            if slanted:
                self.text(x + 3, base + 12, words, size=8, anchor="end", rotate=-45)
            else:
                self.text(x, base + 15, words, size=9)

    def y_ticks(self, ticks: Sequence[float], labels: Sequence[str] | None = None, grid: bool = True) -> None:
        """Tick labels left of the plot area, with faint grid lines across it."""
        for value, words in zip(ticks, labels or [label(t) for t in ticks], strict=True):
            y = self.y(value)
            if grid:
                self._grid.append(
                    f"<line x1='{self.left}' y1='{y:.1f}' x2='{self.width - self.right}' y2='{y:.1f}' "
                    f"stroke='{GRID_COLOUR}'/>",
                )
            self._axes.append(
                f"<line x1='{self.left - 4}' y1='{y:.1f}' x2='{self.left}' y2='{y:.1f}' stroke='{AXIS_COLOUR}'/>"
            )
            self.text(self.left - 6, y + 3, words, size=9, anchor="end")

    def titles(self, x: str = "", y: str = "", top: str = "") -> None:
        """Axis titles (x under the tick labels, y turned along the left edge) and a title."""
        if x:
            self.text((self.left + self.width - self.right) / 2, self.height - 6, x)
        if y:
            middle = (self.top + self.height - self.bottom) / 2
            self.text(12, middle, y, rotate=-90)
        if top:
            self.text((self.left + self.width - self.right) / 2, self.top - 4, top, size=10)

    def legend(self, entries: Sequence[tuple[str, str]]) -> None:
        """(label, colour) swatches in a row above the plot area's right end (leave a top
        margin of 20 pixels or more), so they never hide a mark."""
        right = self.width - self.right
        y = max(self.top - 16, 2)
        for words, colour in reversed(entries):
            self._axes.append(f"<rect x='{right - 9}' y='{y}' width='9' height='9' fill='{colour}'/>")
            self.text(right - 12, y + 8, words, size=9, anchor="end")
            right -= 16 + 6 * len(words)

    def svg(self) -> str:
        """The whole chart: frame, marks, then axes and text on top."""
        inner_right, inner_bottom = self.width - self.right, self.height - self.bottom
        frame = f"<path d='M{self.left},{self.top} V{inner_bottom} H{inner_right}' fill='none' stroke='{AXIS_COLOUR}'/>"
        return (
            f"<svg xmlns='http://www.w3.org/2000/svg' width='{self.width}' height='{self.height}' "
            f"viewBox='0 0 {self.width} {self.height}' {FONT}>"
            f"<rect width='100%' height='100%' fill='white'/>"
            + "".join(self._grid)
            + "".join(self._marks)
            + frame
            + "".join(self._axes)
            + "</svg>"
        )

    def uri(self) -> str:
        """The chart as a data URI for an ``<img>``."""
        return "data:image/svg+xml;base64," + base64.b64encode(self.svg().encode("utf-8")).decode("ascii")
