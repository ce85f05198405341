"""Finding one training step in a trace."""


def typical_step(spans, pid=0):
    """(start, end) in ms of a typical training step of process `pid`: of the steps after the
    first (which warms up), the one of median length. A step ends with the optimiser's span on
    the main row and starts where the previous one ended."""
    ends = [s["end"] for s in spans if s["pid"] == pid and s["thread"] == "main" and s["cat"] == "optim"]
    windows = sorted(zip(ends, ends[1:]), key=lambda w: (w[1] - w[0], w[0]))
    if not windows:
        raise SystemExit("the trace holds fewer than two training steps: run with --max-steps 3 or more")
    return windows[len(windows) // 2]


def within(spans, window, pid=0):
    """The spans of process `pid` that lie inside `window` (start, end)."""
    return [s for s in spans if s["pid"] == pid and window[0] <= s["start"] and s["end"] <= window[1]]
