"""A report page opened from disk in headless Chromium (Debian's package, which `make test`
installs): what the page logged, asked for, drew and showed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# As root, in a sandbox whose network is closed: no sandbox, no GPU, no background traffic.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def open_page(path: str, screenshot: Path | None = None) -> dict:
    """Loads ``path``; its console messages, requests, plots ([name, complete, width,
    height]), metric cells ([slice, metric, value, text]), section ids and where each section
    is drawn. Skips the test where Chromium is not installed."""
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (make test installs it with apt-get where it can)")
    from playwright.sync_api import sync_playwright

    console, requests = [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.on("console", lambda message: console.append((message.type, message.text)))
        page.on("pageerror", lambda error: console.append(("pageerror", str(error))))
        page.on("request", lambda request: requests.append(request.url))
        page.goto(f"file://{path}", wait_until="load")
        if screenshot is not None:
            page.screenshot(path=str(screenshot), full_page=True)
        opened = {
            "path": path,
            "console": console,
            "requests": requests,
            "plots": page.eval_on_selector_all(
                "img.plot", "els => els.map(e => [e.dataset.plot, e.complete, e.naturalWidth, e.naturalHeight])"
            ),
            "cells": page.eval_on_selector_all(
                "tr[data-slice] td[data-metric]",
                "els => els.map(e => [e.closest('tr').dataset.slice, e.dataset.metric, e.dataset.value, "
                "e.textContent])",
            ),
            "sections": page.eval_on_selector_all("section", "els => els.map(e => e.id)"),
            # Where each section is drawn: id -> [top, bottom] in CSS pixels from the page's top.
            "boxes": dict(
                page.eval_on_selector_all(
                    "section",
                    "els => els.map(e => { const r = e.getBoundingClientRect(); "
                    "return [e.id, [r.top + window.scrollY, r.bottom + window.scrollY]]; })",
                )
            ),
            "viewport": page.viewport_size,
            # The verdict as the reader sees it (its headline, then each fact), or "" without one.
            "verdict": page.eval_on_selector_all("#verdict", "els => els.map(e => e.innerText).join('')"),
            "screenshot": screenshot,
        }
        browser.close()
    return opened


def errors(opened: dict) -> list:
    return [entry for entry in opened["console"] if entry[0] in ("error", "pageerror")]
