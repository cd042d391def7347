//! The scheduler dashboard in a real browser: headless Chromium (the distribution's package,
//! `scripts/ensure-deps.sh` installs it) loads the page served by two replicas' scheduler,
//! runs its inline script under the page's Content-Security-Policy (the viewer's local times
//! appear), takes a screenshot, and clicks "Run now" — a real form POST with the browser's own
//! `Origin` / `Sec-Fetch-Site` — after which the ledger shows the manual run and the page,
//! reloaded after the 303, lists it. Standalone server only, like `dashboard.rs` (the page reads
//! through the scheduler API, whose cluster behaviour has its own tests).
//!
//! Driven over the DevTools protocol (one websocket, JSON messages): no WebDriver server to
//! install next to the browser. The browser runs in its own process group, killed on drop.
//!
//! The screenshot goes to a temp dir, or to `docs/dashboard.png` (the README's) with
//! `DLOCK_UPDATE_SCREENSHOT=1`. Without Chromium (`DLOCK_CHROMIUM`, or `chromium` /
//! `chromium-browser` on PATH), the test prints why it is skipped — on stderr, uncaptured — and
//! passes.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use base64::Engine;
use dlock_scheduler::{Job, RunOutcome};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::scheduler::dashboard::{Dashboard, job};
use crate::support::{eventually, redis};

/// How long one DevTools step may take before the test fails.
const STEP: Duration = Duration::from_secs(20);

/// Says something the person running the tests must see: straight to stderr, which libtest
/// does not capture (it captures `print!`/`eprint!` only).
fn tell(message: &str) {
    let _ = writeln!(std::io::stderr(), "{message}");
}

/// The Chromium binary to use, if there is one.
fn chromium() -> Option<String> {
    let candidates = match std::env::var("DLOCK_CHROMIUM") {
        Ok(path) => vec![path],
        Err(_) => vec!["chromium".to_owned(), "chromium-browser".to_owned()],
    };
    candidates.into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// A headless Chromium in its own process group and profile directory; killed (the whole
/// group: renderers, GPU and zygote processes too) and reaped on drop.
struct Browser {
    child: Child,
    /// What Chromium printed on stderr, for failure messages.
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts Chromium; returns it with its DevTools websocket address.
    fn start(binary: &str) -> (Browser, String) {
        use std::os::unix::process::CommandExt;
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new(binary)
            .args([
                "--headless",
                // Root (CI, containers) cannot use the sandbox; the browser loads only the
                // test's own page.
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--hide-scrollbars",
                "--force-device-scale-factor=1",
                "--window-size=1280,900",
                "--remote-debugging-port=0",
                "--remote-debugging-address=127.0.0.1",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            // The viewer's zone differs from every job's and from the server's, so the page's
            // conversion shows (and is checked).
            .env("TZ", "Asia/Tokyo")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("could not start {binary}: {e}"));
        let stderr = child.stderr.take().unwrap();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (found, address) = mpsc::channel();
        let lines = log.clone();
        // Reads stderr to the end, so that Chromium never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("DevTools listening on ") {
                    let _ = found.send(url.trim().to_owned());
                }
                lines.lock().unwrap().push(line);
            }
        });
        let browser = Browser {
            child,
            log,
            _profile: profile,
        };
        let ws = address.recv_timeout(STEP).unwrap_or_else(|_| {
            panic!(
                "Chromium did not print its DevTools address:\n{}",
                browser.log()
            )
        });
        (browser, ws)
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// A DevTools protocol connection, attached to one page: commands answered in order, events
/// kept until asked for.
struct Page {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    session: Option<String>,
    next_id: u64,
    events: VecDeque<Value>,
}

impl Page {
    /// Connects to the browser and opens a page (a new target, attached in flat mode).
    async fn open(address: &str) -> Page {
        let (ws, _) = tokio_tungstenite::connect_async(address).await.unwrap();
        let mut page = Page {
            ws,
            session: None,
            next_id: 0,
            events: VecDeque::new(),
        };
        let target = page
            .call("Target.createTarget", json!({ "url": "about:blank" }))
            .await;
        let attached = page
            .call(
                "Target.attachToTarget",
                json!({ "targetId": target["targetId"], "flatten": true }),
            )
            .await;
        page.session = Some(attached["sessionId"].as_str().unwrap().to_owned());
        page.call("Page.enable", json!({})).await;
        page
    }

