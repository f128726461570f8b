"""The pages people use, in a real browser: the API reference (Swagger UI over /openapi.json, its scripts served
by the app from drf-spectacular-sidecar) rendered by headless Chromium against a live server. Chromium is Debian's
(``make install-test`` installs it when it can); without it the test is skipped and says why."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.test_nlweb_live import serve

pytestmark = [pytest.mark.slow, pytest.mark.django_db]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(not CHROMIUM, reason="no chromium on this machine: `apt-get install chromium` (make install-test)")
def test_the_api_reference_renders_every_front_door_in_a_browser(demo_content, tmp_path):
    with serve("gunicorn (WSGI)", "", AGENT_HANDSHAKE_TEST_API_DOCS="1") as url:
        command = [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            f"--user-data-dir={tmp_path}",
            "--virtual-time-budget=15000",
            "--dump-dom",
            f"{url}/agent/api-docs/",
        ]
        dom = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout
    # The page itself names none of these: they are in the DOM only once Swagger UI ran, fetched /openapi.json
    # and rendered its operations.
    for path in ("/agent/converse", "/capabilities/check_inventory", "/capabilities/book_appointment", "/ask",
                 "/mcp", "/.well-known/agent.json"):  # fmt: skip
        assert f'data-path="{path}"' in dom, path
    assert "Test Site" in dom  # info.title, from the site profile
