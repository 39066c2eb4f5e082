"""The trial's final screenshot as the harness keeps it: a lossless WebP of the backend's PNG (the
same pixels, even under transparent ones), the PNG kept where it cannot or should not be converted,
and taken after the trace has ended, so the trace holds the agent's steps only."""

from __future__ import annotations

import io
from types import SimpleNamespace

from PIL import Image

from pytest_webbench.results.records import final_screenshot, screenshot_name
from pytest_webbench.trial import browser_session
from pytest_webbench.trial.agent import AgentRunner
from pytest_webbench.trial.browser_session import lossless_webp


def _png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def test_every_pixel_survives_even_the_colour_under_a_transparent_one():
    image = Image.new("RGBA", (64, 48), (250, 20, 90, 0))  # transparent, and red beneath
    image.putpixel((3, 4), (1, 2, 3, 255))
    image.putpixel((5, 6), (200, 100, 50, 128))
    webp = lossless_webp(_png(image))
    assert screenshot_name(webp) == "final-screenshot.webp"
    with Image.open(io.BytesIO(webp)) as back:
        assert back.format == "WEBP" and back.mode == "RGBA"
        assert back.tobytes() == image.tobytes()


def test_what_is_not_a_png_or_is_too_large_stays_as_it_came(monkeypatch):
    assert lossless_webp(b"not an image") == b"not an image"
    jpeg = io.BytesIO()
    Image.new("RGB", (8, 8)).save(jpeg, format="JPEG")
    assert lossless_webp(jpeg.getvalue()) == jpeg.getvalue()  # only PNG is decoded here
    big = _png(Image.new("RGB", (40, 30)))
    monkeypatch.setattr(browser_session, "MAX_WEBP_PIXELS", 40 * 30 - 1)
    assert lossless_webp(big) == big and screenshot_name(big) == "final-screenshot.png"


def test_a_png_that_stayed_one_is_still_the_trial_s_screenshot(tmp_path):
    assert final_screenshot(tmp_path) is None
    (tmp_path / "final-screenshot.png").write_bytes(b"\x89PNG")
    assert final_screenshot(tmp_path).name == "final-screenshot.png"  # results written before WebP
    (tmp_path / "final-screenshot.webp").write_bytes(b"RIFF....WEBP")
    assert final_screenshot(tmp_path).name == "final-screenshot.webp"


class _Browser:
    """What AgentRunner asks of the browser after the agent: the order it asks in, kept."""

    def __init__(self):
        self.asked: list[str] = []

    def run(self, coro, timeout=None):
        coro.close()  # the Harbor run itself is not what this test is about
        self.asked.append("agent")
        return SimpleNamespace()

    def end_agent_code(self):
        self.asked.append("end agent code")

    def save_trace(self, folder):
        self.asked.append("trace")
        return {}

    def save_screenshot(self, folder):
        self.asked.append("screenshot")


def test_the_trace_ends_before_the_harness_takes_its_screenshot(tmp_path):
    spec = SimpleNamespace(key=SimpleNamespace(arm="control"), trial_id="t-a1-control", task=SimpleNamespace(timeout_sec=60))
    st = SimpleNamespace(options=SimpleNamespace(runner="reference", trace=True), experiment_dir=tmp_path)
    browser = _Browser()
    AgentRunner(st, spec, browser, proxy=None).run()
    assert browser.asked == ["agent", "end agent code", "trace", "screenshot"]
