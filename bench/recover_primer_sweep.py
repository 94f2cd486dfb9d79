"""Recover the vector sweep of the primer's first H200 run (run_id 4712542b7710) as its curve.

That run (session 3, commit 99997d9) wrote its summary row to data/results/primer.csv, but the
notebook did not yet write the per-size sweep to data/curves/ (it does since). The sweep survives
in the executed notebook's printed table, saved as
bench/logs/2026-11-30-s3/nb00_sweep_median_us_frac.html (the median time per call in µs, rounded
to 0.01 µs, and frac_of_copy, rounded to 0.01). This script turns that table back into the curve's
long form: ``device, op, n, bytes, median_s, gb_per_s, frac_of_copy, source``; gb_per_s is
recomputed from bytes / median_s (fightlab.measure.primer's bytes per element), min/iqr/first times were
not printed and stay empty, and ``source`` says where every row came from.

    python bench/recover_primer_sweep.py   # writes data/curves/4712542b7710.csv.gz
"""

from __future__ import annotations

import math
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd

from fightlab import results
from fightlab.measure import primer
from fightlab.paths import REPO_ROOT as ROOT

RUN_ID = "4712542b7710"
TABLE = ROOT / "bench/logs/2026-11-30-s3/nb00_sweep_median_us_frac.html"
SOURCE = ("recovered from the executed notebook's printed table "
          "(bench/logs/2026-11-30-s3/nb00_sweep_median_us_frac.html; median rounded to 0.01 us)")


class _Rows(HTMLParser):
    """Rows of <th>/<td> cell texts, with colspan expanded."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self._span = 1

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("th", "td"):
            self._cell, self._span = [], int(dict(attrs).get("colspan", 1))

    def handle_endtag(self, tag):
        if tag in ("th", "td") and self._cell is not None:
            self.rows[-1] += ["".join(self._cell).strip()] * self._span
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def recover(table: Path = TABLE) -> pd.DataFrame:
    p = _Rows()
    p.feed(table.read_text())
    value, device, op = p.rows[0], p.rows[1], p.rows[2]
    body = [r for r in p.rows[4:] if r]
    recs: dict[tuple[str, str, int], dict] = {}
    for r in body:
        n = int(r[0])
        for j in range(1, len(r)):
            key = (device[j], op[j], n)
            rec = recs.setdefault(key, {"device": device[j], "op": op[j], "n": n})
            rec[value[j]] = float(r[j]) if r[j] not in ("", "NaN") else math.nan
    df = pd.DataFrame(list(recs.values()))
    df["bytes"] = [primer.BYTES_PER_ELEMENT[o] * n for o, n in zip(df["op"], df["n"])]
    df["median_s"] = df["median_us"] * 1e-6
    df["gb_per_s"] = [b / t / 1e9 if b and t > 0 else math.nan for b, t in zip(df["bytes"], df["median_s"])]
    df["source"] = SOURCE
    return df[["device", "op", "n", "bytes", "median_s", "gb_per_s", "frac_of_copy", "source"]]


if __name__ == "__main__":
    rows = results.read_rows("primer", ROOT)
    if RUN_ID not in set(rows["run_id"]):
        raise SystemExit(f"no primer row {RUN_ID} in {results.results_path('primer', ROOT)}")
    print(results.write_curve(RUN_ID, recover(), ROOT, device="cuda:0"))  # the H200 run's sweep
