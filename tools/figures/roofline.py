"""Chapter 2: every layer's forward and backward pass of one training step on a roofline: its
arithmetic intensity (flops per byte it must move) against the GFLOP/s it reached, under the
CPU's flat roof (the f32 FMA peak) and its sloped roofs (bandwidth from the L3 and from memory
times the intensity). A point's area is its share of the time of all the passes. Each point (or
each group of one layer's passes that land on one spot) carries a number, and the table beside
the plot says which layer and pass it is, so that no name has to fit between the points.
Usage: roofline.py ROOFLINE.csv OUT.svg  (from cnn_roofline --csv ROOFLINE.csv)"""
import csv
import math
import sys

import figstyle
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter
from matplotlib.transforms import Bbox

# How a pass is named in the table.
PASSES = {"forward": "fwd", "backward": "bwd", "backward input": "dx", "backward weight": "dW",
          "backward bias": "db"}
TEXT = 9  # points: 12 px on the page at 100%
SMALL = 8.5  # points: the table and the roofs' names, 11.3 px


def read(path):
    """The header's settings ({"peak_gflops": "117.40", ...}), the rows, and the row of the whole
    step through autograd, numbers as floats."""
    settings, lines = {}, []
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                key, _, value = line[1:].strip().partition("=")
                settings[key] = value
            else:
                lines.append(line)
    rows, step, total_bytes = [], None, None
    for r in csv.DictReader(lines):
        if r["layer"] == "total":
            total_bytes = float(r["bytes"])
        elif r["layer"] == "step":
            step = {"flops": float(r["flops"]), "gflops": float(r["gflops"])}
        else:
            for key in ("flops", "bytes", "intensity", "ms", "gflops", "share"):
                r[key] = float(r[key])
            rows.append(r)
    step["intensity"] = step["flops"] / total_bytes
    return settings, rows, step


def marker_size(share):
    """A marker's area in points squared: proportional to its share of the time, and never a speck."""
    return 14 + 1400 * share


def place_numbers(ax, points, taken):
    """Writes each point's number beside it where it overlaps no marker, no number placed before
    and none of the boxes `taken`, trying the right, left, above and below at growing distances; a
    number away from its point gets a thin leader line. The axes must be laid out."""
    pixels_per_point = ax.figure.dpi / 72
    markers = []
    for x, y, _, size in points:
        centre_x, centre_y = ax.transData.transform((x, y))
        r = (size ** 0.5) / 2 * pixels_per_point
        markers.append(Bbox.from_bounds(centre_x - r, centre_y - r, 2 * r, 2 * r))
    axes_box = ax.get_window_extent()
    for k, (x, y, text, size) in enumerate(points):
        radius = (size ** 0.5) / 2 + 1.5  # the marker's radius in points, and a gap
        others = taken + markers
        place = None
        for distance in (radius, radius + 6, radius + 12, radius + 20, radius + 30, radius + 42):
            for dx, dy, ha, va in ((distance, 0, "left", "center"), (-distance, 0, "right", "center"),
                                   (0, distance, "center", "bottom"), (0, -distance, "center", "top"),
                                   (distance, distance, "left", "bottom"), (distance, -distance, "left", "top"),
                                   (-distance, distance, "right", "bottom"), (-distance, -distance, "right", "top")):
                label = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va,
                                    fontsize=TEXT, fontweight="bold")
                box = label.get_window_extent().expanded(1.15, 1.1)
                label.remove()
                inside = (axes_box.x0 <= box.x0 and box.x1 <= axes_box.x1 and axes_box.y0 <= box.y0
                          and box.y1 <= axes_box.y1)
                if inside and not any(box.overlaps(other) for other in others):
                    place = (dx, dy, ha, va, distance > radius)
                    taken.append(box)
                    break
            if place:
                break
        if place is None:
            raise SystemExit("roofline.py: no free place for the number %s near its point" % text)
        dx, dy, ha, va, away = place
        leader = {"arrowstyle": "-", "color": "#777777", "linewidth": 0.6, "shrinkA": 0, "shrinkB": radius - 1.5}
        ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=TEXT,
                    fontweight="bold", arrowprops=leader if away else None, zorder=5)


def groups_of(rows):
    """The points to number, in the order of the step (the forward passes, then the backward
    ones): one layer's passes that land on one spot (conv2's three products) share a number.
    Each group is (x, y, size, layer, [(pass, share), ...])."""
    groups = []
    for r in rows:
        near = [g for g in groups if g[3] == r["layer"] and abs(math.log(g[0] / r["intensity"])) < 0.12
                and abs(math.log(g[1] / r["gflops"])) < 0.12]
        if near:
            near[0][4].append((r["pass"], r["share"]))
        else:
            groups.append((r["intensity"], r["gflops"], marker_size(r["share"]), r["layer"],
                           [(r["pass"], r["share"])]))
    return groups


def share_text(share):
    return "%.0f%%" % (100 * share) if share >= 0.0095 else "<1%"


