"""Chapter 3: one DataParallel training step on a timeline, read from --trace: scatter,
replicate, each replica's forward on its own thread, gather, backward with its reduce nodes
(ticks), step. The whole step is the top panel; scatter, replicate, gather and the reduce nodes
take microseconds, so three panels under it zoom on the start of the step (scatter, replicate),
on gather, and on the end of backward (the reduce nodes, the optimiser step), each window marked
on the whole step by a grey band and its letter.
Usage: phases_timeline.py TRACE.json OUT.svg  (from chapter3 --max-steps N --trace TRACE.json)"""
import sys

import figstyle
import steps
import tracefile
from matplotlib.patches import Patch
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

LABELS = {"scatter": "scatter", "replicate": "replicate", "forward": "a replica's forward", "gather": "gather",
          "backward": "backward (one pass through both replicas)", "step": "optimiser step"}
TEXT = 9  # points: 12 px on the page at 100%
SMALL = 8.5  # points: 11.3 px
ZOOM_SHADE = "#e8e8e8"


def ms(value):
    """A duration in ms as the panels' titles print it: three significant digits at most."""
    return "%.3g ms" % value


def draw(ax, rows, origin, bar_text):
    """One bar per span of `rows` ([(label, [(span, colour key), ...]), ...], top to bottom), times
    in ms after `origin`; a bar wide enough for its name (when bar_text) carries it. The x limits
    must be set first."""
    width = ax.get_xlim()[1] - ax.get_xlim()[0]
    pixels = ax.get_window_extent().width
    for y, (_, items) in enumerate(rows):
        for span, key in items:
            left, length = span["start"] - origin, span["end"] - span["start"]
            # A bar is at least one pixel and a half wide, so that a span of microseconds still shows.
            ax.barh(y, max(length, 1.5 * width / pixels), left=left, height=0.62, color=figstyle.COLOURS[key],
                    edgecolor="none")
            text = {"forward": "forward", "backward": "backward"}.get(key)
            if bar_text and text and length / width * pixels > 7.5 * len(text):
                ax.text(left + length / 2, y, text, ha="center", va="center", fontsize=SMALL, color="white")
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_yticks(range(len(rows)))


def main(trace, out):
    spans = tracefile.spans(trace)
    window = steps.typical_step(spans)
    step = steps.within(spans, window)
    origin = window[0]
    phases = [(s, s["name"]) for s in step if s["cat"] == "parallel" and s["name"] in ("scatter", "replicate", "gather")]
    phases += [(s, "backward") for s in step if s["cat"] == "autograd" and s["name"] == "backward"]
    phases += [(s, "step") for s in step if s["cat"] == "optim"]
    rows = [("DataParallel (main thread)", phases)]
    for thread in ["main"] + sorted({s["thread"] for s in step if s["thread"].startswith("replica")}):
        forwards = [(s, "forward") for s in tracefile.outermost(
            [s for s in step if s["thread"] == thread and s["cat"] == "module" and s["name"] != "DataParallel.forward"])]
        rows.append(("replica 0 (main thread)" if thread == "main" else thread, forwards))
    rows.append(("reduce nodes", []))
    replicas = len(rows) - 2
    # The reduce nodes (replicate's backward: each replica's gradient added into the model's) take
    # a microsecond or less: each is a tick at its start, on the whole step and zoomed alike.
    reduces = [s["start"] - origin for s in step if s["cat"] == "autograd" and s["name"] == "BroadcastBackward"]
    named = {key: s for s, key in phases}
    for needed in ("scatter", "replicate", "gather", "step"):
        if needed not in named:
            raise SystemExit("phases_timeline.py: the typical step holds no '%s' span" % needed)

    # The zoomed windows, in ms after the step's start: (letter, title, start, end).
    def around(first, last, pad):
        return first - pad * (last - first), last + pad * (last - first)
    zooms = [("a", "scatter %s, replicate %s" % (ms(named["scatter"]["end"] - named["scatter"]["start"]),
                                                 ms(named["replicate"]["end"] - named["replicate"]["start"])),
              *around(named["scatter"]["start"] - origin, named["replicate"]["end"] - origin, 0.25)),
             ("b", "gather %s" % ms(named["gather"]["end"] - named["gather"]["start"]),
              *around(named["gather"]["start"] - origin, named["gather"]["end"] - origin, 2.0)),
             ("c", "%d reduce nodes, optimiser step %s" % (len(reduces), ms(named["step"]["end"] - named["step"]["start"])),
              *around(min(reduces + [named["step"]["start"] - origin]), named["step"]["end"] - origin, 0.15))]

    fig = figstyle.figure(7.6, 5.2)
    top = fig.add_axes([0.25, 0.6, 0.73, 0.33])
    top.set_xlim(0, window[1] - window[0])
    for letter, _, start, end in zooms:
        top.axvspan(start, end, color=ZOOM_SHADE, zorder=0, linewidth=0)
        top.text((start + end) / 2, -0.62, letter, ha="center", va="bottom", fontsize=TEXT, fontweight="bold")
    draw(top, rows, origin, bar_text=True)
    top.plot(reduces, [len(rows) - 1] * len(reduces), "|", color=figstyle.COLOURS["reduce"], markersize=13,
             markeredgewidth=1.2)
    top.set_yticklabels([label for label, _ in rows], fontsize=TEXT)
    top.tick_params(axis="x", labelsize=TEXT)
    top.set_xlabel("milliseconds since the step began (the whole step)", fontsize=TEXT)
    top.set_title("Chapter 3: one DataParallel step, %d replicas on the CPU (CNN, batch 64)" % replicas,
                  fontsize=10, pad=16)

    width = 0.73 / len(zooms)
    for k, (letter, title, start, end) in enumerate(zooms):
        ax = fig.add_axes([0.25 + k * width + 0.02, 0.17, width - 0.04, 0.25])
        ax.set_facecolor("#fafafa")
        ax.set_xlim(start, end)
        draw(ax, rows, origin, bar_text=False)
        ax.plot([r for r in reduces if start <= r <= end], [len(rows) - 1] * len([r for r in reduces if start <= r <= end]),
                "|", color=figstyle.COLOURS["reduce"], markersize=11, markeredgewidth=1.2)
        ax.set_yticklabels([label for label, _ in rows] if k == 0 else [], fontsize=TEXT)
        ax.xaxis.set_major_locator(MaxNLocator(3))
        ax.tick_params(axis="x", labelsize=SMALL)
        ax.set_title("%s: %s" % (letter, title.replace(", ", ",\n")), fontsize=SMALL, loc="left")
        for side in ("top", "right"):
            ax.spines[side].set_visible(True)
            ax.spines[side].set_color("#999999")
    fig.text(0.25, 0.075, "zoomed: the same rows, milliseconds since the step began", fontsize=SMALL, ha="left")

    keys = ["scatter", "replicate", "forward", "gather", "backward", "step"]
    handles = [Patch(color=figstyle.COLOURS[k]) for k in keys]
    labels = [LABELS[k] for k in keys]
    handles.append(Line2D([], [], marker="|", linestyle="none", color=figstyle.COLOURS["reduce"], markersize=11,
                          markeredgewidth=1.2))
    labels.append("reduce node: a replica's gradient added into the model's (a tick at its start)")
    handles.append(Patch(color=ZOOM_SHADE))
    labels.append("a, b, c: the windows zoomed below")
    fig.legend(handles, labels, loc="lower left", bbox_to_anchor=(0.0, -0.16), ncol=2, frameon=False,
               fontsize=SMALL, handlelength=1.6, columnspacing=1.5)
    figstyle.save(fig, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
