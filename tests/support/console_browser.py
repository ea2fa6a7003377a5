#!/usr/bin/python3
"""Drive the review console with a real, headless Chromium (Selenium).

    console_browser.py decide URL USER PASSWORD APPROVE_ID DENY_ID REASON SUBJECT SHOTS
        log in, see the pushes (with the hostile run name shown as text),
        open APPROVE_ID's page (its commit's SUBJECT shown as text),
        approve one approval and deny the other with REASON
    console_browser.py push URL USER PASSWORD PUSH_ID TEXT SHOTS
        log in and open one push's page; TEXT must be shown literally

Every page is checked to be inert: no script ran (document.title untouched,
no alert), no element the hostile strings would have made exists.
Screenshots go to SHOTS. Exits non-zero with a message on any failure.
"""
import os
import sys

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1000"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)


def inert(d, page):
    """No script of an attacker's ran on the page."""
    try:
        d.switch_to.alert
        fail(page + ": an alert is open")
    except NoAlertPresentException:
        pass
    if "pwned" in d.title:
        fail(page + ": a script changed the title: " + d.title)
    if d.find_elements(By.CSS_SELECTOR, "main img, main script, main b"):
        fail(page + ": markup from a push became an element")


def wait_title(d, text):
    try:
        WebDriverWait(d, 10).until(EC.title_contains(text))
    except Exception:
        fail("no page titled %r: at %s, titled %r" % (text, d.current_url, d.title))


def wait_main(d, text):
    """Until the page that replaced the last one is loaded and says `text`."""
    try:
        WebDriverWait(d, 10).until(EC.text_to_be_present_in_element((By.TAG_NAME, "main"), text))
    except Exception:
        fail("no %r on the page: at %s:\n%s" % (text, d.current_url, main_text(d)))


def main_text(d):
    return d.find_element(By.TAG_NAME, "main").text


def login(d, url, user, password, shots):
    d.get(url + "/pushes")
    if not d.current_url.endswith("/login"):
        fail("no redirect to /login without a session: " + d.current_url)
    d.find_element(By.NAME, "user").send_keys(user)
    d.find_element(By.NAME, "password").send_keys(password)
    d.find_element(By.CSS_SELECTOR, "form.login button").click()
    wait_title(d, "Pushes")
    if not d.current_url.endswith("/pushes") or "Pushes" not in d.title:
        fail("login did not land on the pushes page: %s\n%s" % (d.current_url, d.find_element(By.TAG_NAME, "body").text))
    d.save_screenshot(os.path.join(shots, "console-pushes.png"))
    inert(d, "pushes")


def decide(url, user, password, approve_id, deny_id, reason, subject, shots):
    d = browser()
    try:
        login(d, url, user, password, shots)
        body = d.find_element(By.TAG_NAME, "main").text
        if "<img/src=x/onerror=" not in body:
            fail("the hostile run name is not shown as text on the pushes page")
        d.find_element(By.LINK_TEXT, "Approvals").click()
        wait_title(d, "Approvals")
        d.find_element(By.LINK_TEXT, approve_id).click()
        wait_title(d, "Approval")
        d.save_screenshot(os.path.join(shots, "console-approval.png"))
        inert(d, "approval")
        if subject not in main_text(d):
            fail("the approval page does not show the commit subject %r literally: %s"
                 % (subject, main_text(d)))
        if "Eve \"&amp;\" O'Hara" not in main_text(d):
            fail("the approval page does not show the commit's author literally")
        d.back()
        wait_title(d, "Approvals")
        d.save_screenshot(os.path.join(shots, "console-approvals.png"))
        inert(d, "approvals")
        rows = d.find_elements(By.CSS_SELECTOR, "table.approvals tbody tr")
        ids = [r.find_element(By.TAG_NAME, "code").text for r in rows]
        if approve_id not in ids or deny_id not in ids:
            fail("pending approvals shown: %s" % ids)
        row = rows[ids.index(approve_id)]
        row.find_element(By.CSS_SELECTOR, "form.approve button").click()
        WebDriverWait(d, 10).until(EC.staleness_of(row))
        wait_main(d, "Approval %s approved." % approve_id)
        rows = d.find_elements(By.CSS_SELECTOR, "table.approvals tbody tr")
        row = [r for r in rows if r.find_element(By.TAG_NAME, "code").text == deny_id][0]
        row.find_element(By.NAME, "reason").send_keys(reason)
        row.find_element(By.CSS_SELECTOR, "form.deny button").click()
        WebDriverWait(d, 10).until(EC.staleness_of(row))
        wait_main(d, "Approval %s denied." % deny_id)
        d.save_screenshot(os.path.join(shots, "console-decided.png"))
        inert(d, "approvals after deciding")
    finally:
        d.quit()


def push(url, user, password, push_id, text, shots):
    d = browser()
    try:
        login(d, url, user, password, shots)
        d.get(url + "/push?id=" + push_id)
        d.save_screenshot(os.path.join(shots, "console-push.png"))
        inert(d, "push")
        wait_title(d, "Push")
        if text not in main_text(d):
            fail("the push page does not show %r literally: %s" % (text, main_text(d)))
        d.get(url + "/integrity")
        wait_title(d, "Integrity")
        d.save_screenshot(os.path.join(shots, "console-integrity.png"))
        if "The chain is intact" not in d.find_element(By.TAG_NAME, "main").text:
            fail("the integrity page does not say the chain is intact")
    finally:
        d.quit()


if __name__ == "__main__":
    if len(sys.argv) == 10 and sys.argv[1] == "decide":
        decide(*sys.argv[2:])
    elif len(sys.argv) == 8 and sys.argv[1] == "push":
        push(*sys.argv[2:])
    else:
        fail("usage: see the docstring")
