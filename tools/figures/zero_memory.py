"""Chapter 8: the ZeRO paper's Figure 1 redone with our own measurements: the model state per
rank (parameters, gradients, optimiser state, and FSDP's gathered units) of ResNet-50 with Adam,
for 1 to 4 ranks in each mode, measured (bars) beside the formulas (marks).
Usage: zero_memory.py RESULTS.csv OUT.svg   (rows: mode,ranks,psi,model_state_bytes)"""
import csv
import sys

import figstyle

MODES = [("none", "DDP", lambda p, n: 16 * p), ("zero1", "ZeRO-1", lambda p, n: 8 * p + 8 * p / n),
         ("zero2", "ZeRO-2", lambda p, n: 4 * p + 12 * p / n), ("fsdp", "FSDP", lambda p, n: 16 * p / n)]


def main(path, out):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    ranks = sorted({int(r["ranks"]) for r in rows})
    fig = figstyle.figure(6.4, 3.4)
    ax = fig.add_subplot()
    width = 0.8 / len(MODES)
    for m, (mode, label, formula) in enumerate(MODES):
        xs, measured, expected = [], [], []
        for n in ranks:
            row = next(r for r in rows if r["mode"] == mode and int(r["ranks"]) == n)
            xs.append(n - 0.4 + width * (m + 0.5))
            measured.append(int(row["model_state_bytes"]) / 2**20)
            expected.append(formula(float(row["psi"]), n) / 2**20)
        ax.bar(xs, measured, width=width * 0.9, color=figstyle.RANK_COLOURS[m], label=label + " (measured)")
        ax.scatter(xs, expected, marker="_", s=180, color="black", zorder=3,
                   label="the formula" if m == 0 else None)
    ax.set_xticks(ranks)
    ax.set_xticklabels(["%d rank%s" % (n, "" if n == 1 else "s") for n in ranks])
    ax.set_ylabel("model state per rank (MiB)")
    ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=5, fontsize=8.5)
    ax.set_title("Chapter 8: ResNet-50 (Ψ = 23.5 M) with Adam, peak model state per rank")
    figstyle.save(fig, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
