"""Chapter 5: the GradScaler's loss scale at every step of an f16 run, the steps it skipped,
and the training loss beside it.
Usage: loss_scale.py METRICS.csv OUT.svg [STEP]  (from chapter5 --amp f16 --metrics; STEP: the
step that --inf-at-step made overflow, labelled as such)"""
import math
import sys

import figstyle
import metrics


def main(csv_path, out, injected=None):
    rows = metrics.steps(csv_path)
    x = [r["step"] for r in rows]
    fig = figstyle.figure(6.0, 4.2)
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    # The scale after each step's update(), on a log2 axis: growth and backoff are +1 and -1.
    top.step(x, [math.log2(r["scale"]) for r in rows], where="post", color="#4c72b0", linewidth=1.2,
             label="loss scale after the step")
    skipped = [r for r in rows if r["skipped"] > 0]
    top.plot([r["step"] for r in skipped], [math.log2(r["scale"]) + 1 for r in skipped], "v", color="#c44e52",
             markersize=5, label="skipped step (inf/NaN gradient): scale halved")
    for r in skipped:
        if injected is not None and r["step"] == int(injected):
            top.annotate("--inf-at-step %d" % r["step"], (r["step"], math.log2(r["scale"]) + 1),
                         textcoords="offset points", xytext=(0, 8), ha="center", fontsize=8, color="#c44e52")
    top.set_ylabel("log2(scale)")
    top.legend(frameon=False, loc="lower right")
    top.set_title("Chapter 5: dynamic loss scaling, CNN in f16 on one CPU")
    loss = [r["loss"] for r in rows]
    bottom.plot(x, loss, color="#55a868", alpha=0.3, linewidth=0.7)
    bottom.plot(x, metrics.moving_average(loss, 20), color="#55a868", linewidth=1.5,
                label="training loss, mean of 20 steps")
    bottom.set_ylim(bottom=0)
    bottom.set_ylabel("loss")
    bottom.set_xlabel("training step (batch of 64)")
    bottom.legend(frameon=False, loc="upper right")
    figstyle.save(fig, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
