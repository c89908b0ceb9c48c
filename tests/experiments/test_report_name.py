"""`cselab report --name NAME`: the report's files under a name of their own, so several share a folder."""
from cselab.experiments.report import write_report


def test_named_report_files_and_plots_beside_others(fake_sweep, tmp_path, cli, capsys):
    out = tmp_path / "results"
    (out / "plots").mkdir(parents=True)
    (out / "plots" / "other.svg").write_text("<svg/>")  # another report's plot, left alone
    assert cli(["report", str(fake_sweep), "--out", str(out), "--name", "study_b", "--title", "B"]) == 0
    printed = capsys.readouterr().out
    for suffix in ("md", "html", "json"):
        assert (out / f"study_b.{suffix}").is_file() and f"study_b.{suffix}" in printed
    assert not (out / "report.md").exists()
    text = (out / "study_b.md").read_text()
    assert text.startswith("# B\n")
    links = [line for line in text.splitlines() if line.startswith("![")]
    assert links and all("](study_b-plots/" in line for line in links)
    for line in links:  # every link resolves beside the Markdown file
        assert (out / line.split("](", 1)[1].rstrip(")")).read_text().startswith("<svg")
    assert sorted(p.name for p in (out / "plots").iterdir()) == ["other.svg"]


def test_default_name_keeps_report_and_plots(fake_sweep, tmp_path):
    written = write_report([fake_sweep], tmp_path / "out")
    assert written["markdown"] == tmp_path / "out" / "report.md"
    assert "](plots/" in written["markdown"].read_text()


def test_name_with_a_folder_or_extension_is_refused_in_one_line(fake_sweep, tmp_path, cli, capsys):
    for bad in ("a/b", "x.md", ".hidden", ""):
        try:
            code = cli(["report", str(fake_sweep), "--out", str(tmp_path / "o"), "--name", bad])
        except SystemExit as exit_:
            code = exit_.code
        assert code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert "--name" in err[-1] and "a file name without a folder or an extension" in err[-1]
    assert not (tmp_path / "o").exists()
