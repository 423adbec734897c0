"""`memctl ui` (memctl/ui/): each view's content, the safety rules (docs/UI.md, "Safety"), and the
command as a real process stopped by Ctrl-C. The browser tests are in test_ui_browser.py."""

from __future__ import annotations

import http.client
import re
import signal
import socket
import subprocess
import sys
from urllib.parse import quote, urlsplit

import pytest

from conftest import git, memctl
from ui_store import SCRIPT_FACT

from memctl.ui import server


def request(url: str, path: str, *, method: str = "GET", headers: dict | None = None, body: bytes | None = None):
    """(status, headers, text) of one raw request: Host and Origin as given (http.client sets Host otherwise)."""
    where = urlsplit(url)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=headers is not None and "Host" in headers, skip_accept_encoding=True)
        for name, value in (headers or {}).items():
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        answer = conn.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read().decode("utf-8")
    finally:
        conn.close()


def get(url: str, path: str, **params: str) -> str:
    query = "&".join(f"{k}={quote(v)}" for k, v in params.items())
    status, _, text = request(url, path + ("?" + query if query else ""))
    assert status == 200, text
    return text


# ---------------------------------------------------------------- what each view shows

def test_facts_view_lists_by_type_and_searches_in_both_languages(ui_url, pinned_clock):
    listing = get(ui_url, "/")
    assert "<h2>project (2)</h2>" in listing and "<h2>user (1)</h2>" in listing
    assert "記事の予約投稿は毎朝9時に公開する" in listing
    english = get(ui_url, "/", q="deploy freeze")
    assert 'href="/fact?name=deploy-freeze-thursday"' in english
    assert "deploy-freeze\"" not in english  # the superseded fact is archived: not a live hit
    factors = re.findall(r'<svg class="factors".*?</svg>', english)
    assert factors and all(f.count('class="bar"') == 5 for f in factors)  # relevance and the four others
    japanese = get(ui_url, "/", q="記事の予約投稿")
    assert 'href="/fact?name=kiji-yoyaku"' in japanese
    assert 'id="no-hits"' in get(ui_url, "/", q="zzqx unrelated")


def test_fact_page_has_text_chain_history_and_who_saw_it(ui_url, pinned_clock):
    page = get(ui_url, "/fact", name="deploy-freeze-thursday")
    assert "Deploys freeze on Thursdays after 15:00" in page
    chain = page[page.index("Supersession chain"):]
    assert chain.index("deploy-freeze<") < chain.index("<strong>deploy-freeze-thursday</strong>")
    assert "Git history" in page and page.count("<tr>") >= 3
    old = get(ui_url, "/fact", name="deploy-freeze")
    assert "archived: superseded by" in old
    used = get(ui_url, "/fact", name="kiji-yoyaku")
    assert "Shown (0) and used (1)" in used and "公開前に見出しと画像を確認する。" in used
    shown = get(ui_url, "/fact", name="deploy-freeze-thursday")
    assert "Shown (1) and used (0)" in shown


def test_injected_text_and_its_size(ui_url, pinned_clock):
    page = get(ui_url, "/inject", prompt="deploy freeze")
    assert 'id="session-start-size"' in page and "of 10,000 characters" in page
    assert "deploy-freeze-thursday" in page[page.index('id="prompt-text"'):]
    size = int(re.search(r'id="prompt-size">([\d,]+) of', page).group(1).replace(",", ""))
    assert 0 < size < 10_000


def test_episodes_timeline_filters_and_counts(ui_url, pinned_clock):
    page = get(ui_url, "/episodes")
    assert "<p>16 of 16 episodes</p>" in page  # day 0, 3, ... 27 (10) and 0, 5, ... 25 (6)
    days = re.search(r'<svg class="columns".*?</svg>', page).group(0)
    counts = re.findall(r"<title>(2026-03-\d\d): (\d+)</title>", days)
    assert len(counts) == 28  # every day from the first episode's to the last's
    assert sum(1 for _, n in counts if n != "0") == 14  # days 0, 3, 5, 6, 9, 10, 12, 15, 18, 20, 21, 24, 25, 27
    assert "<title>2026-03-01: 2</title>" in days and "<title>2026-03-04: 1</title>" in days
    errors = get(ui_url, "/episodes", type="error")
    assert "<p>6 of 16 episodes</p>" in errors and "記事の公開に失敗した" in errors and "deployed release" not in errors
    writer = get(ui_url, "/episodes", agent="claude-code")
    assert "<p>10 of 16 episodes</p>" in writer


