"""The intent page (/intent-ui/) as people meet it, in one headless Chromium (Playwright) against a live server: with
JavaScript off, on a 360 px phone, through the site's choice of what to do, and when the site asks them to slow
down. Chromium is Debian's; without it (or Playwright) the test is skipped and says why."""

from __future__ import annotations

import re

import pytest

from tests.browser.test_pages import CHROMIUM, written_by_the_server  # noqa: F401 (a fixture)
from tests.nlweb.test_live_servers import serve

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

MESSAGE = "Tell us what you would like, in your own words"
STOCK_QUESTION = "Is LK-TEA-0001 in stock?"
#: More than the per-address limit of the test settings' anonymous requests (RATE_LIMITS, 30/minute).
OVER_THE_LIMIT = 31
PROXY_502 = "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1><hr>nginx</body></html>"
DJANGO_500 = (
    '<!doctype html><html lang="en"><head><title>Server Error (500)</title></head>'
    "<body><h1>Server Error (500)</h1></body></html>"
)


def answered_with(status: int, html: str):
    """A route handler: the answer of a proxy or server in front of the site, an HTML page with ``status``."""
    return lambda route: route.fulfill(status=status, content_type="text/html", body=html)


def not_busy(page) -> bool:
    """Whether the page is back from sending: the conversation not busy, Send available and saying "Send"."""
    send = page.locator("#intent-form button[type=submit]")
    return (
        page.get_by_role("log").get_attribute("aria-busy") != "true"
        and send.is_enabled()
        and send.inner_text() == "Send"
    )


def refused(page, message):
    """Send STOCK_QUESTION from the page's ``message`` field: the conversation's problem reply, once it shows, and
    its text."""
    message.fill(STOCK_QUESTION)
    page.get_by_role("button", name="Send").click()
    problem = page.locator("#conversation li.site.problem")
    problem.wait_for()
    return problem, problem.text_content()


def problem_marked(reply) -> bool:
    """Whether ``reply`` (a list item of the conversation) says it is a problem in words, seen and heard: its red
    border was the only sign (colour alone, WCAG 1.4.1)."""
    marker = reply.get_by_text("Problem:", exact=True)
    # What a screen reader has of it (the accessibility tree), its roles and YAML quoting taken out.
    heard = " ".join(re.sub(r'^\s*- (?:\w+: )?|"', "", reply.aria_snapshot(), flags=re.MULTILINE).split())
    return marker.is_visible() and "The site says: Problem:" in heard


