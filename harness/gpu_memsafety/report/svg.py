"""SVG drawings: a finding's buffer (gpu_memsafety.report.picture) and the findings-per-kernel plot of `history`.

Plain SVG 1.1 text, built by hand: no library, no script, no external reference, colours as presentation
attributes (no <style>), so a drawing is the same inline in report.html (whose Content-Security-Policy allows
no style element it did not hash) and saved as a file on its own. Every foreign string is shown through
`visible` and XML-escaped; a label too long for its place is cut, its full text kept in a <title> tooltip.
"""
from __future__ import annotations

from html import escape
from typing import Mapping, Sequence

from gpu_memsafety.report.picture import (BACK_GUARD, FOLDED, FRONT_GUARD, OUTSIDE, PADDING, ROW, TAIL, TENSOR,
                                          UNUSED, Picture, Segment)
from gpu_memsafety.report.render import clip, visible

SVG_NS = "http://www.w3.org/2000/svg"
FONT = "font-family=\"ui-monospace, SFMono-Regular, Menlo, Consolas, monospace\""
CHAR_PX = 6.7          # width of one character of 11 px monospace, for fitting labels
WIDTH = 880
FILL = {FRONT_GUARD: "#f2c14e", BACK_GUARD: "#f2c14e", TAIL: "#f7dc8a", TENSOR: "#9ecae1", ROW: "#9ecae1",
        PADDING: "#e3e3e3", FOLDED: "#c6dbef", UNUSED: "#bdbdbd", OUTSIDE: "#ffffff"}
MARK = "#d62728"


def text(value: str) -> str:
    """Foreign text as SVG/XML character data (also right for HTML and for attribute values)."""
    return escape(visible(value, newlines=False), quote=True)


def _label(x: float, y: float, value: str, room_px: float, *, anchor: str = "start", size: int = 11,
           weight: str = "normal") -> str:
    chars = max(int(room_px / (CHAR_PX * size / 11)), 1)
    shown = clip(value, chars) if len(value) > chars else value
    tip = f"<title>{text(value)}</title>" if shown != value else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" font-weight="{weight}" text-anchor="{anchor}" '
            f'{FONT}>{tip}{text(shown)}</text>')


def picture_svg(pic: Picture, width: int = WIDTH) -> str:
    """The buffer as a strip of segments, the finding's ranges in red, numbered, listed below with their
    logical place; the tensor's first and last bytes in the scenario's words above."""
    pad, bar_y, bar_h = 8, 0, 30
    parts: list[str] = [_label(pad, 16, pic.title, width - 2 * pad, weight="bold", size=12)]
    y = 16
    for head, words in (("from", pic.first), ("to", pic.last)):
        if words:
            y += 15
            parts.append(_label(pad, y, f"tensor {head}: {words}", width - 2 * pad))
    bar_y = y + 22
    inner = width - 2 * pad
    total = sum(s.weight for s in pic.segments)
    left = float(pad)
    for seg in pic.segments:
        w = seg.weight / total * inner
        dash = ' stroke-dasharray="4 3"' if seg.kind == OUTSIDE else ""
        parts.append(f'<rect x="{left:.1f}" y="{bar_y}" width="{w:.1f}" height="{bar_h}" fill="{FILL.get(seg.kind, "#eee")}" '
                     f'stroke="#555" stroke-width="0.8"{dash}><title>{text(_seg_tip(seg))}</title></rect>')
        shown = seg.label if len(seg.label) * CHAR_PX <= w - 4 else seg.short if len(seg.short) * CHAR_PX <= w - 2 else ""
        if shown:
            parts.append(_label(left + w / 2, bar_y + 19, shown, w, anchor="middle"))
        left += w
    numbered = 1 < len(pic.marks) < 10
    for mark in pic.marks:
        lo, hi = pic.span(mark)
        x0 = pad + lo * inner
        w = max((hi - lo) * inner, 4.0)     # a 1-byte range must still show
        tip = f"<title>{text(mark.text())}</title>"
        parts.append(f'<rect x="{x0:.1f}" y="{bar_y}" width="{w:.1f}" height="{bar_h}" fill="{MARK}" '
                     f'fill-opacity="0.45">{tip}</rect>')
        parts.append(f'<rect x="{x0:.1f}" y="{bar_y + bar_h + 2}" width="{w:.1f}" height="7" fill="{MARK}">{tip}</rect>')
        if numbered:
            parts.append(f'<text x="{x0 + w / 2:.1f}" y="{bar_y - 7}" font-size="11" font-weight="bold" '
                         f'text-anchor="middle" fill="{MARK}" {FONT}>{mark.number}</text>')
    axis_y = bar_y + bar_h + 24
    parts += _axis(pic, pad, inner, axis_y)
    y = axis_y + 6
    for mark in pic.legend:
        y += 16
        key = str(mark.number) if numbered else "\u25b2"
        parts.append(f'<text x="{pad}" y="{y}" font-size="11" font-weight="bold" fill="{MARK}" {FONT}>{key}</text>')
        parts.append(_label(pad + 18, y, mark.text(), inner - 18))
    if pic.unlisted:
        y += 16
        parts.append(_label(pad + 18, y, f"and {pic.unlisted:,} more ranges (all in report.json)", inner - 18))
    height = y + 10
    return (f'<svg xmlns="{SVG_NS}" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'class="buffer-picture"><title>{text(pic.title)}</title>'
            f'<rect width="{width}" height="{height}" fill="#ffffff"/>' + "".join(parts) + "</svg>")