    /// Sends a command (to the page's session once attached) and returns its result.
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = &self.session {
            message["sessionId"] = json!(session);
        }
        self.ws
            .send(Message::text(message.to_string()))
            .await
            .unwrap();
        loop {
            let reply = self.receive(method).await;
            if reply["id"] == id {
                assert!(reply["error"].is_null(), "{method}: {reply}");
                return reply["result"].clone();
            }
            self.events.push_back(reply);
        }
    }

    /// The next event named `method` (kept ones first).
    async fn event(&mut self, method: &str) -> Value {
        if let Some(i) = self.events.iter().position(|e| e["method"] == method) {
            return self.events.remove(i).unwrap_or_default();
        }
        loop {
            let message = self.receive(method).await;
            if message["method"] == method {
                return message;
            }
            self.events.push_back(message);
        }
    }

    async fn receive(&mut self, waiting_for: &str) -> Value {
        loop {
            let message = tokio::time::timeout(STEP, self.ws.next())
                .await
                .unwrap_or_else(|_| panic!("no answer from Chromium for {waiting_for}"))
                .unwrap_or_else(|| panic!("Chromium closed the connection ({waiting_for})"))
                .unwrap();
            if let Message::Text(text) = message {
                return serde_json::from_str(text.as_str()).unwrap();
            }
        }
    }

    /// Loads `url` and waits for its load event.
    async fn navigate(&mut self, url: &str) {
        self.events.clear();
        let nav = self.call("Page.navigate", json!({ "url": url })).await;
        assert!(nav["errorText"].is_null(), "{url}: {nav}");
        self.event("Page.loadEventFired").await;
    }

    /// Evaluates `expression` in the page; its value.
    async fn eval(&mut self, expression: &str) -> Value {
        let result = self
            .call(
                "Runtime.evaluate",
                json!({ "expression": expression, "returnByValue": true }),
            )
            .await;
        assert!(
            result["exceptionDetails"].is_null(),
            "{expression}: {result}"
        );
        result["result"]["value"].clone()
    }

    /// A PNG of the whole page.
    async fn screenshot(&mut self) -> Vec<u8> {
        let metrics = self.call("Page.getLayoutMetrics", json!({})).await;
        let size = &metrics["cssContentSize"];
        let clip = json!({
            "x": 0, "y": 0, "scale": 1,
            "width": size["width"].as_f64().unwrap_or(1280.0),
            "height": size["height"].as_f64().unwrap_or(900.0).min(2400.0),
        });
        let shot = self
            .call(
                "Page.captureScreenshot",
                json!({ "format": "png", "clip": clip, "captureBeyondViewport": true }),
            )
            .await;
        base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap()
    }
}

/// Where the screenshot goes: the README's with `DLOCK_UPDATE_SCREENSHOT=1`, else a temp dir.
fn screenshot_path(temp: &tempfile::TempDir) -> PathBuf {
    if std::env::var("DLOCK_UPDATE_SCREENSHOT").is_ok_and(|v| v == "1") {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/dashboard.png")
    } else {
        temp.path().join("dashboard.png")
    }
}

/// The demo-like jobs both replicas run.
fn jobs() -> Vec<Job> {
    vec![
        job("lottery", "*/2 * * * * *", "Europe/Berlin"),
        job("invoice-export", "0 6 * * 1", "America/New_York"),
        job("nightly-report", "30 2 * * *", "Europe/Berlin"),
        Job::new("cache-warmup", "*/3 * * * * *", "UTC", |_ctx| async {
            Err::<(), _>("upstream answered 503 after 2 s")
        })
        .unwrap(),
    ]
}

