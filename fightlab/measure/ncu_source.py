"""Nsight Compute's per-instruction stall samples, placed on the Python lines they came from.

``bench/newton_ncu.sh`` writes ncu's source page (``--page source --csv --print-source sass``):
one row per SASS instruction of the profiled kernel, each with its warp-stall samples by reason
and its executed count, but no source lines (Warp builds without line info unless told). The
same kernel compiled on any machine with Warp's line info (it does not change the SASS;
:func:`check_same_code` proves it per instruction) and disassembled with ``nvdisasm -gi -c``
(CUDA's disassembler: ``-g`` line info, ``-i`` the inlining chain) gives each instruction's chain
of Python lines, innermost first, the kernel's own line last (:func:`disassemble` makes it, no GPU
needed). Joined on the instruction's byte offset:

    python -m fightlab.measure.ncu_source --disassemble BODY NVDISASM.txt [--nvdisasm PATH]
    python -m fightlab.measure.ncu_source SOURCE.csv NVDISASM.txt [--top 25] [--launch 0]
        [--publish NCU_RUN_ID [--root .]]

prints the samples and executed instructions per kernel line (the stage: the call in the kernel's
body), per fightlab function and per innermost fightlab line; ``--publish`` appends the
per-function table as ``ncu_source`` rows, each with the metadata of the ``ncu`` row of the same
profile (its card, driver, commit, body and world count). Sample counts are ncu's (one sample
per warp every 2^k cycles; its ``--page source`` columns); shares of all samples are what they
are for. Function names are read from the source files the disassembly names, or from
``--source-root``'s fightlab/ (a checkout of the commit that was profiled).
"""

from __future__ import annotations

import argparse
import ast
import functools
import io
import json
import re
import sys
from pathlib import Path

import pandas as pd

from fightlab import meta, results

#: the columns of ncu's source page this module reads
SAMPLES, EXECUTED = "Warp Stall Sampling (All Samples)", "Instructions Executed"
_LOC = re.compile(r'//## File "([^"]+)", line (\d+)(?: inlined at "([^"]+)", line (\d+))?')
#: what :func:`attribute` groups by
KEYS = ("kernel", "function", "fightlab")
_INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def _number(col: pd.Series) -> pd.Series:
    return pd.to_numeric(col.astype(str).str.replace(",", ""), errors="coerce").fillna(0.0)


def read_source_page(text: str) -> pd.DataFrame:
    """ncu's ``--page source --csv --print-source sass`` output → one row per instruction and
    launch: ``launch`` (0, 1, … in the page's order), ``kernel`` (the profiled kernel's name),
    ``offset`` (int, bytes from the kernel's first instruction), ``sass`` (str), ``samples`` and
    ``executed`` (float, counts) and one ``stall_<reason>`` column per reason (samples). Raises
    ValueError when the text is not that page (no kernel block, other columns, unreadable rows)."""
    parts = re.split(r'^"Kernel Name","([^"]*)",.*$\n', text, flags=re.M)
    frames = []
    for kernel, block in zip(parts[1::2], parts[2::2]):
        try:
            df = pd.read_csv(io.StringIO(block), low_memory=False)
            if not {"Address", "Source", SAMPLES, EXECUTED} <= set(df.columns):
                raise ValueError(f"columns {list(df.columns)[:6]}")
            addr = df["Address"].map(lambda a: int(str(a), 16))
        except (ValueError, pd.errors.ParserError) as e:
            raise ValueError(f"not ncu's source page: {str(e).splitlines()[0][:160]}") from None
        out = pd.DataFrame({"launch": len(frames), "kernel": kernel, "offset": addr - addr.min(),
                            "sass": df["Source"].astype(str).str.strip().str.rstrip(";").str.strip(),
                            "samples": _number(df[SAMPLES]), "executed": _number(df[EXECUTED])})
        for c in (c for c in df.columns if c.startswith("stall_") and "Not Issued" not in c):
            out[c] = _number(df[c])
        frames.append(out)
    if not frames:
        raise ValueError("not ncu's source page: no \"Kernel Name\" block")
    return pd.concat(frames, ignore_index=True)


