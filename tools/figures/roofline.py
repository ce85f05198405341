"""Chapter 2: every layer's forward and backward pass of one training step on a roofline: its
arithmetic intensity (flops per byte it must move) against the GFLOP/s it reached, under the
CPU's flat roof (the f32 FMA peak) and its sloped roofs (bandwidth from the L3 and from memory
times the intensity). A point's area is its share of the time of all the passes.
Usage: roofline.py ROOFLINE.csv OUT.svg  (from cnn_roofline --csv ROOFLINE.csv)"""
import csv
import math
import sys

import figstyle
from matplotlib.transforms import Bbox

# How a pass is named next to its point.
PASSES = {"forward": "fwd", "backward": "bwd", "backward input": "dx", "backward weight": "dW",
          "backward bias": "db"}


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


def place_labels(ax, points, taken):
    """Writes each point's label beside it where it overlaps no point, no label placed before (the
    largest points first) and none of the boxes `taken`, trying the right, left, above and below
    at growing distances. The axes must be laid out (their limits final)."""
    pixels_per_point = ax.figure.dpi / 72
    markers = []
    for x, y, _, size in points:
        centre_x, centre_y = ax.transData.transform((x, y))
        r = (size ** 0.5) / 2 * pixels_per_point
        markers.append(Bbox.from_bounds(centre_x - r, centre_y - r, 2 * r, 2 * r))
    for k, (x, y, text, size) in enumerate(points):
        radius = (size ** 0.5) / 2 + 2  # the marker's radius in points, and a gap
        others = taken + markers[:k] + markers[k + 1:]
        place = None
        for distance in (radius, radius + 8, radius + 16, radius + 26, radius + 40):
            for dx, dy, ha, va in ((distance, 0, "left", "center"), (-distance, 0, "right", "center"),
                                   (0, distance, "center", "bottom"), (0, -distance, "center", "top"),
                                   (distance, distance, "left", "bottom"), (distance, -distance, "left", "top"),
                                   (-distance, distance, "right", "bottom"), (-distance, -distance, "right", "top")):
                label = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va,
                                    fontsize=7)
                box = label.get_window_extent().expanded(1.02, 1.1)
                label.remove()
                if not any(box.overlaps(other) for other in others):
                    place = (dx, dy, ha, va, distance > radius)
                    taken.append(box)
                    break
            if place:
                break
        # Nowhere free nearby: to the right, overlapping.
        dx, dy, ha, va, away = place or (radius, 0, "left", "center", False)
        # Away from its point, a label gets a thin line to it.
        leader = {"arrowstyle": "-", "color": "#999999", "linewidth": 0.5, "shrinkA": 1, "shrinkB": radius - 2}
        ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=7,
                    arrowprops=leader if away else None)


def main(csv_path, out):
    settings, rows, step = read(csv_path)
    peak = float(settings["peak_gflops"])
    memory, l3 = float(settings["bandwidth_gbs"]), float(settings["l3_bandwidth_gbs"])
    threads = int(settings["threads"])
    fig = figstyle.figure(7.5, 5.0)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    x_min = min(r["intensity"] for r in rows) / 2
    x_max = max(r["intensity"] for r in rows) * 3
    y_min = min(r["gflops"] for r in rows) / 2

    # The roofs: a pass of intensity I reaches at most min(peak, bandwidth x I). Each sloped one
    # is labelled some way left of where it meets the peak: above the L3's, below memory's.
    roofs = ((l3, "L3", "-", max(2 * x_min, peak / l3 / 5), "bottom"),
             (memory, "memory", "--", max(2 * x_min, peak / memory / 2.5), "top"))
    for bandwidth, _, style, _, _ in roofs:
        ax.plot([x_min, peak / bandwidth], [bandwidth * x_min, peak], style, color="#555555", linewidth=1.0)
    ax.plot([peak / l3, x_max], [peak, peak], "-", color="#555555", linewidth=1.0)
    ax.set_xlim(x_min, x_max)
    ax.set_ylim(y_min, peak * 2)
    fig.draw_without_rendering()  # lays the axes out, so that the slopes' angle on the page is known
    labels = [ax.annotate("f32 FMA peak %.0f GFLOP/s" % peak, (peak / l3, peak), xytext=(0, 3),
                          textcoords="offset points", ha="left", va="bottom", fontsize=7, color="#555555")]
    for bandwidth, name, _, x, va in roofs:
        (x0, y0), (x1, y1) = ax.transData.transform([(x, bandwidth * x), (10 * x, 10 * bandwidth * x)])
        labels.append(ax.annotate("%s bandwidth %.0f GB/s" % (name, bandwidth), (x, bandwidth * x),
                                  xytext=(0, 3 if va == "bottom" else -3), textcoords="offset points", ha="center",
                                  va=va, rotation=math.degrees(math.atan2(y1 - y0, x1 - x0)),
                                  rotation_mode="anchor", fontsize=7, color="#555555"))

    # One label for the passes of a layer that land on one spot (conv2's three products): a
    # group is (x, y, size, layer, [pass and share, ...]).
    groups = []
    for r in sorted(rows, key=lambda r: -r["share"]):
        colour = figstyle.COLOURS["forward" if r["pass"] == "forward" else "backward"]
        if r["layer"] == "loss":
            colour = figstyle.COLOURS["loss"]
        size = 12 + 1400 * r["share"]
        ax.scatter([r["intensity"]], [r["gflops"]], s=size, color=colour, alpha=0.75, edgecolors="black",
                   linewidths=0.4, zorder=3)
        text = PASSES[r["pass"]] + (" %.0f%%" % (100 * r["share"]) if r["share"] >= 0.01 else "")
        near = [g for g in groups if g[3] == r["layer"] and abs(math.log(g[0] / r["intensity"])) < 0.1
                and abs(math.log(g[1] / r["gflops"])) < 0.1]
        if near:
            near[0][4].append(text)
        else:
            groups.append((r["intensity"], r["gflops"], size, r["layer"], [text]))
    points = [(x, y, "%s %s" % (layer, ", ".join(texts)), size) for x, y, size, layer, texts in groups]
    # The whole step through autograd: all the rows' flops over all their bytes, at its own speed.
    ax.scatter([step["intensity"]], [step["gflops"]], s=90, marker="*", color="black", zorder=4)
    points.insert(0, (step["intensity"], step["gflops"], "whole step %.0f GFLOP/s" % step["gflops"], 90))

    ax.scatter([], [], s=40, color=figstyle.COLOURS["forward"], label="forward pass")
    ax.scatter([], [], s=40, color=figstyle.COLOURS["backward"], label="backward pass (dx, dW, db: gradients)")
    ax.scatter([], [], s=40, color=figstyle.COLOURS["loss"], label="loss")
    legend = ax.legend(frameon=False, loc="upper left", fontsize=7,
                       title="area: share of all the passes' time, in %", title_fontsize=7)
    place_labels(ax, points, [label.get_window_extent() for label in labels] + [legend.get_window_extent()])
    ax.set_xlabel("arithmetic intensity (flops per byte of least traffic)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("Chapter 2's CNN, batch %s, f32: each pass against the roofs\n%s, %d thread%s"
                 % (settings["batch"], settings["machine"], threads, "s" if threads > 1 else ""))
    figstyle.save(fig, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
