"""The data the results table trains on (tools/results/results.py): the dataset's folder as the
chapter programs find it, how many training and test images it holds (read from the files, so
that the table states what the runs actually used), and a folder holding only the first N
training and M test images of it.

Every problem with the files is raised as DatasetError, a sentence naming the file or flag at
fault; nothing here exits.
"""
import gzip
import os
import zlib
from pathlib import Path

FASHION_IMAGES = {"train": "train-images-idx3-ubyte", "test": "t10k-images-idx3-ubyte"}
FASHION_LABELS = {"train": "train-labels-idx1-ubyte", "test": "t10k-labels-idx1-ubyte"}
FASHION_FILES = tuple(FASHION_IMAGES.values()) + tuple(FASHION_LABELS.values())
DEBIAN_FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
CIFAR_TRAIN = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
CIFAR_TEST = "test_batch.bin"
CIFAR_RECORD = 1 + 3 * 32 * 32  # a label byte, then 3 x 32 x 32 pixels
CIFAR_RECORDS_PER_FILE = 10000


class DatasetError(Exception):
    """A dataset folder or file that cannot be used, with the sentence that says why."""


class Dataset:
    """A folder the chapter programs can read, and the images it holds."""

    def __init__(self, folder, train_images, test_images):
        self.folder, self.train_images, self.test_images = Path(folder), train_images, test_images


# ---------------------------------------------------------------------------------------------
# Fashion-MNIST: four IDX files, each optionally gzip-compressed (FILE.gz), as the loader reads.

def find_fashion_mnist(data, repo):
    """The folder holding Fashion-MNIST, looked up as the chapters do: --data, else
    $LOCKSTEP_DATA, else the repository's data/, else Debian's dataset-fashion-mnist."""
    if data:
        candidates, named = [data], "--data"
    elif os.environ.get("LOCKSTEP_DATA"):
        candidates, named = [os.environ["LOCKSTEP_DATA"]], "LOCKSTEP_DATA"
    else:
        candidates, named = [str(repo / "data"), DEBIAN_FASHION_MNIST], None
    if named and not Path(candidates[0]).is_dir():
        raise DatasetError(f"{named} {candidates[0]} is not a folder")
    for folder in candidates:
        if all(Path(folder, f).exists() or Path(folder, f + ".gz").exists() for f in FASHION_FILES):
            return Path(folder)
    raise DatasetError(f"no Fashion-MNIST files ({', '.join(FASHION_FILES)}, optionally .gz) in "
                       f"{', '.join(candidates)}: install Debian's dataset-fashion-mnist or pass --data DIR")


def open_idx(folder, name):
    """The IDX file `name` of `folder` (or name.gz), opened for reading bytes, and its path."""
    plain = folder / name
    if plain.exists():
        return open(plain, "rb"), plain
    packed = folder / (name + ".gz")
    return gzip.open(packed, "rb"), packed


def read_idx(folder, name):
    """The IDX file's shape (records first) and its bytes, checked to hold what its header says."""
    try:
        stream, path = open_idx(folder, name)
        with stream:
            head = stream.read(4)
            if len(head) < 4 or head[0] != 0 or head[1] != 0 or head[2] != 0x08 or not 1 <= head[3] <= 4:
                raise DatasetError(f"{path} is not an IDX file of bytes (it starts with {head.hex() or 'nothing'}): "
                                   f"--data must hold Fashion-MNIST's original files")
            dims = stream.read(4 * head[3])
            if len(dims) < 4 * head[3]:
                raise DatasetError(f"{path} ends inside its header: the file is cut short")
            shape = [int.from_bytes(dims[4 * d:4 * d + 4], "big") for d in range(head[3])]
            blob = head + dims + stream.read()
    except OSError as e:  # unreadable files, and gzip's damaged streams (BadGzipFile is one)
        raise DatasetError(f"cannot read {e.filename or folder / name} in --data: {e.strerror or e}") from None
    except (EOFError, zlib.error) as e:
        raise DatasetError(f"{folder / name}.gz is damaged ({e}): --data must hold Fashion-MNIST's files") from None
    record = 1
    for size in shape[1:]:
        record *= size
    if len(blob) < len(head + dims) + shape[0] * record:
        raise DatasetError(f"{path} is cut short: its header announces {shape[0]} records of {record} bytes")
    return shape, blob


def fashion_mnist_counts(folder):
    """The training and test images of the Fashion-MNIST folder, each checked against its labels."""
    counts = []
    for part in ("train", "test"):
        images = read_idx(folder, FASHION_IMAGES[part])[0][0]
        labels = read_idx(folder, FASHION_LABELS[part])[0][0]
        if images != labels:
            raise DatasetError(f"{folder}: {FASHION_IMAGES[part]} holds {images} images but {FASHION_LABELS[part]} "
                               f"{labels} labels")
        counts.append(images)
    return counts


def idx_prefix(blob, shape, count):
    """The IDX file `blob` of `shape` cut to its first `count` records."""
    record = 1
    for size in shape[1:]:
        record *= size
    header_size = 4 + 4 * len(shape)
    header = bytearray(blob[:header_size])
    header[4:8] = count.to_bytes(4, "big")
    return bytes(header) + blob[header_size:header_size + count * record]


