"""What every figure shares: matplotlib set up for stable SVGs (the same data give the same
file: fixed fonts and sizes, text kept as text, a fixed hash salt, no date) and the colours."""
import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

matplotlib.rcParams.update({
    "svg.hashsalt": "lockstep",
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.dpi": 100,
})

# One colour per kind of work, the same in every figure.
COLOURS = {
    "data": "#8c8c8c", "forward": "#4c72b0", "loss": "#c7a03b", "backward": "#dd8452",
    "step": "#55a868", "communication": "#c44e52", "other": "#d0d0d0",
    "scatter": "#8172b3", "replicate": "#937860", "gather": "#da8bc3", "reduce": "#c44e52",
    "ddp": "#64b5cd", "all_gather": "#8172b3", "reduce_scatter": "#c44e52", "fsdp": "#64b5cd",
}

# The memory ledger's categories (core/memory_ledger.h), in its order, with their colours.
MEMORY_COLOURS = {
    "parameters": "#4c72b0", "gradients": "#dd8452", "optimizer state": "#55a868",
    "unsharded parameters": "#8172b3", "communication buffers": "#c44e52", "activations and other": "#d0d0d0",
}
RANK_COLOURS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52"]


def figure(width, height):
    """A new figure of `width` x `height` inches."""
    return plt.figure(figsize=(width, height))


def save(fig, path):
    """Writes `fig` to `path` as SVG without a date, so that unchanged data give an unchanged file."""
    fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
