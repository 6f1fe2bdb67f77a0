"""#27 answer links: a one-time URL opens a server-rendered page that answers one question.

The browser test drives the distribution's headless Chromium (apt packages chromium and
chromium-driver, which .ci/run installs) through Selenium: it opens the link, gets an inline
validation error, fills the form, submits, and the upstream receives exactly that answer; the
link then says it was used. The HTTP tests check what a browser cannot show: a forged or foreign
form is refused, an approval is denied through its link, and a closed question is said to be."""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import ROOT, Api, RawHost, operator_attached, stdio_server, wait_until

from mcpx.connections import naming

pytestmark = [pytest.mark.sqlite_only("the answer page in a browser")]

SERVER = ROOT / "tests" / "conformance" / "server.py"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
# MCPX_SCREENSHOTS=1 writes the page's pictures into screenshots/ (else the test's folder).
SHOTS = ROOT / "screenshots" if os.environ.get("MCPX_SCREENSHOTS") else None


def _config(tmp: Path) -> dict[str, Any]:
    return {
        "mcpServers": {
            "up": {"command": sys.executable, "args": [str(SERVER), "stdio", "--legacy-only"]},
            "fx": stdio_server(tmp, approve=["echo"]),
        }
    }


def _call_aside(d: Any, host: RawHost, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    box: dict[str, Any] = {}

    def call() -> None:
        with RawHost(d.url) as h:
            h.session_id, h.revision = host.session_id, host.revision
            box["frame"] = h.legacy("tools/call", {"name": name, "arguments": arguments}).json()

    box["thread"] = threading.Thread(target=call, daemon=True)
    box["thread"].start()
    return box


def _link(api: Api, qid: str) -> str:
    resp = api.post(f"/v1/questions/{qid}/link")
    assert resp.status_code == 200, resp.text
    return str(resp.json()["url"])


@pytest.fixture
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.mark.browser
def test_a_browser_answers_through_the_link_and_the_link_is_then_used(
    start_daemon: Any, tmp_path: Path, raw_host: Any, browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    d = start_daemon(_config(tmp_path))
    host = raw_host(d.url)
    host.initialize()  # no elicitation: the operator answers
    feed = operator_attached(d, "olga")
    try:
        with Api(d) as api:
            box = _call_aside(d, host, "up__test_elicitation", {"message": "Who are you?"})
            [q] = wait_until(api.open_questions, 20, "the question")
            url = _link(api, q["id"])
            shots = SHOTS or tmp_path
            for name, (width, height) in (("phone", (390, 844)), ("desktop", (1280, 900))):
                browser.set_window_size(width, height)
                browser.get(url)
                assert "Who are you?" in browser.find_element(By.CSS_SELECTOR, ".msg").text
                browser.save_screenshot(str(shots / f"answer-page-{name}.png"))
            browser.find_element(By.ID, "f-email").send_keys("ada@example.com")
            browser.find_element(By.ID, "f-by").send_keys("bob")
            browser.find_element(By.CSS_SELECTOR, "button[value=accept]").click()
            # A required field left empty: the browser's own check stops the form (no JavaScript).
            assert browser.find_element(By.ID, "f-username").get_attribute("validationMessage")
            browser.find_element(By.ID, "f-username").send_keys("ada")
            browser.find_element(By.CSS_SELECTOR, "button[value=accept]").click()
            WebDriverWait(browser, 10).until(lambda b: "Thank you" in b.page_source, "the answer page's reply")
            box["thread"].join(15)
            text = box["frame"]["result"]["content"][0]["text"]
            assert "action=accept" in text and "ada@example.com" in text and '"username": "ada"' in text, text
            [answered] = [h for h in api.history() if h["id"] == q["id"]]
            assert answered["answeredBy"] == "operator:bob@link"
            assert answered["answer"] == {
                "action": "accept",
                "content": {"username": "ada", "email": "ada@example.com"},
            }
            browser.get(url)  # reopened
            WebDriverWait(browser, 10).until(lambda b: "used already" in b.page_source, "the used link's page")
    finally:
        feed.close()


@pytest.mark.browser
def test_an_approval_with_long_arguments_shows_them_all_and_deny_says_what_the_host_was_told(
    start_daemon: Any, tmp_path: Path, raw_host: Any, browser: Any
) -> None:
    """#37 item 5: the approver sees every argument (the value after a long padding too), in a box
    that scrolls; #39 item 6: mcpx asks, and after Deny the page says what the host was told."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    d = start_daemon(_config(tmp_path))
    host = raw_host(d.url)
    host.initialize()
    args = {"a_padding": "pad " * 1500, "text": "rm -rf / --no-preserve-root"}
    with Api(d) as api:
        box = _call_aside(d, host, "fx__echo", args)
        [q] = wait_until(api.open_questions, 20, "the approval")
        assert "--no-preserve-root" in q["params"]["message"]  # the preview keeps every argument in view
        url = _link(api, q["id"])
        shots = SHOTS or tmp_path
        browser.set_window_size(390, 844)  # a phone
        browser.get(url)
        me = naming.shown_label(None, naming.process_label(os.getpid()), {"name": "pytest-raw"})
        assert browser.find_element(By.TAG_NAME, "h1").text == f"mcpx asks: may {me} run fx__echo?"
        shown = browser.find_element(By.ID, "arguments")
        whole = json.dumps(args, ensure_ascii=False, sort_keys=True, indent=2)
        assert shown.get_attribute("textContent") == whole
        assert f"all {len(whole):,} characters" in browser.find_element(By.CSS_SELECTOR, ".lbl").text
        fits = "return [arguments[0].scrollHeight, arguments[0].clientHeight, arguments[0].scrollWidth,"
        fits += " arguments[0].clientWidth, getComputedStyle(arguments[0]).overflowY]"
        tall, high, wide, width, overflow = browser.execute_script(fits, shown)
        assert tall > high and overflow == "auto", (tall, high, overflow)  # it scrolls: nothing is cut off
        assert wide <= width  # lines wrap at phone width: nothing runs off to the side
        browser.save_screenshot(str(shots / "answer-page-approval-phone.png"))
        browser.execute_script("arguments[0].scrollTop = arguments[0].scrollHeight", shown)
        assert "--no-preserve-root" in shown.text  # scrolled to the end: the dangerous value is on screen
        browser.find_element(By.ID, "f-reason").send_keys("not today")
        browser.find_element(By.ID, "f-by").send_keys("bob")
        browser.find_element(By.CSS_SELECTOR, "button[value=deny]").click()
        WebDriverWait(browser, 10).until(lambda b: "Denied." in b.page_source, "the page after Deny")
        told = "mcpx: the call to fx__echo was denied by operator bob@link: not today"
        assert browser.find_element(By.TAG_NAME, "h1").text == "Denied"
        assert browser.find_element(By.CSS_SELECTOR, ".msg").text == f"Denied. The host was told: “{told}”"
        browser.save_screenshot(str(shots / "answer-page-denied-phone.png"))
        box["thread"].join(15)
        assert box["frame"]["result"]["content"][0]["text"] == told


def test_the_page_starts_with_the_forms_defaults_and_accepting_them_sends_them(
    start_daemon: Any, tmp_path: Path, raw_host: Any, browser: Any
) -> None:
    """SEP-1034: a fresh page shows each field's default (it showed none: server-everything's
    "String with default" was empty), and Accept without touching a field sends them."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    d = start_daemon(_config(tmp_path))
    host = raw_host(d.url)
    host.initialize()  # no elicitation: the operator answers
    feed = operator_attached(d, "olga")
    try:
        with Api(d) as api:
            box = _call_aside(d, host, "up__test_elicitation_sep1034_defaults", {})
            [q] = wait_until(api.open_questions, 20, "the question")
            browser.get(_link(api, q["id"]))
            assert browser.find_element(By.ID, "f-name").get_attribute("value") == "John Doe"
            assert browser.find_element(By.ID, "f-age").get_attribute("value") == "30"
            assert browser.find_element(By.ID, "f-score").get_attribute("value") == "95.5"
            assert Select(browser.find_element(By.ID, "f-status")).first_selected_option.text == "active"
            assert Select(browser.find_element(By.ID, "f-verified")).first_selected_option.text == "Yes"
            browser.find_element(By.ID, "f-by").send_keys("bob")
            browser.find_element(By.CSS_SELECTOR, "button[value=accept]").click()
            WebDriverWait(browser, 10).until(lambda b: "Thank you" in b.page_source, "the answer page's reply")
            box["thread"].join(15)
    finally:
        feed.close()
    text = box["frame"]["result"]["content"][0]["text"]
    content = json.loads(text.split("content=", 1)[1])
    assert content == {"name": "John Doe", "age": 30, "score": 95.5, "status": "active", "verified": True}, text


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found, page
    return found.group(1)


def test_an_approval_is_denied_through_its_link_and_forged_forms_are_refused(
    start_daemon: Any, tmp_path: Path, raw_host: Any
) -> None:
    d = start_daemon(_config(tmp_path))
    host = raw_host(d.url)
    host.initialize()
    with Api(d) as api, httpx.Client(timeout=10) as web:
        box = _call_aside(d, host, "fx__echo", {"text": "rm -rf"})
        [q] = wait_until(api.open_questions, 20, "the approval")
        url = _link(api, q["id"])
        page = web.get(url)
        assert page.status_code == 200 and "Allow once" in page.text and "rm -rf" in page.text
        assert page.headers["referrer-policy"] == "no-referrer" and page.headers["cache-control"] == "no-store"
        assert "<script" not in page.text
        form = {"csrf": _csrf(page.text), "by": "bob", "decision": "deny", "reason": "no <b>way</b>"}
        forged = web.post(url, data={**form, "csrf": "0" * 64})
        assert forged.status_code == 403
        foreign = web.post(url, data=form, headers={"Origin": "https://evil.example"})
        assert foreign.status_code == 403
        nameless = web.post(url, data={**form, "by": ""})
        assert nameless.status_code == 422 and "your name is required" in nameless.text
        done = web.post(url, data=form)
        # What happened, in the operator's terms (#39 item 6): not "Your answer (accept) went to fx".
        told = "mcpx: the call to fx__echo was denied by operator bob@link: no &lt;b&gt;way&lt;/b&gt;"
        assert done.status_code == 200 and f"Denied. The host was told: “{told}”" in done.text, done.text
        box["thread"].join(15)
        result = box["frame"]["result"]
        assert result["isError"] is True
        assert (
            result["content"][0]["text"] == "mcpx: the call to fx__echo was denied by operator bob@link: no <b>way</b>"
        )
        again = web.post(url, data=form)
        assert again.status_code == 410 and "used already" in again.text
        assert web.get(url.rsplit("/", 1)[0] + "/not-a-token").status_code == 410
        # A form the browser would not have sent (a required field missing): the page itself says so.
        asking = _call_aside(d, host, "up__test_elicitation", {"message": "Name?"})
        feed = operator_attached(d, "olga")
        try:
            [q3] = wait_until(api.open_questions, 20, "the elicitation")
            url3 = _link(api, q3["id"])
            page3 = web.get(url3)
            bad = web.post(url3, data={"csrf": _csrf(page3.text), "by": "bob", "action": "accept", "email": "x@y.z"})
            assert bad.status_code == 422 and 'id="err-username"' in bad.text and "a value is required" in bad.text
            assert 'value="x@y.z"' in bad.text  # what was typed stays
            declined = web.post(url3, data={"csrf": _csrf(page3.text), "by": "bob", "action": "decline"})
            assert declined.status_code == 200
            asking["thread"].join(15)
            assert "action=decline" in asking["frame"]["result"]["content"][0]["text"]
        finally:
            feed.close()
        # Allowed through its link: the page says the call runs now, naming the caller (#39 item 6).
        allowed = _call_aside(d, host, "fx__echo", {"text": "ls -l"})
        [q4] = wait_until(api.open_questions, 20, "the approval to allow")
        url4 = _link(api, q4["id"])
        page4 = web.get(url4)
        yes = web.post(url4, data={"csrf": _csrf(page4.text), "by": "bob", "decision": "allow"})
        me = naming.shown_label(None, naming.process_label(os.getpid()), {"name": "pytest-raw"})
        assert yes.status_code == 200 and f"Allowed once. {me}&#x27;s call to fx__echo runs now." in yes.text, yes.text
        allowed["thread"].join(15)
        assert allowed["frame"]["result"]["content"][0]["text"] == "ls -l"
        # A question answered elsewhere: its link says by whom.
        other = _call_aside(d, host, "fx__echo", {"text": "ls"})
        [q2] = wait_until(api.open_questions, 20, "the second approval")
        url2 = _link(api, q2["id"])
        assert api.answer(q2["id"], "accept", by="olga", content={"decision": "allow"}).status_code == 200
        other["thread"].join(15)
        closed = web.get(url2)
        assert closed.status_code == 410 and "already answered by olga" in closed.text