def test_state_numbers_as_line_charts(ui_url, pinned_clock):
    page = get(ui_url, "/state")
    for name, first, last in (("completed", 0, 58), ("pending", 40, 11)):
        chart = re.search(rf'<svg class="line" data-name="{name}".*?</svg>', page).group(0)
        assert chart.count('class="pt"') == 30
        values = [float(v) for v in re.findall(r": ([\d.]+)</title>", chart)]
        assert values[0] == first and values[-1] == last


def test_ledgers_count_values_per_column(ui_url):
    page = get(ui_url, "/ledgers", name="episodes")
    assert "<p>16 rows in ledgers/episodes.tsv</p>" in page
    assert re.search(r"<title>success: 10</title>", page) and re.search(r"<title>error: 6</title>", page)


def test_conflicts_side_by_side(ui_url):
    page = get(ui_url, "/conflicts")
    assert "Changed on two machines (1)" in page
    assert "Japanese and English" in page and "Japanese only" in page


def test_kept_reads_follow_the_files(root, pinned_clock):
    """The views keep big reads while their files are unchanged: a change shows on the next request."""
    import memctl
    from ui_store import serving

    store = memctl.open_store(root)
    memctl.remember(store, "first-fact", "the first fact", vector_check=False)
    with serving(root) as url:
        assert "first-fact" in get(url, "/") and "<p>0 of 0 episodes</p>" in get(url, "/episodes")
        memctl.remember(store, "second-fact", "二つ目の事実", vector_check=False)
        memctl.add_episode(store, "an episode", "success")
        assert "二つ目の事実" in get(url, "/") and "<p>1 of 1 episodes</p>" in get(url, "/episodes")
        assert "二つ目の事実" in get(url, "/fact", name="second-fact")
        assert "second-fact" in get(url, "/inject")


def test_a_pushed_state_number_no_chart_can_draw_is_left_out_of_the_chart(root, pinned_clock):
    """A STATE.md version whose number has 400 digits made /state answer 500 (OverflowError) for as long
    as that commit is in the history; 1e308 and -1e308 drew a dot at `cy="nan"`."""
    from ui_store import serving

    state = root / "state" / "STATE.md"
    state.parent.mkdir(exist_ok=True)
    for n, numbers in enumerate(("big: " + "9" * 400 + "\n  wide: 1e308", "wide: -1e308\n  big: 3", "wide: 0")):
        state.write_text(f"---\nupdated: 2026-12-0{n + 1}T00:00:00Z\nnumbers:\n  {numbers}\n---\n", encoding="utf-8")
        git(root, "add", "state/STATE.md")
        git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", f"state {n}")
    with serving(root) as url:
        page = get(url, "/state")
    charts = {m.group(1): m.group(0) for m in re.finditer(r'<svg class="line" data-name="(\w+)".*?</svg>', page)}
    assert charts["big"].count('class="pt"') == 1 and charts["wide"].count('class="pt"') == 3
    assert "nan" not in page and "inf" not in charts["wide"]


def test_topic_conflicts_side_by_side(root, pinned_clock):
    """`/conflicts?topic=1`: memctl conflicts' pairs (char-ngram: no model to load in a test)."""
    import memctl
    from ui_store import serving

    with (root / "memctl.toml").open("a", encoding="utf-8") as toml:
        toml.write('\n[embedding]\nbackend = "char-ngram"\n')
    store = memctl.open_store(root)
    memctl.remember(store, "freeze-a", "Deploys freeze on Fridays after 15:00", vector_check=False)
    memctl.remember(store, "freeze-b", "Deploys freeze on Fridays after 17:00", vector_check=False)
    with serving(root) as url:
        assert "Compare the live facts" in get(url, "/conflicts")
        page = get(url, "/conflicts", topic="1")
    pair = page[page.index("differ in a detail"):]
    assert "after 15:00" in pair and "after 17:00" in pair and "differs:" in pair


# ---------------------------------------------------------------- safety

