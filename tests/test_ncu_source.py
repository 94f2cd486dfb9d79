"""fightlab.measure.ncu_source: ncu's per-instruction stall samples placed on Python lines."""

import json
import lzma
import shutil
from pathlib import Path

import pandas as pd
import pytest

from fightlab import results
from fightlab.measure import ncu_source as S

REPO = Path(__file__).resolve().parents[1]
HEAD = ('"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)",'
        '"Instructions Executed","stall_barrier","stall_wait","stall_barrier (Not Issued)"')


def _page(rows: list[tuple[str, int, int, int, int]], launches: int = 1) -> str:
    """A source page: (sass, samples, executed, barrier, wait) per instruction, 16 bytes apart."""
    out = []
    for launch in range(launches):
        base = 0x7F0000 + launch * 0x100000
        out += ['"Kernel Name","_kernel__locals___newton_dc837693_cuda_kernel_forward",', HEAD]
        out += [f'"0x{base + 16 * i:x}","      {sass}","{s}","0","{e:,}","{b}","{w}","0"'
                for i, (sass, s, e, b, w) in enumerate(rows)]
    return "\n".join(out) + "\n"


def _disassembly(tmp_path: Path) -> str:
    """nvdisasm -gi text of the same four instructions: two in a fightlab function inlined at the
    kernel's line 20, then one at the kernel's line 21 and one with no new location."""
    src = tmp_path / "fightlab" / "kernels" / "k.py"
    src.parent.mkdir(parents=True)
    src.write_text("def helper(x):\n    y = x\n    return y\n\n\ndef kernel():\n    pass\n")
    loc = f'\t//## File "{src}", line 2 inlined at "/x/fightlab/kernels/newton.py", line 20\n' \
          '\t//## File "/x/fightlab/kernels/newton.py", line 20\n'
    return ("\t.text.k:\n" + loc + "        /*0000*/                   LDS R2, [R3] ;\n"
            + loc + "        /*0010*/                   FFMA R2, -R2, R4.reuse, R3 ;\n"
            + '\t//## File "/x/fightlab/kernels/newton.py", line 21\n'
            + "        /*0020*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;\n"
            + "        /*0030*/               @!P0 BRA `(.L_x_1) ;\n")


ROWS = [("LDS R2, [R3]", 10, 100, 0, 6), ("FFMA R2, -R2, R4, R3", 30, 100, 0, 20),
        ("BAR.SYNC.DEFER_BLOCKING 0x0", 50, 4, 50, 0), ("@!P0 BRA 0x7f0000", 10, 4, 0, 5)]


def test_samples_are_placed_on_kernel_lines_functions_and_lines(tmp_path):
    page = S.read_source_page(_page(ROWS, launches=2))
    lines = S.read_line_map(_disassembly(tmp_path))
    assert list(page["offset"][:4]) == [0, 16, 32, 48] and sorted(page["launch"].unique()) == [0, 1]
    assert lines["chain"][3] == lines["chain"][2] == (("/x/fightlab/kernels/newton.py", 21),)
    k = S.attribute(page, lines, 0, "kernel").set_index("place")
    assert k.loc["newton.py:21", "samples"] == 60 and k.loc["newton.py:20", "samples"] == 40
    assert k.loc["newton.py:21", "share"] == pytest.approx(0.6)
    assert k.loc["newton.py:21", "barrier"] == pytest.approx(50 / 60) and k.loc["newton.py:20", "wait"] == 0.65
    f = S.attribute(page, lines, 1, "function").set_index("place")
    assert f.loc["k.py:helper", "samples"] == 40 and f.loc["k.py:helper", "executed"] == 200
    assert f.loc["newton.py:21", "samples"] == 60  # no such file here: file:line
    assert set(S.attribute(page, lines, 0, "fightlab")["place"]) == {"k.py:2", "newton.py:21"}


