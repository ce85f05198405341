"""Chapter 6: a run killed mid-way and resumed from its checkpoint retraces the uninterrupted
run's losses exactly: the loss of every step of the whole run (line), of the killed run up to
its death, and of the resumed run from its checkpoint on (markers).
Usage: resume_curve.py WHOLE.csv KILLED.csv RESUMED.csv SAVED_STEP OUT.svg
(the three from chapter6 --metrics; SAVED_STEP: the checkpoint the resumed run started from)"""
import sys

import figstyle
import metrics


def main(whole_csv, killed_csv, resumed_csv, saved_step, out):
    whole, killed, resumed = (metrics.steps(p) for p in (whole_csv, killed_csv, resumed_csv))
    saved = int(saved_step)
    # Bitwise the same steps print the same losses: say how many the resumed run matched.
    by_step = {r["step"]: r["loss"] for r in whole}
    same = sum(1 for r in resumed if by_step.get(r["step"]) == r["loss"])
    fig = figstyle.figure(6.0, 3.4)
    ax = fig.subplots()
    ax.plot([r["step"] for r in whole], [r["loss"] for r in whole], color="#4c72b0", linewidth=1.2,
            label="uninterrupted run")
    ax.plot([r["step"] for r in killed], [r["loss"] for r in killed], "x", color="#c44e52", markersize=4,
            label="killed run (rank 1 dies after step %d)" % killed[-1]["step"])
    ax.plot([r["step"] for r in resumed], [r["loss"] for r in resumed], "o", color="#55a868", markersize=3,
            fillstyle="none", label="resumed from the checkpoint of step %d (%d of %d losses identical)"
            % (saved, same, len(resumed)))
    ax.axvline(saved, color="#888888", linewidth=0.8, linestyle="--")
    top = max(r["loss"] for r in whole + killed + resumed)
    ax.set_ylim(0.0, top * 1.08)
    # The checkpoint's line is named at its top, where the loss has long come down.
    ax.annotate("checkpoint of step %d" % saved, (saved, top * 1.08), xytext=(4, -4), textcoords="offset points",
                ha="left", va="top", color="#555555")
    ax.set_xlabel("optimiser step (2 ranks x 32 images)")
    ax.set_ylabel("training loss (rank 0)")
    ax.set_title("Chapter 6: kill, resume, and the same run")
    # The legend below the axes, off the curves.
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(-0.08, -0.17), ncol=1)
    figstyle.save(fig, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