def test_bound_to_loopback_only(ui_root):
    from memctl.store import open_store

    httpd = server.make(open_store(ui_root), 0)
    try:
        assert httpd.server_address[0] == "127.0.0.1"
        other = [a for a in socket.gethostbyname_ex(socket.gethostname())[2] if not a.startswith("127.")]
        for address in other:  # the machine's other addresses reach nothing
            with pytest.raises(OSError):
                socket.create_connection((address, httpd.server_address[1]), timeout=2).close()
    finally:
        httpd.server_close()


@pytest.mark.parametrize("headers", [
    {"Host": "evil.example"},
    {"Host": "evil.example:{port}"},  # DNS rebinding: the attacker's name, resolved to 127.0.0.1
    {"Host": "127.0.0.1:1"},
    {"Host": "127.0.0.1:{port}", "Origin": "http://evil.example"},
    {"Host": "127.0.0.1:{port}", "Origin": "null"},
    {"Host": "localhost:{port}", "Origin": "http://localhost:1"},
])
def test_other_hosts_and_origins_are_refused(ui_url, headers):
    port = urlsplit(ui_url).port
    status, _, text = request(ui_url, "/fact?name=kiji-yoyaku", headers={k: v.format(port=port) for k, v in headers.items()})
    assert status == 403 and "記事" not in text


def test_local_host_names_are_served(ui_url):
    port = urlsplit(ui_url).port
    for headers in ({"Host": f"localhost:{port}"}, {"Host": f"127.0.0.1:{port}", "Origin": f"http://127.0.0.1:{port}"},
                    {"Host": f"LocalHost:{port}", "Origin": f"HTTP://LOCALHOST:{port}"}):  # names are case-insensitive
        assert request(ui_url, "/", headers=headers)[0] == 200


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "PROPFIND", "MKCOL"])
def test_read_only(ui_url, ui_root, method):
    head = git(ui_root, "rev-parse", "HEAD")
    status, headers, _ = request(ui_url, "/fact?name=kiji-yoyaku", method=method, body=b"name=x")
    assert status == 405 and headers["Allow"] == "GET, HEAD"
    assert git(ui_root, "rev-parse", "HEAD") == head and git(ui_root, "status", "--porcelain") == ""


def test_head_answers_without_a_body(ui_url):
    status, headers, text = request(ui_url, "/", method="HEAD")
    assert status == 200 and text == "" and int(headers["Content-Length"]) > 0


@pytest.mark.parametrize("path", ["/memctl.toml", "/memory/kiji-yoyaku.md", "/../memctl.toml", "/%2e%2e/etc/passwd",
                                  "/fact/../../etc/passwd", "/ui.css/../memctl.toml", "//etc/passwd"])
def test_nothing_is_served_as_a_file(ui_url, path):
    status, _, text = request(ui_url, path)
    assert status == 404 and "[recall]" not in text and "root:" not in text


@pytest.mark.parametrize("query", ["name=../memctl", "name=%2Fetc%2Fpasswd", "name=a&name=b", "name=a%00b",
                                   "name=" + "a" * 5000, "file=memctl.toml", "name=", "name=%ff%fe"])
def test_path_parameters_are_checked(ui_url, query):
    status, _, text = request(ui_url, "/fact?" + query)
    assert status == 400 and 'class="err"' in text


@pytest.mark.parametrize("path", ["/ledgers?name=../memctl", "/ledgers?name=access.tsv", "/state?scope=../x",
                                  "/episodes?type=..%2F", "/?mode=nope"])
def test_other_names_are_checked_by_the_stores_rules(ui_url, path):
    assert request(ui_url, path)[0] in (400, 404)


def test_text_is_escaped(ui_url):
    page = get(ui_url, "/fact", name=SCRIPT_FACT)
    assert "<script>" not in page and "<img" not in page
    assert "&lt;script&gt;window.__pwned = 1;" in page
    assert "&lt;script&gt;" in get(ui_url, "/", q="fact holding script")


def test_bidi_controls_are_shown_not_obeyed(root):
    """A description holding U+202E (RIGHT-TO-LEFT OVERRIDE) showed `invoice exe.pdf` for
    `invoice \u202efdp.exe`; every cell is isolated too, so right-to-left text stays in its own."""
    from ui_store import serving

    spoof = "invoice \u202efdp.exe"
    assert memctl(root, "remember", "rtl", "-d", spoof, "-t", "project").returncode == 0
    with serving(root) as url:
        for page in (get(url, "/"), get(url, "/fact", name="rtl")):
            assert "\u202e" not in page and "invoice &lt;U+202E&gt;fdp.exe" in page
        assert "unicode-bidi:isolate" in get(url, "/ui.css")


