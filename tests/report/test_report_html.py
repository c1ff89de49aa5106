"""report.html (gpu_memsafety.report.html): one self-contained page. Checked as text (no network reference, a
Content-Security-Policy that admits only its own hashed style and script, foreign text escaped) and in a real
headless browser: Debian's chromium driven by Playwright through its executable_path (`.ci/run` installs both;
elsewhere the browser test skips, naming what is missing). The browser test loads the page as a file, and
checks that it renders, that nothing logs an error, that no request leaves the page, that every finding's
picture is drawn, and that the outcome, kernel, detector and id filters and the matrix's rows filter."""
from __future__ import annotations

import base64
import hashlib
import importlib.util
import re
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

from gpu_memsafety.report import load_report
from gpu_memsafety.report.html import render_html
from report_samples import EVIDENCE_REPORTS, HOSTILE, MATRIX, sample_report

CHROMIUM = "/usr/bin/chromium"
# Chromium as a sandboxed test needs it: no GPU, no first-run, nothing that reaches the network by itself.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _hash(body: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"


def test_the_page_references_nothing_outside_itself_and_its_policy_admits_only_its_own_code() -> None:
    page = render_html(load_report(MATRIX))
    assert not re.search(r"""(src|href|action)\s*=\s*["']?(https?:|//)""", page, re.I)
    assert "@import" not in page and "url(" not in page
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "default-src 'none'" in csp
    [script] = re.findall(r"<script>(.*?)</script>", page, re.S)
    [style] = re.findall(r"<style>(.*?)</style>", page, re.S)
    assert f"script-src {_hash(script)}" in csp and f"style-src {_hash(style)}" in csp


def test_foreign_text_is_escaped() -> None:
    page = render_html(sample_report(hostile=True))
    assert page.count("<script") == 1 and "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\x1b" not in page and "\u202e" not in page and "\\x1b" in page
    assert HOSTILE not in page


def test_each_drawable_finding_gets_its_picture() -> None:
    report = load_report(EVIDENCE_REPORTS[0])
    page = render_html(report)
    drawn = sum(1 for c in report["cases"] for f in c["findings"] if f["buffer"] not in ("unattributed", "(unplaced)")
                and f["ranges"])
    assert page.count('class="buffer-picture"') == drawn > 0


# ------------------------------------------------------------------------------------------- the browser


def _browser_missing() -> str:
    missing = []
    if importlib.util.find_spec("playwright") is None:
        missing.append("the Python package playwright (pip install playwright; no browser download needed)")
    if not Path(CHROMIUM).is_file() and not shutil.which("chromium"):
        missing.append(f"Debian's chromium at {CHROMIUM} (apt-get install chromium)")
    return "; ".join(missing)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    missing = _browser_missing()
    if missing:
        pytest.skip(f"the browser test needs {missing}; .ci/run installs both")
    from playwright.sync_api import sync_playwright
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium"),
            headless=True, args=CHROMIUM_ARGS, viewport={"width": 1280, "height": 900})
        try:
            yield context
        finally:
            context.close()


class Page:
    """A report.html opened in the browser, with what it logged and asked for."""

    def __init__(self, context: Any, path: Path) -> None:
        self.page = context.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: m.type in ("error", "warning") and self.errors.append(f"{m.type}: {m.text}"))
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(path.as_uri())
        self.page.wait_for_selector("#shown:not(:empty)")

    def choose(self, name: str, value: str) -> None:
        self.page.select_option(f"#filters select[name={name}]", value)

    def visible_cases(self) -> list[dict[str, str]]:
        return self.page.eval_on_selector_all(
            "details.case", "els => els.filter(e => !e.hidden).map(e => Object.assign({}, e.dataset))")

    def shown(self) -> str:
        return self.page.inner_text("#shown")


def _open(browser: Any, tmp_path: Path, report: dict[str, Any]) -> Page:
    path = tmp_path / "report.html"
    path.write_text(render_html(report))
    return Page(browser, path)


def test_the_h200_report_renders_with_no_error_no_request_and_every_picture_drawn(browser: Any, tmp_path: Path) -> None:
    report = load_report(MATRIX)
    page = _open(browser, tmp_path, report)
    assert page.errors == []
    assert page.requests == [(tmp_path / "report.html").as_uri()]
    assert page.shown() == f"{len(report['cases'])} of {len(report['cases'])} cases shown"
    assert page.page.locator("table.matrix tr").count() == 1 + len({r["kernel"] for r in report["matrix"]})
    case = page.page.locator("details.case:has(svg.buffer-picture)").first
    case.locator("summary").click()
    picture = case.locator("svg.buffer-picture").first
    box = picture.bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 60
    page.page.screenshot(path=str(tmp_path / "report.png"))
    assert (tmp_path / "report.png").stat().st_size > 10_000


def test_the_filters_show_only_the_cases_asked_for(browser: Any, tmp_path: Path) -> None:
    report = sample_report(hostile=True)
    page = _open(browser, tmp_path, report)
    assert page.errors == []
    total = len(report["cases"])
    page.choose("outcome", "*failing")
    assert {c["failed"] for c in page.visible_cases()} == {"1"}
    assert page.shown() == f"3 of {total} cases shown"
    page.choose("outcome", "expected finding")
    assert {c["outcome"] for c in page.visible_cases()} == {"expected finding"} and len(page.visible_cases()) == 2
    page.choose("outcome", "")
    page.choose("detector", "guard")
    assert {c["id"] for c in page.visible_cases()} == {"stray_store[bad-n4]", "stray_store[accepted-n4]"}
    page.choose("detector", "-")
    assert {c["id"] for c in page.visible_cases()} == {"oob_read[gone-K2880]", "oob_read[sm80-K2880]"}
    page.choose("detector", "")
    page.choose("kernel", "store_k")
    assert {c["kernel"] for c in page.visible_cases()} == {"store_k"} and len(page.visible_cases()) == 3
    page.choose("kernel", "")
    page.page.fill("#filters input[name=q]", "K2880")
    assert all("K2880" in c["id"] for c in page.visible_cases()) and len(page.visible_cases()) == 4
    page.page.fill("#filters input[name=q]", "")
    page.page.locator("table.matrix tr[data-filter-kernel]").first.click()   # a matrix row: that kernel's cases
    kernel = page.page.locator("table.matrix tr[data-filter-kernel]").first.get_attribute("data-filter-kernel")
    assert {c["kernel"] for c in page.visible_cases()} == {kernel}
    assert page.errors == []