def key(side, groups, step):
    """The key under the plot: what the colours mean, then one entry per number, in columns."""
    row = 13.0 / (side.get_window_extent().height * 72 / side.figure.dpi)  # 13 points, in axes units
    items = ((figstyle.COLOURS["forward"], "o", "forward pass (fwd)"),
             (figstyle.COLOURS["backward"], "o", "backward pass (bwd), or the gradient of the input (dx), weights (dW), bias (db)"),
             (figstyle.COLOURS["loss"], "o", "loss (cross-entropy)"),
             ("black", "*", "the whole step through autograd, %.0f GFLOP/s" % step["gflops"]))
    for k, (colour, marker, text) in enumerate(items):
        x, y = 0.0, 1 - k * row
        side.add_line(Line2D([x + 0.008], [y - row * 0.36], marker=marker, markersize=9 if marker == "*" else 7,
                             color=colour, markeredgecolor="black", markeredgewidth=0.4, linestyle="none",
                             transform=side.transAxes, clip_on=False))
        side.text(x + 0.022, y, text, fontsize=SMALL, va="top")
    side.text(0.0, 1 - len(items) * row - 0.2 * row, "A marker's area is its share of the time of all the passes. "
              "The numbers, in the order of the step:", fontsize=SMALL, va="top")
    top = 1 - (len(items) + 1.4) * row
    per_column = math.ceil(len(groups) / 3)
    for number, (_, _, _, layer, passes) in enumerate(groups, 1):
        column, line = divmod(number - 1, per_column)
        x, y = column / 3, top - line * row
        side.text(x + 0.025, y, str(number), fontsize=SMALL, va="top", ha="right", fontweight="bold")
        side.text(x + 0.035, y, "%s  %s" % (layer, ", ".join("%s %s" % (PASSES[p], share_text(s))
                                                              for p, s in passes)), fontsize=SMALL, va="top")
    if top - (per_column - 1) * row - row < -0.02:
        raise SystemExit("roofline.py: the key is taller than its place; make the figure taller")


def main(csv_path, out):
    settings, rows, step = read(csv_path)
    peak = float(settings["peak_gflops"])
    memory, l3 = float(settings["bandwidth_gbs"]), float(settings["l3_bandwidth_gbs"])
    threads = int(settings["threads"])
    fig = figstyle.figure(7.6, 7.4)
    ax = fig.add_axes([0.09, 0.43, 0.89, 0.52])
    side = fig.add_axes([0.0, 0.0, 1.0, 0.345])
    side.axis("off")
    ax.set_xscale("log")
    ax.set_yscale("log")
    x_min = min(r["intensity"] for r in rows) / 2
    x_max = max(r["intensity"] for r in rows) * 3
    y_min = 10 ** math.floor(math.log10(min(r["gflops"] for r in rows) / 1.5))

    # The roofs: a pass of intensity I reaches at most min(peak, bandwidth x I). Each sloped one
    # is named some way left of where it meets the peak, where no point lies: above the L3 roof near
    # its top, below memory's roof further down.
    roofs = ((l3, "L3", "-", max(1.5 * x_min, peak / l3 / 4), "bottom"),
             (memory, "memory", "--", max(1.5 * x_min, peak / memory / 25), "top"))
    for bandwidth, _, style, _, _ in roofs:
        ax.plot([x_min, peak / bandwidth], [bandwidth * x_min, peak], style, color="#555555", linewidth=1.0)
    ax.plot([peak / l3, x_max], [peak, peak], "-", color="#555555", linewidth=1.0)
    ax.set_xlim(x_min, x_max)
    ax.set_ylim(y_min, peak * 2.5)
    ax.tick_params(labelsize=TEXT)
    for axis in (ax.xaxis, ax.yaxis):  # 0.1, 1, 10 rather than powers of ten
        axis.set_major_formatter(FuncFormatter(lambda value, _: "%g" % value))
    fig.draw_without_rendering()  # lays the axes out, so that the slopes' angle on the page is known
    labels = [ax.annotate("f32 FMA peak %.0f GFLOP/s" % peak, (peak / l3, peak), xytext=(0, 3),
                          textcoords="offset points", ha="left", va="bottom", fontsize=SMALL, color="#444444")]
    for bandwidth, name, _, x, va in roofs:
        (x0, y0), (x1, y1) = ax.transData.transform([(x, bandwidth * x), (10 * x, 10 * bandwidth * x)])
        labels.append(ax.annotate("%s %.0f GB/s" % (name, bandwidth), (x, bandwidth * x),
                                  xytext=(0, 3 if va == "bottom" else -3), textcoords="offset points", ha="left",
                                  va=va, rotation=math.degrees(math.atan2(y1 - y0, x1 - x0)),
                                  rotation_mode="anchor", fontsize=SMALL, color="#444444"))

    for r in rows:
        colour = figstyle.COLOURS["forward" if r["pass"] == "forward" else "backward"]
        if r["layer"] == "loss":
            colour = figstyle.COLOURS["loss"]
        ax.scatter([r["intensity"]], [r["gflops"]], s=marker_size(r["share"]), color=colour, alpha=0.8,
                   edgecolors="black", linewidths=0.4, zorder=3)
    # The whole step through autograd: all the rows' flops over all their bytes, at its own speed.
    ax.scatter([step["intensity"]], [step["gflops"]], s=110, marker="*", color="black", zorder=4)
    groups = groups_of(rows)
    points = [(x, y, str(number), size) for number, (x, y, size, _, _) in enumerate(groups, 1)]
    star = ax.transData.transform((step["intensity"], step["gflops"]))
    star_box = Bbox.from_bounds(star[0] - 6, star[1] - 6, 12, 12)
    place_numbers(ax, points, [label.get_window_extent() for label in labels] + [star_box])
    key(side, groups, step)

    ax.set_xlabel("arithmetic intensity (flops per byte of least traffic)", fontsize=TEXT)
    ax.set_ylabel("GFLOP/s", fontsize=TEXT)
    fig.suptitle("Chapter 2's CNN, batch %s, f32: each pass against the roofs (%s, %d thread%s)"
                 % (settings["batch"], settings["machine"], threads, "s" if threads > 1 else ""),
                 x=0.02, ha="left", fontsize=10)
    figstyle.save(fig, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