def fashion_mnist_subset(source, folder, train_images, test_images):
    """Writes the first train_images and test_images records of each file (0: all) into
    `folder`."""
    counts = {"train": train_images, "test": test_images}
    available = dict(zip(("train", "test"), fashion_mnist_counts(source)))
    for part, flag in (("train", "--train-images"), ("test", "--test-images")):
        if counts[part] > available[part]:
            raise DatasetError(f"{flag} {counts[part]}: {source / FASHION_IMAGES[part]} holds {available[part]} "
                               f"records, fewer than the {counts[part]} asked for")
        counts[part] = counts[part] or available[part]
    for part in ("train", "test"):
        for name in (FASHION_IMAGES[part], FASHION_LABELS[part]):
            shape, blob = read_idx(source, name)
            (folder / name).write_bytes(idx_prefix(blob, shape, counts[part]))
    return Dataset(folder, counts["train"], counts["test"])


# ---------------------------------------------------------------------------------------------
# CIFAR-10's binary version: five training files and one test file, the same number of records
# in each (10,000 in the real dataset; fewer in a smaller copy, as the chapters' loader accepts).

def cifar10_records_per_file(source):
    """Records per file as the chapters' loader counts them: a first training file of fewer whole
    records than 10,000 is a smaller copy, and every file must then hold as many."""
    size = (source / CIFAR_TRAIN[0]).stat().st_size
    records = size // CIFAR_RECORD
    made_up = 0 < records < CIFAR_RECORDS_PER_FILE and size == records * CIFAR_RECORD
    return records if made_up else CIFAR_RECORDS_PER_FILE


def cifar10_source(data):
    """The CIFAR-10 folder --data names, and the records in each of its files."""
    if not data:
        raise DatasetError("--dataset cifar10 needs --data DIR, the folder of CIFAR-10's binary version "
                           "(data/README.md)")
    source = Path(data)
    for name in CIFAR_TRAIN + (CIFAR_TEST,):
        if not (source / name).is_file():
            raise DatasetError(f"{source / name} is missing: --data must hold CIFAR-10's binary version (data/README.md)")
        if not os.access(source / name, os.R_OK):
            raise DatasetError(f"cannot read {source / name} in --data: Permission denied")
    per_file = cifar10_records_per_file(source)
    for name in CIFAR_TRAIN + (CIFAR_TEST,):
        size = (source / name).stat().st_size
        if size != per_file * CIFAR_RECORD:
            raise DatasetError(f"{source / name} holds {size} bytes, not {per_file} records of {CIFAR_RECORD} bytes "
                               f"like {CIFAR_TRAIN[0]}: --data must hold CIFAR-10's binary version (data/README.md)")
    return source, per_file


def read_prefix(path, size):
    """The first `size` bytes of the file at `path`."""
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except OSError as e:
        raise DatasetError(f"cannot read {path} in --data: {e.strerror}") from None


def cifar10_subset(source, per_file, folder, train_images):
    """Writes the first train_images / 5 records of every file into `folder`."""
    if train_images % 5:
        raise DatasetError(f"--train-images {train_images}: CIFAR-10 subsets take a multiple of 5 (one share per file)")
    if train_images > 5 * per_file:
        raise DatasetError(f"--train-images {train_images}: {source} holds {5 * per_file} training images, fewer "
                           f"than the {train_images} asked for")
    share = train_images // 5
    for name in CIFAR_TRAIN + (CIFAR_TEST,):
        (folder / name).write_bytes(read_prefix(source / name, share * CIFAR_RECORD))
    return Dataset(folder, train_images, share)


# ---------------------------------------------------------------------------------------------

def locate(dataset, data, repo):
    """The folder holding `dataset` ("fashion-mnist" or "cifar10"), found from --data as the
    chapters find it, its files checked for presence. Reads nothing but file names and sizes."""
    if dataset == "fashion-mnist":
        return find_fashion_mnist(data, repo)
    return cifar10_source(data)[0]


def prepare(dataset, source, train_images, test_images, subset_folder):
    """The Dataset the runs read: `source` itself, or with train_images or test_images (0: all)
    a copy of their first images written into `subset_folder` (an existing folder). Raises
    DatasetError for what concerns the data; an OSError from writing subset_folder is left to
    the caller (it concerns the output folder)."""
    if dataset == "fashion-mnist":
        if not train_images and not test_images:
            return Dataset(source, *fashion_mnist_counts(source))
        return fashion_mnist_subset(source, subset_folder, train_images, test_images)
    if test_images:
        raise DatasetError(f"--test-images {test_images}: a CIFAR-10 subset holds --train-images / 5 test images "
                           f"(every file the same number of records); leave --test-images out")
    per_file = cifar10_records_per_file(source)
    if not train_images:
        return Dataset(source, 5 * per_file, per_file)
    return cifar10_subset(source, per_file, subset_folder, train_images)
