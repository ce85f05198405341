"""Reading the Chrome trace files that the chapters write with --trace."""
import json


def spans(path):
    """The trace's spans (complete events) as dicts with name, cat, pid, tid, start and end in
    milliseconds, plus `thread`, the name of their row ("main", "MPI worker", ...)."""
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    result = []
    for e in events:
        if e.get("ph") != "X":
            continue
        start = e["ts"] / 1000.0
        result.append({"name": e["name"], "cat": e.get("cat", ""), "pid": e["pid"], "tid": e["tid"],
                       "start": start, "end": start + e["dur"] / 1000.0,
                       "thread": names.get((e["pid"], e["tid"]), "thread %d" % e["tid"])})
    return sorted(result, key=lambda s: (s["start"], -s["end"]))


def outermost(items):
    """The spans of `items` that no other span of `items` on the same row contains."""
    result = []
    for s in items:
        if not any(o is not s and o["pid"] == s["pid"] and o["tid"] == s["tid"] and o["start"] <= s["start"]
                   and s["end"] <= o["end"] and (o["start"], -o["end"]) < (s["start"], -s["end"]) for o in items):
            result.append(s)
    return result
