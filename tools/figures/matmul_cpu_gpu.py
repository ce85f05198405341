"""Chapter 1: matrix multiply time on the CPU, with cuBLAS and with the tiled kernel, per size.
Usage: matmul_cpu_gpu.py TABLE.csv OUT.svg  (TABLE: tools/figures/data/matmul_h100.csv)"""
import csv
import sys

import figstyle
from matplotlib.ticker import FuncFormatter


def main(table, out):
    with open(table) as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    fig = figstyle.figure(7.0, 3.8)
    ax = fig.add_subplot()
    width = 0.26
    series = [("CPU (16 threads)", "cpu_ms", "#8c8c8c"), ("GPU, tiled kernel", "tiled_ms", "#dd8452"),
              ("GPU, cuBLAS", "cublas_ms", "#4c72b0")]
    for i, (label, key, colour) in enumerate(series):
        for j, row in enumerate(rows):
            value = float(row[key])
            estimated = key == "cpu_ms" and row["cpu_estimated"] == "1"
            ax.bar(j + (i - 1) * width, value, width, color="white" if estimated else colour, edgecolor=colour,
                   hatch="///" if estimated else None, label=label if j == 0 else None)
            # The value over each bar, in ms as the axis (8.5 points: 11 px on the page at 100%).
            text = ("~%s\n(estimated)" if estimated else "%s") % row[key]
            ax.text(j + (i - 1) * width, value * 1.15, text, ha="center", va="bottom", fontsize=8.5)
    ax.set_yscale("log")
    ax.set_ylim(0.02, 5000)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: "%g" % value))  # 0.1, 1, 10 ms
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(["n = %s" % row["n"] for row in rows])
    ax.set_ylabel("time of one n x n matmul (ms, log scale)")
    ax.set_title("f32 matmul on one H100 machine: CPU vs GPU")
    ax.legend(frameon=False, loc="upper left", fontsize=9)
    figstyle.save(fig, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