def test_mismatched_builds_and_bad_input_are_refused(tmp_path, capsys):
    lines = S.read_line_map(_disassembly(tmp_path))
    other = S.read_source_page(_page([("LDS R2, [R3]", 1, 1, 0, 0), ("FADD R2, R2, R3", 1, 1, 0, 0)] + ROWS[2:]))
    with pytest.raises(ValueError, match="4 instructions against 4, 0 offsets missing, 1 instructions unlike"):
        S.attribute(other, lines)
    longer = S.read_source_page(_page(ROWS + [("EXIT", 0, 1, 0, 0)]))
    with pytest.raises(ValueError, match="5 instructions against 4, 1 offsets missing"):
        S.attribute(longer, lines)
    cut = S.read_source_page(_page(ROWS[:3]))  # a page cut off: fewer instructions than the build
    with pytest.raises(ValueError, match="3 instructions against 4, 0 offsets missing, 0 instructions unlike"):
        S.attribute(cut, lines)
    page = S.read_source_page(_page(ROWS))
    with pytest.raises(ValueError, match="key must be one of kernel, function, fightlab, got 'file'"):
        S.attribute(page, lines, key="file")
    with pytest.raises(ValueError, match=r"launch 3 not in the page \(launches 0..0\)"):
        S.attribute(page, lines, launch=3)
    with pytest.raises(ValueError, match="no line locations"):
        S.read_line_map("        /*0000*/                   LDS R2, [R3] ;\n")
    with pytest.raises(ValueError, match="not ncu's source page"):
        S.read_source_page('"Kernel Name","k",\n"ID","Metric"\n"1","2"\n')
    with pytest.raises(ValueError, match="no \"Kernel Name\" block"):
        S.read_source_page("")
    assert S.main([str(tmp_path / "absent.csv"), str(tmp_path / "absent.txt")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ncu_source: ") and "absent.csv" in err and len(err.splitlines()) == 1
    (tmp_path / "page.csv").write_text(_page(ROWS))
    (tmp_path / "dis.txt").write_text(_disassembly(tmp_path / "src"))
    page, dis = str(tmp_path / "page.csv"), str(tmp_path / "dis.txt")
    for args, msg in (([dis, page], f"{dis}: not ncu's source page"), ([page, page], f"{page}: no line locations"),
                      ([page, dis, "--top", "0"], "--top must be >= 1, got 0"),
                      ([page, dis, "--source-root", str(tmp_path / "none")], "holds no fightlab/ folder")):
        assert S.main(args) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("ncu_source: ") and msg in err and len(err.splitlines()) == 1, err
    assert S.main([page, dis, "--top", "2"]) == 0 and "k.py:helper" in capsys.readouterr().out


def _real() -> tuple[pd.DataFrame, pd.DataFrame]:
    text = lambda name: lzma.decompress((REPO / "tests/data" / name).read_bytes()).decode()
    return (S.read_source_page(text("ncu_source_muscular-fast.csv.xz")),
            S.read_line_map(text("nvdisasm_muscular-fast.txt.xz")))


def test_the_h100_profile_is_the_disassembled_build_and_its_rows_add_up():
    """The H100's source page of muscular-fast's single launch (2 launches) and the same kernel
    compiled here with line info: every instruction alike; the committed ncu_source rows of that
    profile hold all of launch 0's samples and instructions, per file as the line table has them."""
    page, lines = _real()
    assert sorted(page["launch"].unique()) == [0, 1] and len(lines) == (page["launch"] == 0).sum()
    S.check_same_code(page[page["launch"] == 1].reset_index(drop=True), lines)
    by_line = S.attribute(page, lines, 0, "fightlab")
    assert by_line["share"].sum() == pytest.approx(1.0)
    committed = results.read_rows("ncu_source", REPO)
    params = [json.loads(p) for p in committed["params"]]
    mine = committed[[p["ncu_run_id"] == "4d3d9e51b896" for p in params]]
    assert len(mine) > 10 and set(mine["body"]) == {"muscular-fast"} and set(mine["gpu"]) == {"NVIDIA H100 80GB HBM3"}
    assert mine["samples"].sum() == by_line["samples"].sum() == page[page["launch"] == 0]["samples"].sum()
    assert mine["executed"].sum() == page[page["launch"] == 0]["executed"].sum()
    file_of = lambda place: place.split(":")[0]
    want = by_line.groupby(by_line["place"].map(file_of))["samples"].sum()
    got = mine.groupby([file_of(json.loads(p)["place"]) for p in mine["params"]])["samples"].sum()
    assert got.sort_index().to_dict() == want[want > 0].sort_index().to_dict()
    top = mine.sort_values("samples", ascending=False).iloc[0]
    assert json.loads(top["params"])["place"] == "newton_tree.py:factor" and 0.3 < top["share"] < 0.6
    shares = mine[[c for c in results.EXPERIMENTS["ncu_source"] if c.endswith("_share")]]
    sampled = mine["samples"] > 0
    assert (shares[sampled].sum(axis=1) - 1.0).abs().max() < 1e-9 and (shares[~sampled] == 0).all().all()


def test_publish_copies_the_profile_metadata_once(tmp_path):
    """Rows carry the ncu row's card, driver, commit, body and world count; a second publish of
    the same profile and an unknown ncu row are refused, nothing appended."""
    (tmp_path / "data" / "results").mkdir(parents=True)
    ncu = results.read_rows("ncu", REPO)
    src = ncu[ncu["run_id"] == "4d3d9e51b896"]
    src.to_csv(results.results_path("ncu", tmp_path), index=False)
    page, dis = tmp_path / "muscular-fast-source.csv", tmp_path / "muscular-fast-nvdisasm.txt"
    for name, dest in (("ncu_source_muscular-fast.csv.xz", page), ("nvdisasm_muscular-fast.txt.xz", dis)):
        dest.write_bytes(lzma.decompress((REPO / "tests/data" / name).read_bytes()))
    tree = tmp_path / "src"  # an exported tree (no git): taken as the profiled commit's files
    shutil.copytree(REPO / "fightlab", tree / "fightlab", ignore=shutil.ignore_patterns("__pycache__"))
    with pytest.raises(ValueError, match="no ncu row 'feedbeef0000'"):
        S.publish(page, dis, "feedbeef0000", tmp_path, source_root=tree)
    with pytest.raises(ValueError, match="are commit .*, the profile is commit 31e2e7c: pass --source-root"):
        S.publish(page, dis, "4d3d9e51b896", tmp_path)  # the disassembly's paths are not this profile's tree
    with pytest.raises(ValueError, match="holds no fightlab/ folder"):
        S.publish(page, dis, "4d3d9e51b896", tmp_path, source_root=tmp_path)
    other = tmp_path / "simple-source.csv"
    shutil.copy(page, other)
    with pytest.raises(ValueError, match="names body simple, the ncu row's body is 'muscular-fast'"):
        S.publish(other, dis, "4d3d9e51b896", tmp_path, source_root=tree)
    renamed = tmp_path / "muscular-fast-renamed.csv"
    renamed.write_text(page.read_text().replace("_kernel__locals___newton_dc837693", "_factor_tree_dc837693"))
    with pytest.raises(ValueError, match="the page profiles _factor_tree_dc837693.*not the same profile"):
        S.publish(renamed, dis, "4d3d9e51b896", tmp_path, source_root=tree)
    assert not results.results_path("ncu_source", tmp_path).exists()
    rows = S.publish(page, dis, "4d3d9e51b896", tmp_path, source_root=tree)
    back = results.read_rows("ncu_source", tmp_path)
    assert len(back) == len(rows) > 10
    for col in ("gpu", "driver", "commit", "body", "nworld"):
        assert set(back[col]) == set(src[col]), col
    assert S.main([str(page), str(dis), "--publish", "4d3d9e51b896", "--root", str(tmp_path), "--top", "1",
                   "--source-root", str(tree)]) == 2
    assert len(results.read_rows("ncu_source", tmp_path)) == len(rows)


def test_disassemble_builds_the_training_kernel_for_a_gpu_without_one(tmp_path, capsys):
    """--disassemble compiles the single launch the body's physics uses for sm_90 on this CPU
    machine and hands the cubin to nvdisasm -gi -c (a stand-in here that checks its arguments);
    a bad body, a missing or failing nvdisasm: one line each, nothing written."""
    fake = tmp_path / "nvdisasm"
    fake.write_text('#!/bin/bash\n[ "$1" = -gi ] && [ "$2" = -c ] && [ -s "$3" ] || { echo "bad $*" >&2; exit 3; }\n'
                    'case "$3" in *.sm90.cubin) echo "// $(basename "$3")";; *) echo "not sm90" >&2; exit 4;; esac\n'
                    'printf \'\\t//## File "/x/fightlab/kernels/newton.py", line 1\\n        /*0000*/   EXIT ;\\n\'\n')
    fake.chmod(0o755)
    out = tmp_path / "simple-nvdisasm.txt"
    assert S.main(["--disassemble", "simple", str(out), "--nvdisasm", str(fake)]) == 0
    assert out.read_text().startswith("// wp__kernel__locals___newton_") and not list(tmp_path.glob("*.tmp"))
    failing = tmp_path / "failing"
    failing.write_text("#!/bin/bash\necho 'nvdisasm fatal : bad cubin' >&2\nexit 1\n")
    failing.chmod(0o755)
    capsys.readouterr()
    echo = tmp_path / "echo"
    echo.write_text("#!/bin/bash\necho \"$@\"\n")
    echo.chmod(0o755)
    for args, msg in ((["--disassemble", "nobody"], "body must be one of muscular-fast, simple, got 'nobody'"),
                      (["--disassemble", "simple", "--nvdisasm", str(tmp_path / "none")], "nvdisasm not found"),
                      (["--disassemble", "simple", "--nvdisasm", str(failing)], "failed (1): nvdisasm fatal"),
                      (["--disassemble", "simple", "--nvdisasm", str(echo)], "output is no line-info disassembly"),
                      (["--disassemble", "simple", "--launch", "1"], "takes one path")):
        assert S.main([*args[:2], str(tmp_path / "x.txt"), *args[2:]]) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err.startswith("ncu_source: ") and msg in err, err
    assert S.main(["--disassemble", "simple", str(tmp_path), "--nvdisasm", str(fake)]) == 2
    assert "a folder, or its folder does not exist" in capsys.readouterr().err
    assert not (tmp_path / "x.txt").exists() and not list(tmp_path.glob("*.tmp"))


def test_the_function_table_reads_the_committed_rows():
    """Notebook 09's table: per profile its top functions, the factor first for both bodies."""
    t = S.function_table(results.read_rows("ncu_source", REPO), top=3)
    assert list(t.columns) == ["gpu", "body", "nworld", "function", "share_pct", "wait_pct", "barrier_pct",
                               "long_sb_pct", "short_sb_pct"]
    assert t.groupby("body").size().to_dict() == {"muscular-fast": 3, "simple": 3}
    assert list(t.groupby("body")["function"].first()) == ["newton_tree.py:factor"] * 2
    assert t["share_pct"].between(0, 100).all() and S.function_table(pd.DataFrame()).empty