def read_line_map(text: str) -> pd.DataFrame:
    """``nvdisasm -gi -c`` output of one kernel → one row per instruction: ``offset`` (int),
    ``sass`` (str), ``chain`` (tuple of ``(file, line)``, innermost first, the kernel's line last;
    an instruction without location lines keeps the one before it, as nvdisasm prints them).
    Raises ValueError when no instruction carries a location (built without line info)."""
    rows, chain, pending = [], (), []
    for line in text.splitlines():
        loc = _LOC.search(line)
        if loc:
            pending.append(loc)
            continue
        insn = _INSN.match(line)
        if not insn:
            continue
        if pending:
            chain = (((pending[0][1], int(pending[0][2])),)
                     + tuple((p[3], int(p[4])) for p in pending if p[3]))
            pending = []
        rows.append((int(insn[1], 16), " ".join(insn[2].split()), chain))
    df = pd.DataFrame(rows, columns=["offset", "sass", "chain"])
    if df.empty or not df["chain"].map(bool).any():
        raise ValueError("no line locations in the disassembly: build with wp.config.lineinfo = True, "
                         "disassemble with nvdisasm -gi")
    return df


def check_same_code(page: pd.DataFrame, lines: pd.DataFrame) -> None:
    """Raise ValueError unless ``page`` (one launch) and ``lines`` hold the same instructions: as
    many, each with the same opcode and operands at the same offset (one build, a whole page)."""
    # ncu prints branch targets as addresses, nvdisasm as labels; nvdisasm adds register-reuse
    # flags and (*"..."*) notes: compared without them and without commas
    norm = lambda s: s.map(lambda t: " ".join(re.sub(r"0x[0-9a-f]+|`\([^)]*\)", "#",
                                                     re.sub(r'\.reuse|\(\*"[^"]*"\*\)|,', "", t)).split()))
    joined = page.merge(lines, on="offset", how="left", suffixes=("", "_dis"))
    missing = int(joined["sass_dis"].isna().sum())
    differ = int((norm(joined["sass"]) != norm(joined["sass_dis"].fillna(""))).sum()) - missing
    if missing or differ or len(page) != len(lines):
        raise ValueError(f"the profiled kernel and the disassembly differ: {len(page)} instructions against "
                         f"{len(lines)}, {missing} offsets missing, {differ} instructions unlike "
                         "(a cut-off page, or not the same build?)")


def _short(frame: tuple[str, int] | None) -> str:
    return "?" if frame is None else f"{Path(frame[0]).name}:{frame[1]}"


