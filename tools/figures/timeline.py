"""Drawing spans of a trace as a timeline: one row per thread, one bar per span."""
import figstyle


def draw(ax, rows, origin):
    """Draws `rows`, a list of (label, [(span, colour key, text or None)]), top to bottom on `ax`,
    with times in ms after `origin` (set the x limits first: a text shows only on a bar wide enough for it). Returns the colour keys used, for the legend."""
    used = []
    for y, (label, items) in enumerate(rows):
        for span, key, text in items:
            ax.barh(y, span["end"] - span["start"], left=span["start"] - origin, height=0.6,
                    color=figstyle.COLOURS[key], edgecolor="white", linewidth=0.3)
            if text and span["end"] - span["start"] > 0.013 * len(text) * ax.get_xlim()[1]:  # room for it
                ax.text((span["start"] + span["end"]) / 2 - origin, y, text, ha="center", va="center", fontsize=6.5,
                        color="white")
            if key not in used:
                used.append(key)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([label for label, _ in rows])
    ax.invert_yaxis()
    ax.set_xlabel("milliseconds")
    return used


def legend(ax, keys, labels):
    """A legend of the colour `keys` used, named by `labels` ({key: text})."""
    from matplotlib.patches import Patch
    ax.legend([Patch(color=figstyle.COLOURS[k]) for k in keys], [labels[k] for k in keys], frameon=False,
              loc="center left", bbox_to_anchor=(1.01, 0.5))