def test_every_answer_carries_a_strict_policy(ui_url):
    for path in ("/", "/fact?name=nope", "/nope", "/ui.css", "/?zz=1"):
        status, headers, _ = request(ui_url, path)
        policy = headers["Content-Security-Policy"]
        assert "default-src 'none'" in policy and "script-src" not in policy  # no script from anywhere
        assert headers["X-Content-Type-Options"] == "nosniff" and headers["X-Frame-Options"] == "DENY"


# ---------------------------------------------------------------- the command

def test_command_serves_then_stops_on_ctrl_c(root, tmp_path, pinned_clock):
    """Without a terminal no browser is opened (webbrowser would run $BROWSER); Ctrl-C stops it, exit 0."""
    opened = tmp_path / "opened"
    browser = tmp_path / "browser.sh"
    browser.write_text(f"#!/bin/sh\necho \"$1\" > {opened}\n")
    browser.chmod(0o755)
    env = {"PYTHONUNBUFFERED": "1", "BROWSER": str(browser), "DISPLAY": ":0"}
    # Ctrl-C's default, as in a terminal's foreground (a shell's background job would pass SIGINT ignored)
    proc = subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(root), "ui"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**__import__("os").environ, **env},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        line = proc.stderr.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line).group(0)
        assert request(url, "/")[0] == 200
        port = urlsplit(url).port
        for sent in (f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n", "GET / HT"):  # a browser gone mid-answer
            reset = socket.create_connection(("127.0.0.1", port), timeout=5)
            reset.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, __import__("struct").pack("ii", 1, 0))
            reset.sendall(sent.encode())
            reset.close()  # SO_LINGER 0: a reset, not a goodbye
        assert request(url, "/")[0] == 200
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and out == ""
    assert err.strip() == "memctl: ui stopped" and "Traceback" not in err
    assert not opened.exists()
    with pytest.raises(OSError):  # the port is closed
        socket.create_connection(("127.0.0.1", urlsplit(url).port), timeout=2).close()


def test_a_browser_opens_only_for_a_person(monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setenv("DISPLAY", ":0")
    assert server.can_open_browser()
    monkeypatch.delenv("DISPLAY")
    assert not server.can_open_browser()  # ssh, a console: the URL only
    monkeypatch.setattr(sys, "platform", "darwin")
    assert server.can_open_browser()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert not server.can_open_browser()  # cron, CI


def test_port_in_use_is_one_line(root):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = memctl(root, "ui", "--no-open", "--port", str(port))
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and result.stderr.startswith("memctl: error:")
    assert f"port {port} on 127.0.0.1 is in use" in result.stderr and "hint: choose another port" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_port_of_a_ui_stopped_a_moment_ago_can_be_taken_again(root):
    """After a browser's requests the stopped server's connections wait in TIME_WAIT for a minute, and
    `memctl ui --port N` said the port was "in use by another program" until then."""
    from memctl.store import open_store

    first = server.make(open_store(root), 0)
    port = first.server_address[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = first.socket.accept()
    accepted.close()  # the server closes first: its side of the connection waits in TIME_WAIT
    client.close()
    first.server_close()
    again = server.make(open_store(root), port)
    again.server_close()


def test_a_silent_connection_is_closed_so_it_holds_no_thread(root, monkeypatch):
    """A client that connects and sends nothing (or a few bytes now and then) held its server thread
    for good; enough of them and the ui answered nobody."""
    from ui_store import serving

    assert server.Handler.timeout is not None and 0 < server.Handler.timeout <= 60  # the shipped limit
    monkeypatch.setattr(server.Handler, "timeout", 0.3)  # the mechanism, without waiting that long
    with serving(root) as url:
        port = int(url.rsplit(":", 1)[1].strip("/"))
        with socket.create_connection(("127.0.0.1", port), timeout=60) as idle:
            assert idle.recv(1) == b""  # closed by the server (a client timeout would raise instead)
        assert "<html" in get(url, "/")  # and the server still answers


def test_bad_port_is_refused(root):
    result = memctl(root, "ui", "--port", "70000")
    assert result.returncode == 2 and "--port must be from 1 to 65535" in result.stderr
