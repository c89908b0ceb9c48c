"""`cselab data download` against a local fake source, and the archive guard against crafted archives."""
from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import pytest
from senteval_files import make_senteval

from cselab import cli
from cselab.evaluate.download import DownloadError, UnsafeArchiveError, download, fetch, required_files, safe_extract


@pytest.fixture
def fake_archive(tmp_path):
    """A tar with SentEval's layout under a top folder, as the real archive has."""
    make_senteval(tmp_path / "src" / "senteval", pairs_per_subset=4, per_class=4)
    archive = tmp_path / "senteval.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(tmp_path / "src" / "senteval", arcname="senteval")
    return archive


def test_download_from_file_url(fake_archive, tmp_path, capsys):
    dest = tmp_path / "data"
    digest = hashlib.sha256(fake_archive.read_bytes()).hexdigest()
    assert cli.main(["data", "download", "--dest", str(dest), "--url", fake_archive.as_uri(), "--sha256", digest]) == 0
    assert all((dest / f).is_file() for f in required_files())
    assert digest in capsys.readouterr().out
    assert cli.main(["data", "download", "--dest", str(dest), "--url", fake_archive.as_uri()]) == 0
    assert "already complete" in capsys.readouterr().out


def test_checksum_mismatch_is_refused(fake_archive, tmp_path, capsys):
    dest = tmp_path / "data"
    argv = ["data", "download", "--dest", str(dest), "--url", fake_archive.as_uri(), "--sha256", "0" * 64]
    assert cli.main(argv) == 2
    assert "does not match the expected" in capsys.readouterr().err
    assert not dest.exists()


def test_truncated_download_is_refused(fake_archive, tmp_path):
    def short_fetch(url, target):
        target.write_bytes(fake_archive.read_bytes()[:1000])
        return {"bytes": 1000, "expected_bytes": fake_archive.stat().st_size, "sha256": "x"}

    with pytest.raises(DownloadError, match="got 1000 bytes, the server announced"):
        download(tmp_path / "data", url="https://example.invalid/senteval.tar", fetcher=short_fetch)


def test_archive_without_required_files_is_refused(tmp_path):
    (tmp_path / "src/STS/STSBenchmark").mkdir(parents=True)
    (tmp_path / "src/STS/STSBenchmark/sts-dev.csv").write_text("x")
    archive = tmp_path / "partial.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(tmp_path / "src", arcname=".")
    with pytest.raises(DownloadError, match="the archive lacks STS/STS12-en-test/STS.input.MSRpar.txt"):
        download(tmp_path / "data", url=archive.as_uri(), progress=False)


def _tar_with(tmp_path, member: tarfile.TarInfo, payload: bytes = b"owned") -> Path:
    archive = tmp_path / "evil.tar"
    with tarfile.open(archive, "w") as tar:
        good = tarfile.TarInfo("senteval/readme.txt")
        good.size = 2
        tar.addfile(good, io.BytesIO(b"ok"))
        if member.isfile():
            member.size = len(payload)
            tar.addfile(member, io.BytesIO(payload))
        else:
            tar.addfile(member)
    return archive


@pytest.mark.parametrize("name", ["../evil.txt", "senteval/../../evil.txt", "/tmp/cselab-evil.txt"])
def test_path_traversal_is_refused(tmp_path, name):
    archive = _tar_with(tmp_path, tarfile.TarInfo(name))
    root = tmp_path / "deep" / "root"
    with pytest.raises(UnsafeArchiveError, match="refusing to extract"):
        safe_extract(archive, root)
    assert not (tmp_path / "deep" / "evil.txt").exists() and not (tmp_path / "evil.txt").exists()
    assert not root.exists()  # nothing extracted, not even the harmless member


def test_links_are_refused(tmp_path):
    link = tarfile.TarInfo("senteval/link")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    with pytest.raises(UnsafeArchiveError, match="is a link"):
        safe_extract(_tar_with(tmp_path, link), tmp_path / "root")


def test_zip_traversal_is_refused(tmp_path):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("ok/file.txt", "ok")
        zipped.writestr("../../evil.txt", "owned")
    with pytest.raises(UnsafeArchiveError, match="outside the destination"):
        safe_extract(archive, tmp_path / "root")
    assert not (tmp_path.parent / "evil.txt").exists()


def test_malicious_archive_through_the_command(tmp_path, capsys):
    archive = _tar_with(tmp_path, tarfile.TarInfo("../evil.txt"))
    assert cli.main(["data", "download", "--dest", str(tmp_path / "data"), "--url", archive.as_uri()]) == 2
    assert "refusing to extract" in capsys.readouterr().err
    assert not (tmp_path / "evil.txt").exists()


def test_unreachable_source_is_one_line(tmp_path, capsys):
    missing = (tmp_path / "nowhere.tar").as_uri()
    assert cli.main(["data", "download", "--dest", str(tmp_path / "data"), "--url", missing]) == 2
    assert "cannot download" in capsys.readouterr().err


def test_a_damaged_archive_is_a_download_error(fake_archive, tmp_path):
    damaged = tmp_path / "damaged.tar"
    damaged.write_bytes(fake_archive.read_bytes()[:1500])  # a member header, then the data cut off
    with pytest.raises(DownloadError, match="damaged.tar"):
        download(tmp_path / "data", url=damaged.as_uri())
    assert not (tmp_path / "data").exists()


def test_a_download_that_breaks_off_is_a_download_error(tmp_path, monkeypatch):
    import http.client
    import urllib.request

    class Broken:
        headers = {"Content-Length": "100"}

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def read(self, size):
            raise http.client.IncompleteRead(b"partial", 93)

    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: Broken())
    with pytest.raises(DownloadError, match="broke off"):
        fetch("https://example.invalid/senteval.tar", tmp_path / "archive.tar", progress=False)