def _seg_tip(seg: Segment) -> str:
    return f"{seg.label}: bytes {seg.start:+,}..{seg.end:+,} ({seg.nbytes:,} B)"


def _axis(pic: Picture, pad: int, inner: float, y: float) -> list[str]:
    """Offsets under the bar: the tensor's first byte and its end, when the layout is known."""
    ticks = [0]
    tensor_end = max((s.end for s in pic.segments if s.kind in (TENSOR, ROW, PADDING, FOLDED, UNUSED)), default=0)
    if pic.recorded and tensor_end:
        ticks.append(tensor_end)
    out = []
    for i, offset in enumerate(ticks):
        x = pad + pic.x(offset) * inner
        anchor = "start" if i == 0 else "end"
        out.append(f'<line x1="{x:.1f}" y1="{y - 21}" x2="{x:.1f}" y2="{y - 9}" stroke="#333"/>')
        out.append(f'<text x="{x:.1f}" y="{y:.1f}" font-size="10" text-anchor="{anchor}" fill="#333" {FONT}>'
                   f'{"tensor start +0" if i == 0 else f"tensor end +{offset:,}"}</text>')
    return out


# ---------------------------------------------------------------------------------------------- plot

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")


def line_plot(title: str, xlabels: Sequence[str], series: Mapping[str, Sequence[int | None]], *,
              ylabel: str = "findings", width: int = 900) -> str:
    """One line per series over the x labels (None: no value that run); the legend below, one series a line."""
    pad_l, pad_r, top, plot_h = 56, 16, 34, 240
    inner = width - pad_l - pad_r
    values = [v for vs in series.values() for v in vs if v is not None]
    ymax = max(values, default=0)
    step = _nice_step(ymax)
    ytop = max(step * -(-ymax // step), step)
    n = len(xlabels)

    def px(i: int) -> float:
        return pad_l + (inner / 2 if n == 1 else i * inner / (n - 1))

    def py(v: float) -> float:
        return top + plot_h - v / ytop * plot_h

    parts = [_label(pad_l, 20, title, inner, weight="bold", size=13)]
    for v in range(0, ytop + 1, step):
        parts.append(f'<line x1="{pad_l}" y1="{py(v):.1f}" x2="{width - pad_r}" y2="{py(v):.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{pad_l - 6}" y="{py(v) + 4:.1f}" font-size="10" text-anchor="end" {FONT}>{v:,}</text>')
    parts.append(f'<text x="14" y="{top + plot_h / 2:.1f}" font-size="11" text-anchor="middle" '
                 f'transform="rotate(-90 14 {top + plot_h / 2:.1f})" {FONT}>{text(ylabel)}</text>')
    every = max(1, -(-n // 12))
    for i, label in enumerate(xlabels):
        if i % every == 0 or i == n - 1:
            x = px(i)
            parts.append(f'<line x1="{x:.1f}" y1="{top + plot_h}" x2="{x:.1f}" y2="{top + plot_h + 4}" stroke="#333"/>')
            anchor = "start" if i == 0 and n > 1 else "end" if i == n - 1 and n > 1 else "middle"
            parts.append(f'<text x="{x:.1f}" y="{top + plot_h + 16}" font-size="10" text-anchor="{anchor}" {FONT}>'
                         f'{text(clip(label, 16))}</text>')
    for index, (name, vs) in enumerate(series.items()):
        colour, dash = _style(index)
        points = [(px(i), py(v)) for i, v in enumerate(vs) if v is not None]
        if len(points) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        parts += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"><title>{text(name)}</title></circle>'
                  for x, y in points]
    y = top + plot_h + 36
    for index, name in enumerate(series):
        colour, dash = _style(index)
        parts.append(f'<line x1="{pad_l}" y1="{y - 4}" x2="{pad_l + 14}" y2="{y - 4}" stroke="{colour}" '
                     f'stroke-width="3"{dash}/>')
        parts.append(_label(pad_l + 18, y, name, inner - 18))
        y += 16
    height = y + 4
    return (f'<svg xmlns="{SVG_NS}" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">'
            f'<title>{text(title)}</title><rect width="{width}" height="{height}" fill="#ffffff"/>'
            + "".join(parts) + "</svg>\n")


def _style(index: int) -> tuple[str, str]:
    """A series' colour, and past the palette's length a dash pattern, so no two of 30 lines look alike."""
    dashes = ("", ' stroke-dasharray="6 3"', ' stroke-dasharray="2 3"')
    return PALETTE[index % len(PALETTE)], dashes[(index // len(PALETTE)) % len(dashes)]


def _nice_step(ymax: int) -> int:
    """A grid step of 1, 2 or 5 times a power of ten giving at most about five lines."""
    if ymax <= 5:
        return 1
    magnitude = 10 ** (len(str(ymax // 5)) - 1)
    for factor in (1, 2, 5, 10):
        if ymax / (factor * magnitude) <= 5:
            return factor * magnitude
    return 10 * magnitude