@pytest.mark.skipif(not CHROMIUM, reason="no chromium on this machine: `apt-get install chromium` (make install-test)")
def test_the_intent_page_works_for_people_without_javascript_on_a_phone_and_when_told_to_wait(written_by_the_server):  # noqa: F811
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (make install-test)")
    with serve("gunicorn (WSGI)", "") as url, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])

        # Without JavaScript the page says it needs it, and offers no form that would throw away what was typed (a
        # plain GET of the page again, the text gone, nothing said).
        context = browser.new_context(java_script_enabled=False)
        page = context.new_page()
        page.goto(f"{url}/intent-ui/")
        assert "needs JavaScript" in page.locator("main").inner_text()
        assert not page.get_by_label(MESSAGE).is_visible()
        assert not page.get_by_role("button", name="Send").is_visible()
        context.close()

        context = browser.new_context(viewport={"width": 360, "height": 740})
        page = context.new_page()
        page.goto(f"{url}/intent-ui/")
        assert "needs JavaScript" not in page.locator("main").inner_text()
        message = page.get_by_label(MESSAGE)
        assert message.is_visible()
        # The page's policy lets its own script run (by the response's nonce) and no other inline one.
        injected = page.evaluate(
            """() => {
                const script = document.createElement("script");
                script.textContent = "window.injected = true";
                document.body.appendChild(script);
                return window.injected === true;
            }"""
        )
        assert not injected

        # On a phone, a long word (a pasted link, a reference) and markup in the conversation wrap, shown as text: the
        # page does not scroll sideways.
        long_word = "https://example.com/" + "tea" * 120
        message.fill(f"Is <b>{long_word}</b> in stock?")
        # While the message is on its way (held here, as on a slow site), the page says so: the conversation is busy,
        # Send is unavailable, keeps the focus and says it is sending. Nothing showed it, and a second click did
        # nothing, which reads as broken.
        held = []
        page.route("**/intent-ui/message", lambda route: held.append(route))
        log = page.get_by_role("log")
        send = page.locator("#intent-form button[type=submit]")
        send.click()
        for _ in range(100):
            if held:
                break
            page.wait_for_timeout(50)
        assert len(held) == 1
        assert log.get_attribute("aria-busy") == "true"
        assert send.is_disabled()
        assert re.fullmatch(r"Sending…", send.inner_text()), send.inner_text()
        assert send.evaluate("button => button === document.activeElement")
        held[0].continue_()
        page.unroute("**/intent-ui/message")
        page.locator("#conversation li.site").first.wait_for()
        assert not_busy(page)
        assert "Problem:" not in page.locator("#conversation li.site").first.text_content()  # an answer, no problem
        assert page.locator("#conversation b").count() == 0
        assert f"<b>{long_word}</b>" in page.get_by_role("log").text_content()
        assert page.evaluate("document.documentElement.scrollWidth") <= 360

        # Something the page does not offer: the site offers what it does, and a person whom none of it fits, by
        # keyboard, can leave the choice and say something else (the choice was the only way on: a dead end).
        page.goto(f"{url}/intent-ui/")
        message.fill("Can someone call me back?")
        message.press("Tab")
        page.keyboard.press("Enter")
        page.get_by_role("heading", name="Which one do you mean?").wait_for()
        assert page.evaluate("document.activeElement.id") == "choices-heading"
        none_fits = page.get_by_role("button", name="None of these")
        assert none_fits.count() == 1
        none_fits.focus()
        page.keyboard.press("Enter")
        message.wait_for()
        assert page.evaluate("document.activeElement.id") == "message"
        assert not page.get_by_role("heading", name="Which one do you mean?").is_visible()

        # An answer that is no JSON (a proxy's HTML 502, Django's HTML 500): the site was reached, and the person reads
        # that it had a problem, not that it "could not be reached", with the message kept to send again.
        for status, body in ((502, PROXY_502), (500, DJANGO_500)):
            page.route("**/intent-ui/message", answered_with(status, body))
            page.goto(f"{url}/intent-ui/")
            problem, said = refused(page, message)
            assert "could not be reached" not in said, said
            assert f"Something went wrong on the site (error {status})" in said, said
            assert "try again" in said, said
            assert problem_marked(problem)
            assert message.input_value() == STOCK_QUESTION
            assert page.evaluate("document.activeElement.id") == "message"
            assert not_busy(page)
            page.unroute("**/intent-ui/message")

        # The site not reached at all (the connection failed): said so, and the page is not left busy.
        page.route("**/intent-ui/message", lambda route: route.abort())
        page.goto(f"{url}/intent-ui/")
        _, said = refused(page, message)
        assert "could not be reached" in said, said
        assert not_busy(page)
        page.unroute("**/intent-ui/message")

        # Told to slow down (a 429 with Retry-After, once the page's address has sent its limit's worth): the person
        # reads, in words, how long to wait, and may send the message again from where it is.
        page.goto(f"{url}/intent-ui/")
        csrf = next(cookie["value"] for cookie in context.cookies() if cookie["name"] == "csrftoken")
        page.evaluate(
            """async ([count, csrf]) => {
                for (let i = 0; i < count; i++) {
                    await fetch("/intent-ui/message", {method: "POST", credentials: "same-origin",
                        headers: {"Content-Type": "application/json", "X-CSRFToken": csrf},
                        body: JSON.stringify({message: "Hello"})});
                }
            }""",
            [OVER_THE_LIMIT, csrf],
        )
        problem, said = refused(page, message)
        assert "IP address" not in said, said
        assert re.search(r"try again in \d+ seconds?", said), said
        assert problem_marked(problem)
        assert message.is_visible()
        assert message.input_value() == STOCK_QUESTION
        assert page.evaluate("document.activeElement.id") == "message"
        assert not_busy(page)
        browser.close()
