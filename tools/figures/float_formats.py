"""Chapter 5: the bit layouts of f32, f16 and bf16 drawn to scale (sign, exponent, mantissa), each
with its range (largest finite value, smallest normal, smallest subnormal) and its precision
(machine epsilon), computed here rather than typed in: numpy's finfo for f32 and f16, and for
bf16, which numpy lacks, the IEEE formulas from its bit counts, checked first against finfo on
the other two.
Usage: float_formats.py OUT.svg"""
import math
import sys

import numpy as np

import figstyle

# Format name, exponent bits, mantissa bits (the sign is one bit in each).
FORMATS = [("f32", 8, 23), ("f16", 5, 10), ("bf16", 8, 7)]
SEGMENT_COLOURS = {"sign": "#c44e52", "exponent": "#4c72b0", "mantissa": "#55a868"}


def from_bits(exponent_bits, mantissa_bits):
    """Largest finite, smallest normal, smallest subnormal and machine epsilon of an IEEE-style
    binary format with these bit counts (bias 2^(e-1) - 1, the top exponent kept for inf/NaN)."""
    bias = 2 ** (exponent_bits - 1) - 1
    return {
        "max": (2.0 - 2.0 ** -mantissa_bits) * 2.0 ** bias,
        "tiny": 2.0 ** (1 - bias),
        "subnormal": 2.0 ** (1 - bias - mantissa_bits),
        "eps": 2.0 ** -mantissa_bits,
    }


def from_numpy(dtype):
    info = np.finfo(dtype)
    return {"max": float(info.max), "tiny": float(info.tiny),
            "subnormal": float(info.smallest_subnormal), "eps": float(info.eps),
            "bits": (info.bits, info.nexp, info.nmant)}


def properties():
    """Each format's numbers: numpy's for f32 and f16, the formulas' for bf16 (which agree with
    numpy's on f32 and f16, as checked here)."""
    numpy_types = {"f32": np.float32, "f16": np.float16}
    props = {}
    for name, exponent_bits, mantissa_bits in FORMATS:
        formula = from_bits(exponent_bits, mantissa_bits)
        if name in numpy_types:
            numbers = from_numpy(numpy_types[name])
            assert numbers.pop("bits") == (1 + exponent_bits + mantissa_bits, exponent_bits, mantissa_bits), name
            for key, value in formula.items():
                assert math.isclose(numbers[key], value, rel_tol=1e-6), (name, key, numbers[key], value)
        else:
            numbers = formula
        props[name] = numbers
    return props


def sci(x):
    """x as the page writes numbers: '3.4e38', '6.1e-5', or an integer below 10^6 ('65,504')."""
    if 1 <= x < 1e6 and x == int(x):
        return "{:,}".format(int(x))
    exponent = math.floor(math.log10(x))
    mantissa = x / 10 ** exponent
    if round(mantissa, 1) >= 10:  # 9.96e-8 prints as 1.0e-7
        mantissa, exponent = mantissa / 10, exponent + 1
    return "%.1fe%d" % (mantissa, exponent)


def main(out):
    props = properties()
    bit = 0.11          # inches per bit: the bars are to scale, f32's twice as long as the others'
    row = 0.78          # inches per format
    bar_h = 0.34
    text_x = 32 * bit + 0.3
    width, height = text_x + 3.2, row * len(FORMATS) + 0.3
    fig = figstyle.figure(width, height)
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(-0.6, width - 0.6)
    ax.set_ylim(height - 0.3, -0.3)
    ax.axis("off")
    for i, (name, exponent_bits, mantissa_bits) in enumerate(FORMATS):
        y = i * row + 0.15
        total = 1 + exponent_bits + mantissa_bits
        ax.text(-0.1, y + bar_h * 0.3, name, ha="right", va="center", fontsize=11, fontweight="bold")
        ax.text(-0.1, y + bar_h * 0.85, "%d bits" % total, ha="right", va="center", fontsize=9, color="#555555")
        x = 0.0
        for part, bits in (("sign", 1), ("exponent", exponent_bits), ("mantissa", mantissa_bits)):
            ax.add_patch(figstyle.plt.Rectangle((x, y), bits * bit, bar_h, facecolor=SEGMENT_COLOURS[part],
                                                edgecolor="white", linewidth=1.2))
            for k in range(1, bits):  # one tick per bit, so that the bar reads as bits
                ax.plot([x + k * bit] * 2, [y + bar_h * 0.75, y + bar_h], color="white", linewidth=0.7)
            ax.text(x + bits * bit / 2, y + bar_h * 0.42, str(bits), ha="center", va="center", color="white",
                    fontsize=9, fontweight="bold")
            x += bits * bit
        p = props[name]
        digits = (mantissa_bits + 1) * math.log10(2)
        lines = [
            "largest %s, smallest normal %s" % (sci(p["max"]), sci(p["tiny"])),
            "subnormals down to %s" % sci(p["subnormal"]),
            "epsilon 2^-%d ≈ %s (%.1f decimal digits)" % (mantissa_bits, sci(p["eps"]), digits),
        ]
        for k, line in enumerate(lines):
            ax.text(text_x, y - 0.07 + k * 0.22, line, ha="left", va="center", fontsize=9)
    # The colour key, above the bars, and the text column's heading.
    x = 0.0
    for part, colour in SEGMENT_COLOURS.items():
        ax.add_patch(figstyle.plt.Rectangle((x, -0.27), 0.14, 0.14, facecolor=colour, edgecolor="none"))
        ax.text(x + 0.2, -0.2, "%s bit%s" % (part, "" if part == "sign" else "s"), ha="left", va="center", fontsize=9)
        x += 1.15
    ax.text(text_x, -0.2, "range, and precision (machine epsilon)", ha="left", va="center",
            fontsize=9, color="#555555")
    figstyle.save(fig, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
