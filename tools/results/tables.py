"""The results table's three files (tools/results/results.py): a CSV for programs, a markdown
table for readers and an SVG bar chart, from the same rows. A row that did not run keeps its
reason, whatever text that is: the CSV quotes it as the csv module does (read it back with
csv.reader, never by splitting on commas), the markdown escapes its "|", the SVG its markup.
"""
import csv
from pathlib import Path


def updates(row, train_images):
    """The optimiser steps of one epoch of train_images in the row's effective batch."""
    return -(-train_images // row.effective_batch)  # batches per epoch: the last one may be short


def write_csv(path, rows, train_images, base):
    """One line per row: its numbers where it ran (speed-up over `base` s per epoch, if any), else
    its reason in the column "note"."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["configuration", "devices", "per_device_batch", "effective_batch", "updates_per_epoch",
                    "epoch_s", "speedup", "samples_per_s", "test_acc", "final_loss", "peak_mib", "note"])
        for r in rows:
            if r.result:
                w.writerow([r.label, r.devices, r.per_device_batch, r.effective_batch, updates(r, train_images),
                            f"{r.result['epoch_s']:.2f}", f"{base / r.result['epoch_s']:.2f}" if base else "",
                            f"{r.result['samples_per_s']:.1f}", f"{r.result['test_acc']:.4f}",
                            f"{r.result['final_loss']:.4f}", peak_mib(r), ""])
            else:
                w.writerow([r.label, r.devices, r.per_device_batch, r.effective_batch, "", "", "", "", "", "", "",
                            r.reason])


def peak_mib(row):
    """The row's peak tensor memory on one device in MiB (rank 0's), or "" where it has none."""
    peak = row.result.get("peak_bytes")
    return f"{peak / 2**20:.1f}" if peak is not None else ""


def cell(text):
    """`text` as one cell of a markdown table: a "|" in it would end the cell."""
    return text.replace("|", "\\|")


def write_markdown(path, rows, header, train_images, base):
    """The header's title and facts, then the table: numbers where a row ran, else its reason."""
    lines = [f"# {header['title']}", ""]
    lines += [f"- {k}: {v}" for k, v in header["facts"]]
    lines += ["", "| configuration | devices | effective batch | updates per epoch | s per epoch | speed-up | "
              "samples/s | test accuracy | peak MiB per rank |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.result:
            speedup = f"{base / r.result['epoch_s']:.2f}x" if base else "-"
            lines.append(f"| {r.label} | {r.devices} | {r.devices} x {r.per_device_batch} = {r.effective_batch:,} | "
                         f"{updates(r, train_images)} | {r.result['epoch_s']:.1f} | {speedup} | "
                         f"{r.result['samples_per_s']:.1f} | {100 * r.result['test_acc']:.1f}% | "
                         f"{peak_mib(r) or '-'} |")
        else:
            lines.append(f"| {r.label} | {r.devices} | {r.devices} x {r.per_device_batch} = {r.effective_batch:,} | "
                         f"- | - | - | - | {cell(r.reason)} | - |")
    Path(path).write_text("\n".join(lines) + "\n")


def esc(text):
    """`text` as SVG character data."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_svg(path, rows, title, base):
    """Horizontal bars: seconds per epoch for each configuration that ran, speed-up and accuracy
    written beside each bar."""
    ran = [r for r in rows if r.result]
    missing = [r for r in rows if not r.result]
    left, bar_h, gap, width, top, note_h = 300, 26, 12, 900, 70, 16
    # One line of small print under the bars for each configuration that did not run.
    height = top + len(ran) * (bar_h + gap) + 30 + (note_h * (len(missing) + 1) if missing else 20)
    longest = max((r.result["epoch_s"] for r in ran), default=1.0)
    scale = (width - left - 230) / longest
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="14">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="28" text-anchor="middle" font-size="17">{esc(title)}</text>',
           f'<text x="{left}" y="54" fill="#555">seconds per epoch (shorter is faster) · speed-up over one device · '
           f'test accuracy</text>']
    for i, r in enumerate(ran):
        y = top + i * (bar_h + gap)
        w = max(1.0, r.result["epoch_s"] * scale)
        color = "#8c8c8c" if r.key == "torch" else "#dd8452" if "mixed" in r.label else "#4c72b0"
        speedup = f" · {base / r.result['epoch_s']:.2f}x" if base else ""
        svg += [f'<text x="{left - 10}" y="{y + bar_h * 0.7}" text-anchor="end">{esc(r.label)}</text>',
                f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{color}"/>',
                f'<text x="{left + w + 8:.1f}" y="{y + bar_h * 0.7}">{r.result["epoch_s"]:.1f} s{speedup} · '
                f'{100 * r.result["test_acc"]:.1f}%</text>']
    if missing:
        y = top + len(ran) * (bar_h + gap) + 30
        svg.append(f'<text x="20" y="{y}" font-size="12" fill="#555">not run:</text>')
        for i, r in enumerate(missing):
            svg.append(f'<text x="30" y="{y + note_h * (i + 1)}" font-size="12" fill="#555">'
                       f'{esc(r.label)}: {esc(r.reason)}</text>')
    svg.append("</svg>")
    Path(path).write_text("\n".join(svg) + "\n")
