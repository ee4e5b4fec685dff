"""The small data the docs' examples run on (tests/test_docs.py): one folder holding every
file the README and docs/ name as the user's own, so each example runs as written.

- `photos/`: 3 class folders (`class_000`..) of 40 small JPEGs each;
- `val/`: a validation split of the same classes, 4 JPEGs each;
- `table.csv`, `table.parquet`: 1,500 rows of 4 numeric columns and an int `label` (3 classes);
- `airquality.csv`: R's airquality layout with `NA` for missing values and a `zip` column
  whose codes keep their leading zeros;
- `sales_by_year/year=2021/part-0.parquet` (and 2022): a Hive-partitioned table, label `units`;
- `corpus/part-0000{0,1}.jsonl`: 600 real English documents (the standard library's
  docstrings) as `{"text": ...}`;
- `reviews.jsonl`: 200 more, each with a `sentiment` label (`pos` or `neg`).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd

from tfpipe.synthetic import folders, text

CLASSES = 3


def make_docs_data(root: str) -> str:
    """Writes the files above into `root` (created); returns it."""
    os.makedirs(root, exist_ok=True)
    folders.write_image_folder(
        os.path.join(root, "photos"), classes=CLASSES, per_class=40, imagenet_names=False, size=(160, 120)
    )
    folders.write_image_folder(
        os.path.join(root, "val"), classes=CLASSES, per_class=4, imagenet_names=False, size=(160, 120), seed=5
    )
    table = _table(1500)
    table.to_csv(os.path.join(root, "table.csv"), index=False)
    table.to_parquet(os.path.join(root, "table.parquet"), index=False)
    _airquality(os.path.join(root, "airquality.csv"))
    _sales(os.path.join(root, "sales_by_year"))
    docs = write_corpus(root)
    with open(os.path.join(root, "reviews.jsonl"), "w") as f:
        for doc in docs[600:]:
            f.write(
                json.dumps({"text": doc, "sentiment": "pos" if "return" in doc.lower() else "neg"}) + "\n"
            )
    return root


def write_corpus(root: str) -> list[str]:
    """Writes `corpus/` into `root`; returns the 800 documents its 600 are the first of."""
    docs = text.documents(800)
    text.write_corpus(os.path.join(root, "corpus"), docs[:600], "jsonl", files=2)
    return docs


def _table(n: int) -> pd.DataFrame:
    """A learnable 3-class table of numeric columns, like the penguins data set."""
    rng = np.random.default_rng(0)
    species = rng.integers(0, CLASSES, n)
    return pd.DataFrame(
        {
            "bill_length_mm": (38 + 6 * species + rng.normal(0, 2, n)).round(1),
            "bill_depth_mm": (18 - 2 * (species == 2) + rng.normal(0, 1, n)).round(1),
            "flipper_length_mm": (190 + 12 * species + rng.normal(0, 5, n)).round().astype(int),
            "body_mass_g": (3700 + 600 * (species == 2) + rng.normal(0, 300, n)).round().astype(int),
            "label": species,
        }
    )


def _airquality(path: str) -> None:
    rng = np.random.default_rng(1)
    lines = ["Ozone,Solar.R,Wind,Temp,Month,Day,zip"]
    for i in range(150):
        ozone = "NA" if i % 7 == 3 else str(int(rng.integers(1, 160)))
        solar = "NA" if i % 11 == 5 else str(int(rng.integers(7, 330)))
        wind, temp = f"{rng.uniform(2, 20):.1f}", int(rng.integers(56, 97))
        zip_code = f"{int(rng.integers(1000, 99999)):05d}"
        lines.append(f"{ozone},{solar},{wind},{temp},{5 + i // 31},{1 + i % 31},{zip_code}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def _sales(root: str) -> None:
    rng = np.random.default_rng(2)
    for year in (2021, 2022):
        folder = os.path.join(root, f"year={year}")
        os.makedirs(folder, exist_ok=True)
        price = rng.uniform(1, 50, 200).round(2)
        units = (100 - price + rng.normal(0, 5, 200)).round().astype(int)
        pd.DataFrame({"price": price, "units": units}).to_parquet(
            os.path.join(folder, "part-0.parquet"), index=False
        )