@functools.cache
def _functions(path: str) -> tuple[tuple[int, int, str], ...]:
    """(first line, last line, name) of every function in the Python file ``path``; none when
    it cannot be read here (a disassembly made on another machine)."""
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, ValueError):
        return ()
    return tuple((n.lineno, n.end_lineno or n.lineno, n.name) for n in ast.walk(tree)
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _in_package(path: str) -> tuple[Path, tuple[str, ...]] | None:
    """(the folder holding fightlab/, the path's parts from fightlab/ on) of a source path; None
    outside fightlab."""
    parts = Path(path).parts
    if "fightlab" not in parts:
        return None
    i = len(parts) - 1 - parts[::-1].index("fightlab")
    return Path(*parts[:i]), parts[i:]


def _ours(chain: tuple) -> tuple[str, int] | None:
    """The innermost frame of an instruction's chain in a fightlab file, else None."""
    return next((f for f in chain if _in_package(f[0])), None)


def _function(frame: tuple[str, int] | None, source_root: Path | None = None) -> str:
    """``file:function`` of the innermost function holding the frame's line, else ``file:line``;
    ``source_root``: a checkout whose ``fightlab/`` replaces the path's (the profiled commit's)."""
    if frame is None:
        return "?"
    split = _in_package(frame[0])
    path = str(Path(source_root, *split[1])) if source_root is not None and split else frame[0]
    spans = [f for f in _functions(path) if f[0] <= frame[1] <= f[1]]
    return f"{Path(frame[0]).name}:{max(spans)[2]}" if spans else _short(frame)


def attribute(page: pd.DataFrame, lines: pd.DataFrame, launch: int = 0, key: str = "kernel",
              source_root: Path | str | None = None) -> pd.DataFrame:
    """Samples, executed instructions and the leading stall reasons per source place, one launch.
    ``key``: ``"kernel"`` (the chain's last frame: the kernel body's line, a stage),
    ``"fightlab"`` (the innermost frame in a ``fightlab`` file) or ``"function"`` (that frame's
    enclosing function, read from the file when it is here, or under ``source_root``: a checkout
    of the profiled commit). Columns: ``place``, ``samples``,
    ``share`` (of all samples), ``executed``, then each stall reason's share of that place's
    samples; sorted by samples. Raises ValueError on an unknown key or launch, or on a build
    mismatch (:func:`check_same_code`)."""
    if key not in KEYS:
        raise ValueError(f"key must be one of {', '.join(KEYS)}, got {key!r}")
    one = page[page["launch"] == launch]
    if one.empty:
        raise ValueError(f"launch {launch} not in the page (launches 0..{page['launch'].max()})")
    check_same_code(one, lines)
    place = {"kernel": lambda ch: _short(ch[-1] if ch else None), "fightlab": lambda ch: _short(_ours(ch)),
             "function": lambda ch: _function(_ours(ch), None if source_root is None else Path(source_root))}[key]
    joined = one.merge(lines[["offset", "chain"]], on="offset")
    joined["place"] = joined["chain"].map(place)
    stalls = [c for c in joined.columns if c.startswith("stall_")]
    g = joined.groupby("place")[["samples", "executed", *stalls]].sum()
    out = g[["samples", "executed"]].copy()
    out.insert(1, "share", g["samples"] / max(g["samples"].sum(), 1.0))
    for c in stalls:
        out[c[len("stall_"):]] = g[c] / g["samples"].where(g["samples"] > 0)
    return out.sort_values("samples", ascending=False).reset_index()


#: ncu_source's stall columns: NVIDIA's reasons kept by name, the rest summed as "other"
_NAMED = ("barrier", "wait", "selected", "not_selected", "long_sb", "short_sb", "branch_resolving", "math",
          "mio", "no_inst", "dispatch", "imc", "lg")


def _check_profile(page: pd.DataFrame, name: str, row: dict) -> None:
    """The page is the ncu row's profile: its kernel one the row lists (``params.kernels``), and
    its file named for the row's body as bench/newton_ncu.sh names it (``<body>-source.csv``)."""
    from fightlab.bodies import BODIES

    kernels = str(json.loads(row["params"]).get("kernels", "")).split(",")
    kernel = str(page["kernel"].iloc[0])
    if not any(k and kernel.startswith(k) for k in kernels):
        raise ValueError(f"the page profiles {kernel}, the ncu row's kernels are {kernels}: not the same profile")
    named = [b for b in BODIES if name.startswith(f"{b}-")]
    if named != [row["body"]]:
        raise ValueError(f"the page's file {name!r} names body {named[0] if named else 'none'}, the ncu row's "
                         f"body is {row['body']!r} (pages are <body>-source.csv)")


def _source_tree(lines: pd.DataFrame, source_root: Path | str | None) -> tuple[Path, str]:
    """(the folder whose fightlab/ names the functions, how it was chosen): ``source_root``, else
    the tree the disassembly's paths name. Raises ValueError: no fightlab/ there, or none named."""
    if source_root is not None:
        if not (Path(source_root) / "fightlab").is_dir():
            raise ValueError(f"--source-root {str(source_root)!r} holds no fightlab/ folder")
        return Path(source_root), "--source-root"
    frame = next((f for f in map(_ours, lines["chain"]) if f), None)
    if frame is None:
        raise ValueError("the disassembly names no fightlab file")
    return _in_package(frame[0])[0], "the disassembly's sources"


def _check_sources(lines: pd.DataFrame, commit: str, source_root: Path | str | None) -> None:
    """Function names come from the profiled commit's files: ``source_root`` (a folder holding
    fightlab/; its commit checked where it is a git checkout), else the tree the disassembly's
    paths name, which must be a clean checkout of ``commit``."""
    root, where = _source_tree(lines, source_root)
    found = meta.git_commit(root) if root.is_dir() else "unknown"
    if found == "unknown" and source_root is not None:
        return  # an exported tree (git archive): taken as the profiled commit
    if found != commit:
        raise ValueError(f"{where} at {root} are commit {found}, the profile is commit {commit}: pass "
                         f"--source-root, a checkout of {commit}")


def publish(source_csv: Path | str, disassembly: Path | str, ncu_run_id: str, root: Path | str = ".",
            launch: int = 0, source_root: Path | str | None = None) -> list[dict]:
    """Append one ``ncu_source`` row per fightlab function (:func:`attribute`, key "function") that
    ran or was sampled in one launch (stall shares 0 where it has no samples) to
    ``root/data/results/ncu_source.csv``, with the metadata of the ``ncu`` row ``ncu_run_id`` (the
    same profile's sections). Returns the rows. Raises ValueError: no such ncu row, rows of that
    profile already published, a page of another kernel or body than the row's
    (:func:`_check_profile`), function names that would not be the profiled commit's
    (:func:`_check_sources`), or as :func:`attribute`; OSError: a file cannot be read."""
    ncu_rows = results.read_rows("ncu", root)
    hit = ncu_rows[ncu_rows["run_id"] == ncu_run_id]
    if hit.empty:
        raise ValueError(f"no ncu row {ncu_run_id!r} in {results.results_path('ncu', root)}")
    old = results.read_rows("ncu_source", root)
    if any(json.loads(p).get("ncu_run_id") == ncu_run_id for p in old.get("params", [])):
        raise ValueError(f"ncu_source rows of profile {ncu_run_id} are already published: not appended again")
    base = hit.iloc[0].to_dict()
    page = read_source_page(Path(source_csv).read_text())
    lines = read_line_map(Path(disassembly).read_text())
    _check_profile(page, Path(source_csv).name, base)
    _check_sources(lines, base["commit"], source_root)
    table = attribute(page, lines, launch, "function", source_root)
    rows = []
    for r in table[(table["samples"] > 0) | (table["executed"] > 0)].to_dict("records"):
        params = dict(ncu_run_id=ncu_run_id, key="function", place=r["place"], launch=launch,
                      source=Path(source_csv).name, disassembly=Path(disassembly).name)
        row = {c: base[c] for c in results.META_COLUMNS}
        row.update(run_id=meta.new_run_id(), nworld=int(base["nworld"]), seed=int(base["seed"]),
                   params=json.dumps(params, sort_keys=True), samples=float(r["samples"]),
                   share=float(r["share"]), executed=float(r["executed"]))
        shares = {k: float(r.get(k, 0.0)) for k in table.columns[4:]}
        shares = {k: (0.0 if v != v else v) for k, v in shares.items()}  # NaN: the place has no samples
        for k in _NAMED:
            row[f"{k}_share"] = shares.pop(k, 0.0)
        row["other_share"] = sum(shares.values())
        rows.append(row)
    with results.publish_lock(root):
        for row in rows:
            results.append_row("ncu_source", row, root)
    return rows


def function_table(rows: pd.DataFrame, top: int = 8) -> pd.DataFrame:
    """Committed ``ncu_source`` rows → per profile (card, body, world count) its ``top``
    functions by samples: ``share_pct`` of the launch's samples and the four leading stall
    reasons' shares of the function's own samples (%). Empty for no rows."""
    if rows.empty:
        return pd.DataFrame()
    df = rows.assign(function=[json.loads(p)["place"] for p in rows["params"]])
    cols = {"share": "share_pct", "wait_share": "wait_pct", "barrier_share": "barrier_pct",
            "long_sb_share": "long_sb_pct", "short_sb_share": "short_sb_pct"}
    df = df.sort_values(["gpu", "body", "nworld", "samples"], ascending=[True, True, True, False])
    df = df.groupby(["gpu", "body", "nworld"], sort=False).head(top)
    out = df[["gpu", "body", "nworld", "function", *cols]].rename(columns=cols)
    out[list(cols.values())] = (out[list(cols.values())] * 100).round(1)
    return out.reset_index(drop=True)


def disassemble(body: str, out: Path | str, nvdisasm: str = "nvdisasm", arch: int = 90,
                fixes: tuple[str, ...] | None = None) -> Path:
    """Write ``nvdisasm -gi -c`` of the single-launch Newton kernel that ``body``'s physics
    launches (:func:`fightlab.kernels.newton.solve_kernel`; ``fixes`` None: its default build),
    built with line info for sm_``arch`` (Warp compiles it here, no GPU needed), to ``out``
    (written under a temporary name, then renamed). Returns ``out``. Raises ValueError: an
    unknown body, ``nvdisasm`` not found or failing."""
    import shutil
    import subprocess
    import tempfile

    from fightlab.bodies import BODIES

    if body not in BODIES:
        raise ValueError(f"body must be one of {', '.join(BODIES)}, got {body!r}")
    out = Path(out)
    if out.is_dir() or not out.parent.is_dir():
        raise ValueError(f"cannot write the disassembly to {str(out)!r}: a folder, or its folder does not exist")
    tool = shutil.which(nvdisasm)
    if tool is None:
        raise ValueError(f"nvdisasm not found ({nvdisasm!r}): CUDA's disassembler, e.g. pip install "
                         "nvidia-cuda-nvdisasm, then pass its path with --nvdisasm")
    import warp as wp

    from fightlab.bodies import build
    from fightlab.config import EnvConfig
    from fightlab.kernels import newton as N
    from fightlab.sim import physics

    m, _ = physics.put(physics.prepare_mjmodel(build(body), EnvConfig()), 1, physics.slots_for(body), "cpu",
                       qacc_smooth=False, solver_loop="unrolled")
    module = N.solve_kernel(m, N.BLOCK_DIM, False, N.DEFAULT_FIXES if fixes is None else fixes).module
    saved = dict(module.options)
    module.options.update(block_dim=N.BLOCK_DIM, lineinfo=True)  # as launched; lines kept
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cubin = next(p for p in wp.compile_aot_module(module, arch=arch, module_dir=tmp, use_ptx=False)
                         if str(p).endswith(".cubin"))
            run = subprocess.run([tool, "-gi", "-c", str(cubin)], capture_output=True, text=True)
    finally:
        module.options.clear()
        module.options.update(saved)
    if run.returncode != 0:
        raise ValueError(f"{nvdisasm} failed ({run.returncode}): {run.stderr.strip()[:200]}")
    try:
        read_line_map(run.stdout)
    except ValueError as e:
        raise ValueError(f"{nvdisasm}'s output is no line-info disassembly ({e})") from None
    tmp_out = out.with_name(out.name + ".tmp")
    try:
        tmp_out.write_text(run.stdout)
        tmp_out.replace(out)
    finally:
        tmp_out.unlink(missing_ok=True)
    return out


def _read(path: str, parse):
    """``parse`` of the file's text; its errors name the file."""
    try:
        return parse(Path(path).read_text())
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def main(argv: list[str] | None = None) -> int:
    """CLI: the three tables (kernel lines, fightlab functions, fightlab lines), the top rows
    each; or, with ``--disassemble BODY``, the line-info disassembly written to the second path."""
    ap = argparse.ArgumentParser(prog="python -m fightlab.measure.ncu_source",
                                 description="ncu stall samples per Python source line",
                                 usage="%(prog)s SOURCE_CSV DISASSEMBLY [options] | --disassemble BODY DISASSEMBLY")
    ap.add_argument("source_csv", nargs="?", help="ncu --page source --csv --print-source sass output")
    ap.add_argument("disassembly", help="nvdisasm -gi -c output of the same kernel built with line info "
                                        "(written by --disassemble)")
    ap.add_argument("--disassemble", metavar="BODY", help="write BODY's single-launch kernel's disassembly instead")
    ap.add_argument("--nvdisasm", default="nvdisasm", help="CUDA's nvdisasm (default: on PATH)")
    ap.add_argument("--launch", type=int, default=0, help="which profiled launch (default 0)")
    ap.add_argument("--top", type=int, default=25, help="rows per table (default 25)")
    ap.add_argument("--publish", metavar="NCU_RUN_ID", help="append the per-function rows, with this ncu row's metadata")
    ap.add_argument("--root", default=".", help="folder holding data/ (default: .)")
    ap.add_argument("--source-root", help="a checkout of the profiled commit (its fightlab/ names the functions)")
    a = ap.parse_args(argv)
    try:
        if a.disassemble:
            if a.source_csv is not None or a.publish or a.launch or a.source_root:
                raise ValueError("--disassemble BODY takes one path, the disassembly to write, and no "
                                 "SOURCE_CSV, --publish, --launch or --source-root")
            print(f"ncu_source: wrote {disassemble(a.disassemble, a.disassembly, a.nvdisasm)}")
            return 0
        if a.source_csv is None:
            raise ValueError("give SOURCE_CSV and DISASSEMBLY (or --disassemble BODY DISASSEMBLY)")
        if a.top < 1:
            raise ValueError(f"--top must be >= 1, got {a.top}")
        page = _read(a.source_csv, read_source_page)
        lines = _read(a.disassembly, read_line_map)
        root, where = _source_tree(lines, a.source_root)
        found = meta.git_commit(root) if root.is_dir() else "not here"
        tables = [attribute(page, lines, a.launch, key, a.source_root) for key in KEYS]
        if a.publish:
            n = len(publish(a.source_csv, a.disassembly, a.publish, a.root, a.launch, a.source_root))
            print(f"ncu_source: {n} rows appended to {results.results_path('ncu_source', a.root)}")
    except (OSError, ValueError) as e:
        print(f"ncu_source: {e}", file=sys.stderr)
        return 2
    print(f"function names from {where} at {root} (commit {found}): they are the profile's only at its "
          "commit (else --source-root, a checkout of it)")
    with pd.option_context("display.width", 200, "display.max_columns", 12, "display.precision", 3):
        for key, t in zip(("kernel line (stage)", "fightlab function", "innermost fightlab line"), tables):
            lead = [c for c in t.columns[4:] if t[c].fillna(0).max() > 0.05]
            print(f"\n== by {key}: {int(t['samples'].sum())} samples\n"
                  f"{t[['place', 'samples', 'share', 'executed', *lead]].head(a.top).to_string(index=False)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
