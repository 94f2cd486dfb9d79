"""The README and docs/ say what the repository holds: the flag reference is the parser's own
text, the README stays a short guide, every link and image it or docs/ shows exists, nothing
points outside the repository, and the front page's headline is the current one of the rows."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
#: hand-written pages whose commands a user copies (docs/cli.md is generated: its usage lines
#: carry argparse's prog)
HAND_WRITTEN = [README] + [p for p in DOCS if p.name != "cli.md"] + [
    ROOT / "data" / "reference" / "original-study.md", ROOT / "data" / "survey" / "README.md"]

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def test_cli_reference_is_generated_from_the_parser():
    from fightlab.clidoc import markdown

    text = markdown()
    assert "## train" in text and "## survey launch" in text and "`--nworld NWORLD`" in text
    assert (ROOT / "docs" / "cli.md").read_text() == text, (
        "docs/cli.md differs from the parser: regenerate it with "
        "`.venv/bin/python -m fightlab.clidoc > docs/cli.md`")


def test_cli_reference_ignores_the_terminal_width(monkeypatch):
    from fightlab.clidoc import markdown

    monkeypatch.setenv("COLUMNS", "40")
    narrow = markdown()
    monkeypatch.setenv("COLUMNS", "300")
    assert markdown() == narrow


def test_readme_is_a_short_guide():
    lines = README.read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; at most 150 (details go to docs/)"
    text = "\n".join(lines)
    for command in ("bash scripts/run.sh", "bash scripts/test.sh", "bash scripts/lab.sh"):
        assert command in text, command


@pytest.mark.parametrize("page", [README] + DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_exists_inside_the_repository(page):
    bad = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a URL or an anchor on the page
        path = (page.parent / target.split("#")[0]).resolve()
        if not path.is_relative_to(ROOT) or not path.exists():
            bad.append(target)
    assert not bad, f"{page.name}: links to missing or outside files: {bad}"


@pytest.mark.parametrize("page", HAND_WRITTEN, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_path_outside_the_repository_and_no_bare_python(page):
    text = page.read_text()
    outside = re.findall(r"shared/reference|\.\./shared|(?<![\w.])/(?:work|home|tmp|root)/\S*", text)
    assert not outside, f"{page.name} cites files outside the repository: {outside}"
    bare = [m.group(0) for m in re.finditer(r"(?<!\.venv/bin/)\bpython -m fightlab\b", text)]
    assert not bare, f"{page.name}: use `.venv/bin/python -m fightlab` (a bare python has no pandas)"


def _fmt(x: float) -> str:
    return f"{x:.1f}"


def test_readme_headline_is_the_current_one():
    """Each body's row of the README's table carries the headline's median, min–max, median
    iterations and the commits of its rows (report.headline over data/results/train.csv)."""
    from fightlab.measure import report

    head = report.headline(report.solve_summary(report.published_runs()))
    assert not head.empty
    text = README.read_text()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| (simple|muscular-fast) \|.*$", text, re.M)}
    for keys, r in head.iterrows():
        body = dict(zip(report.SUMMARY_KEYS, keys))["body"]
        assert body in rows, f"README's headline table has no row for {body}"
        want = (f"{_fmt(r['time_to_solve_median_s'])} s ({_fmt(r['time_to_solve_min_s'])}–"
                f"{_fmt(r['time_to_solve_max_s'])}) | {r['iterations_median']:g} |")
        assert want in rows[body], f"README's {body} row: {rows[body]!r}; the rows say {want!r}"
        for commit in str(r["commits"]).split():
            assert commit in text, f"README does not name commit {commit} of the headline's rows"


def test_readme_rented_gpu_numbers_are_the_committed_main_job():
    """The rented-GPU section's total time, cost, peak memory and driver are those of the newest
    full main job in data/results/reproduce.csv (reproduce.job_times), at the stated price."""
    from fightlab.reproduce import job_times
    from fightlab.survey.cost import ASSUMED_PRICE_PER_HOUR

    text = README.read_text()
    times = job_times()
    assert not times.empty, "data/results/reproduce.csv holds no full main job on a GPU"
    total = times[(times["gpu"] == "NVIDIA H200") & (times["notebook"] == "total")].iloc[0]
    price = ASSUMED_PRICE_PER_HOUR["H200"]
    assert f"**{total['wall_s']:.0f} s ({total['wall_s'] / 60:.1f} min)**" in text
    assert f"**${total['wall_s'] / 3600 * price:.2f} at ${price:.2f}/h**" in text
    assert f"**{total['gpu_mem_peak_mib'] * 2**20 / 1e9:.1f} GB**" in text
    assert f"driver {total['driver']}" in text
    assert total["notebooks"] == 8, "the README's total is the whole main job: eight notebooks"
    rows = times[(times["gpu"] == "NVIDIA H200") & (times["notebook"] != "total")].set_index("notebook")
    for nb, wall in rows["wall_s"].items():  # the README's time of every notebook
        assert f"{nb[:2]} {wall:.0f} s" in text, f"README gives no time {nb[:2]} {wall:.0f} s for {nb}"


def test_no_issue_or_session_numbers_in_code_notebooks_or_tests():
    """Which issue or session chose a value is git history and bench/NOTES.md, not the code."""
    pattern = re.compile(r"\b(?:[Ii]ssues?|[Ss]essions?) #?[0-9]+")
    hits = []
    for folder in ("fightlab", "notebooks", "tests"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in (".py", ".ipynb", ".yaml", ".yml", ".json", ".sh") or not path.is_file():
                continue
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if pattern.search(line):
                    hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not hits, "issue/session numbers in the code:\n" + "\n".join(hits)