/// The Chromium to use, or `None` after saying on stderr why `test` is skipped.
fn chromium_or_skip(test: &str) -> Option<String> {
    let found = chromium();
    if found.is_none() {
        let looked = std::env::var("DLOCK_CHROMIUM").map_or_else(
            |_| "`chromium` and `chromium-browser` on PATH".to_owned(),
            |path| format!("DLOCK_CHROMIUM={path}"),
        );
        tell(&format!(
            "SKIPPED dashboard_browser::{test}: no runnable Chromium ({looked}); \
             scripts/ensure-deps.sh installs it as root on Debian (apt-get install chromium)"
        ));
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_shows_the_dashboard_and_runs_a_job_now() {
    let Some(binary) = chromium_or_skip("chromium_shows_the_dashboard_and_runs_a_job_now") else {
        return;
    };
    let started = Instant::now();
    let server = redis();
    let d = Dashboard::start(&server, vec![("replica-a", jobs()), ("replica-b", jobs())]).await;
    d.admin.pause("nightly-report").await.unwrap();
    // Some history first: a few draws of the lottery (both replicas take turns) and a failure.
    eventually(Duration::from_secs(20), "runs on both replicas", || async {
        let lottery = d.admin.history("lottery").await.unwrap();
        let done = lottery
            .iter()
            .filter(|r| r.outcome == RunOutcome::Succeeded);
        let replicas: std::collections::BTreeSet<_> = done.map(|r| r.replica.clone()).collect();
        let failed = d
            .admin
            .history("cache-warmup")
            .await
            .unwrap()
            .iter()
            .any(|r| matches!(r.outcome, RunOutcome::Failed(_)));
        (replicas.len() == 2 && failed).then_some(())
    })
    .await;

    let (browser, address) = Browser::start(&binary);
    let mut page = Page::open(&address).await;
    page.navigate(&d.base).await;
    let title = page.eval("document.title").await;
    assert_eq!(title, "dlock scheduler", "{}", browser.log());
    let rows = page
        .eval("document.querySelectorAll('table.jobs tbody tr').length")
        .await;
    assert_eq!(rows, 4);
    // The inline script ran (its hash is in the CSP): instants also in the viewer's zone.
    let viewer = page
        .eval("document.querySelectorAll('small.viewer').length")
        .await;
    assert!(viewer.as_u64().unwrap_or(0) >= 4, "viewer times: {viewer}");
    let next = page
        .eval("document.querySelector('tr[data-job=\"lottery\"] small.viewer').textContent")
        .await;
    let next = next.as_str().unwrap_or_default();
    assert!(
        next.starts_with("your time: ") && next.contains("GMT+9"),
        "the next fire in the viewer's zone (Asia/Tokyo): {next:?}"
    );
    let paused = page
        .eval("document.querySelector('tr[data-job=\"nightly-report\"] .badge').textContent")
        .await;
    assert_eq!(paused, "paused");

    // "Run now" on a job whose schedule does not fire during the test: a real form POST.
    page.events.clear();
    page.eval(
        "document.querySelector('form[data-job=\"invoice-export\"] button[value=\"run-now\"]').click()",
    )
    .await;
    page.event("Page.loadEventFired").await;
    let url = page.eval("location.href").await;
    assert_eq!(url, json!(d.base), "the 303 leads back to the page");
    let run = d.ran("invoice-export", |r| r.manual).await;
    assert_eq!(run.outcome, RunOutcome::Succeeded);
    page.navigate(&d.base).await;
    let trigger = page
        .eval("document.querySelector('table.runs[data-job=\"invoice-export\"] tbody tr td:nth-child(2)').textContent")
        .await;
    assert_eq!(trigger, "run now");

    let temp = tempfile::tempdir().unwrap();
    let png = page.screenshot().await;
    assert!(png.len() > 10_000, "a real screenshot: {} bytes", png.len());
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let path = screenshot_path(&temp);
    std::fs::write(&path, &png).unwrap();
    drop(page);
    drop(browser);
    d.stop().await;
    tell(&format!(
        "dashboard_browser: {} ({} bytes) in {:.1} s",
        path.display(),
        png.len(),
        started.elapsed().as_secs_f64()
    ));
}

/// Issue #51: the dashboard lists the handlers of one-off jobs and their pending jobs (what,
/// when, with which idempotency key, as text: markup in a key is shown, never run), and its Pause button pauses a handler's one-off jobs before any of them ran,
/// served by a scheduler without the handler (the same form and same-origin POST as the jobs';
/// it answered 404 "not known" before);
/// `?utc=1` shows every time in UTC instead of the job's zone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_lists_pending_one_offs_and_pauses_their_handler() {
    let test = "chromium_lists_pending_one_offs_and_pauses_their_handler";
    let Some(binary) = chromium_or_skip(test) else {
        return;
    };
    let server = redis();
    let d = Dashboard::start_with_handlers(
        &server,
        vec![
            (
                "replica-a",
                vec![job("lottery", "*/2 * * * * *", "Europe/Berlin")],
            ),
            ("replica-b", Vec::new()),
        ],
        &["send_report"],
    )
    .await;
    // Registered by replica-b only: the page's scheduler (replica-a's) does not have it.
    eventually(STEP, "replica-b registered the handler", || async {
        let handlers = d.admin.one_off_handlers().await.unwrap();
        handlers
            .iter()
            .any(|h| h.name == "send_report" && h.replicas == ["replica-b"])
            .then_some(())
    })
    .await;
    let (browser, address) = Browser::start(&binary);
    let mut page = Page::open(&address).await;
    page.navigate(&d.base).await;
    let row = "table.handlers tr[data-handler=\"send_report\"]";
    let state = page
        .eval(&format!(
            "document.querySelector('{row} .badge').textContent"
        ))
        .await;
    assert_eq!(state, "active", "{}", browser.log());
    // Nothing enqueued yet: no one-off of the handler ever existed.
    let none = page
        .eval("document.querySelectorAll('table.pending').length")
        .await;
    assert_eq!(none, 0);

    // Pause the handler's one-off jobs: a real form POST, before any one-off was even enqueued.
    page.events.clear();
    page.eval(&format!(
        "document.querySelector('{row} button[value=\"pause\"]').click()"
    ))
    .await;
    page.event("Page.loadEventFired").await;
    assert_eq!(
        page.eval("location.href").await,
        json!(d.base),
        "303 back to the page"
    );
    assert!(d.admin.is_paused("once:send_report").await.unwrap());
    let state = page
        .eval(&format!(
            "document.querySelector('{row} .badge').textContent"
        ))
        .await;
    assert_eq!(state, "paused");

    // Enqueued by a process that registers the handler but runs nothing: due in an hour and
    // in two (not run during the test), one with an idempotency key.
    let enqueuer = dlock_scheduler::Scheduler::builder(
        dlock_core::Client::open(server.url().as_str()).unwrap(),
    )
    .handler("send_report", |_ctx| async { Ok::<(), String>(()) })
    .build()
    .unwrap();
    let key = "<b>invoice</b> & \"4711\"";
    let keyed = enqueuer
        .run_after_keyed("send_report", key, Duration::from_secs(3600), &4711)
        .await
        .unwrap();
    let plain = enqueuer
        .run_after(
            "send_report",
            Duration::from_secs(7200),
            &json!({"tenant": "acme"}),
        )
        .await
        .unwrap();

    page.navigate(&d.base).await;
    let queued = page
        .eval(&format!(
            "document.querySelector('{row} td.queued').textContent"
        ))
        .await;
    assert_eq!(queued, "2");
    let ids = page
        .eval(
            "[...document.querySelectorAll('table.pending[data-handler=\"send_report\"] \
             tbody tr')].map(r => r.dataset.id)",
        )
        .await;
    assert_eq!(
        ids,
        json!([keyed.to_string(), plain.to_string()]),
        "due first"
    );
    let cells = page
        .eval(&format!(
            "[...document.querySelectorAll('tr[data-id=\"{keyed}\"] td')].map(c => c.textContent)"
        ))
        .await;
    assert_eq!(cells[2], "1", "attempt: {cells}");
    assert_eq!(cells[3], key, "the key, as text: {cells}");
    let markup = page
        .eval(&format!(
            "document.querySelectorAll('tr[data-id=\"{keyed}\"] td b').length"
        ))
        .await;
    assert_eq!(markup, 0, "the key's markup was escaped");
    let plain_key = page
        .eval(&format!(
            "document.querySelectorAll('tr[data-id=\"{plain}\"] td')[3].textContent"
        ))
        .await;
    assert_eq!(plain_key, "–", "no key");
    assert_eq!(cells[5], "4711", "arguments: {cells}");

    // The one zone policy: the job's zone, or UTC on request.
    let next = "document.querySelector('tr[data-job=\"lottery\"] time').textContent";
    let zoned = page.eval(next).await;
    let zoned = zoned.as_str().unwrap_or_default();
    assert!(
        zoned.ends_with(" CET") || zoned.ends_with(" CEST"),
        "{zoned:?}"
    );
    page.events.clear();
    page.eval("document.querySelector('a.zones').click()").await;
    page.event("Page.loadEventFired").await;
    let in_utc = page.eval(next).await;
    assert!(
        in_utc.as_str().unwrap_or_default().ends_with(" UTC"),
        "{in_utc}"
    );
    drop(page);
    drop(browser);
    d.stop().await;
}
