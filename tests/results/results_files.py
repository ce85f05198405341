"""What the results tests share (tests/results/): running tools/results/results.py and reading
the CSV it writes the way any reader must, with the csv module, so that a reason holding commas
or quotes stays one field."""
import csv
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "results" / "results.py"


def check(condition, message):
    """Ends the test with `message` and exit status 1 unless `condition` holds."""
    if not condition:
        print(f"FAIL: {message}", file=sys.stderr)
        sys.exit(1)


def run_results(args, env=None):
    """Runs results.py with `args`, echoes its output, and fails the test unless it exits 0."""
    proc = subprocess.run([sys.executable, str(SCRIPT)] + args, capture_output=True, text=True, env=env)
    print(proc.stdout + proc.stderr)
    check(proc.returncode == 0, f"results.py exited with status {proc.returncode}")


def read_rows(path):
    """The CSV's rows as dicts keyed by its header, in order."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def row_named(rows, label):
    """The row whose configuration is `label`; fails the test if there is none."""
    found = [row for row in rows if row["configuration"] == label]
    check(len(found) == 1, f"expected one row '{label}', got {len(found)}: {[row['configuration'] for row in rows]}")
    return found[0]


def check_ran(row):
    """The row has a time per epoch, a speed-up, a throughput, an accuracy and a loss, and no note."""
    for key in ("epoch_s", "speedup", "samples_per_s", "test_acc", "final_loss"):
        try:
            value = float(row[key])
        except ValueError:
            value = -1.0
        check(value >= 0, f"'{row['configuration']}' has no number of 0 or more for {key}: {row}")
    check(0 <= float(row["test_acc"]) <= 1, f"'{row['configuration']}' has an accuracy outside [0, 1]: {row}")
    check(row["note"] == "", f"'{row['configuration']}' ran but has a note: {row}")
