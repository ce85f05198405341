"""Reading what the chapters write with --metrics (step,epoch,loss,seconds, and chapter 5's
scale,skipped) and their 'epoch N: ... test_acc X' lines."""
import csv
import re


def steps(path):
    """The rows of a --metrics CSV as dicts of numbers: step and epoch as ints, every other
    column (loss, seconds, and any a chapter adds) as floats."""
    with open(path) as f:
        return [{key: int(value) if key in ("step", "epoch") else float(value) for key, value in r.items()}
                for r in csv.DictReader(f)]


def test_accuracy(log_path):
    """{epoch: test accuracy} from a chapter's output (its 'epoch N: ... test_acc X' lines)."""
    accuracy = {}
    with open(log_path) as f:
        for line in f:
            match = re.search(r"epoch (\d+): .*test_acc ([0-9.]+)", line)
            if match:
                accuracy[int(match.group(1))] = float(match.group(2))
    return accuracy


def moving_average(values, window):
    """The mean of each value and the window - 1 before it (fewer at the start)."""
    result, total = [], 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        result.append(total / min(i + 1, window))
    return result
