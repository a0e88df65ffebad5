"""plmcourse.results: the bench tables the notebooks show, found in a checkout, the cache, or downloaded."""

import json

import pytest

from plmcourse import results


@pytest.fixture
def nowhere(monkeypatch, tmp_path):
    """No checkout results and an empty cache; downloads go to `fetched` (url -> text, or an error)."""
    monkeypatch.setattr(results, "CHECKOUT_RESULTS", tmp_path / "checkout")
    monkeypatch.setenv("PLMCOURSE_CACHE", str(tmp_path / "cache"))
    fetched = {}

    class Response:
        def __init__(self, text):
            self.text = text

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def read(self):
            return self.text.encode()

    def urlopen(url, timeout):
        fetched.setdefault("urls", []).append(url)
        if "error" in fetched:
            raise fetched["error"]
        return Response(fetched["text"])

    monkeypatch.setattr(results.urllib.request, "urlopen", urlopen)
    return tmp_path, fetched


def test_the_checkout_comes_first(nowhere):
    tmp_path, fetched = nowhere
    (tmp_path / "checkout").mkdir()
    (tmp_path / "checkout" / "simcse.json").write_text(json.dumps({"rows": [1]}))
    assert results.bench_results("simcse") == {"rows": [1]}
    assert "urls" not in fetched


def test_without_a_checkout_it_is_downloaded_once_into_the_cache(nowhere):
    tmp_path, fetched = nowhere
    fetched["text"] = json.dumps({"rows": [2]})
    assert results.bench_results("peft") == {"rows": [2]}
    assert results.bench_results("peft") == {"rows": [2]}
    assert len(fetched["urls"]) == 1, "the second call must read the cache"
    url = fetched["urls"][0]
    assert url.startswith("https://raw.githubusercontent.com/") and url.endswith("/main/bench/results/peft.json")
    assert json.loads((tmp_path / "cache" / "bench" / "peft.json").read_text()) == {"rows": [2]}


@pytest.mark.parametrize("error", [OSError("Name or service not known"), ValueError("unknown url type")])
def test_offline_it_says_so_and_returns_none(nowhere, capsys, error):
    _, fetched = nowhere
    fetched["error"] = error
    assert results.bench_results("instruct") is None
    said = capsys.readouterr().out
    assert "bench/results/instruct.json" in said and "python -m bench instruct" in said and str(error) in said


def test_a_download_that_is_not_json_is_not_cached(nowhere, capsys):
    tmp_path, fetched = nowhere
    fetched["text"] = "<html>404</html>"
    assert results.bench_results("instruct") is None
    assert not (tmp_path / "cache" / "bench" / "instruct.json").exists()


def test_no_download_when_asked_not_to(nowhere, capsys):
    _, fetched = nowhere
    assert results.bench_results("instruct", download=False) is None
    assert "urls" not in fetched
    assert "python -m bench instruct" in capsys.readouterr().out


def test_raw_url():
    assert results.raw_url("https://github.com/a/b/") == "https://raw.githubusercontent.com/a/b"


def test_format_table_aligns_columns_and_fills_missing_cells():
    text = results.format_table([{"method": "SimCSE", "rho": 0.61}, {"method": "BYOL"}])
    assert text.splitlines() == ["method | rho", "SimCSE | 0.61", "BYOL   |"]
    assert results.format_table([{"a": 1, "b": 2}], columns=["b"]) == "b\n2"
